package worker

import (
	"context"
	"time"

	"github.com/seckill/seckill/redisgateway"
)

// leaveGrace is how long a waitlist join may take from Redis's answer to
// its database record (the API's waitlist timeout, with a margin): a
// waiter the database still lacks after it joined no more.
const leaveGrace = 15 * time.Second

// suspectWaiters are a sale's waiters the database lacked when found.
type suspectWaiters struct {
	found   time.Time
	waiters []redisgateway.Waiter
}

// suspectLostLeaves notes the waiters of a sale Redis has and the
// database does not keep, after Redis restarted or failed over. A leave
// takes the user off Redis before the database, and a join puts them on
// Redis first: Redis is read first, so a leave or hand-over the database
// saw and Redis lost shows as a waiter the database lacks; a join still
// on its way to its record shows the same, and is told apart later
// (dropLostLeaves). Any join number may be concerned: a lost leave can
// be of a join made long before.
func (r *Resyncer) suspectLostLeaves(ctx context.Context, saleID int64, now time.Time) error {
	onRedis, err := r.Redis.Waiters(ctx, saleID)
	if err != nil || len(onRedis) == 0 {
		return err
	}
	suspects, err := r.unkept(ctx, saleID, onRedis)
	if err != nil || len(suspects) == 0 {
		return err
	}
	if r.leaveSuspects == nil {
		r.leaveSuspects = make(map[int64]suspectWaiters)
	}
	r.leaveSuspects[saleID] = suspectWaiters{found: now, waiters: suspects}
	return nil
}

// unkept answers the waiters among ws the database does not keep under
// that join number.
func (r *Resyncer) unkept(ctx context.Context, saleID int64, ws []redisgateway.Waiter) ([]redisgateway.Waiter, error) {
	kept, err := r.Store.WaitingJoins(ctx, saleID)
	if err != nil {
		return nil, err
	}
	in := make(map[redisgateway.Waiter]bool, len(kept))
	for _, w := range waiters(kept) {
		in[w] = true
	}
	var out []redisgateway.Waiter
	for _, w := range ws {
		if !in[w] {
			out = append(out, w)
		}
	}
	return out, nil
}

// dropLostLeaves takes off Redis the suspects the database still lacks
// once leaveGrace has passed since they were found: every join then in
// flight has recorded or failed, so each is a leave or hand-over Redis
// lost. A user who joined again since waits under a new number and stays.
// A sale whose look fails is looked at again on the next tick.
func (r *Resyncer) dropLostLeaves(ctx context.Context, now time.Time) {
	for saleID, s := range r.leaveSuspects {
		if now.Sub(s.found) < leaveGrace {
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		n, err := r.dropUnkept(dctx, saleID, s.waiters)
		cancel()
		if err != nil {
			r.Logger.Warn("resync: take off waiters whose leave Redis lost", "sale_id", saleID, "err", err)
			continue
		}
		delete(r.leaveSuspects, saleID)
		if n > 0 {
			r.Logger.Warn("resync: Redis lost waitlist leaves (lost acknowledged writes); took the waiters off",
				"sale_id", saleID, "dropped", n)
		}
	}
}

func (r *Resyncer) dropUnkept(ctx context.Context, saleID int64, suspects []redisgateway.Waiter) (int64, error) {
	still, err := r.unkept(ctx, saleID, suspects)
	if err != nil || len(still) == 0 {
		return 0, err
	}
	return r.Redis.DropWaiters(ctx, saleID, still)
}
