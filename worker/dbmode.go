package worker

import (
	"context"
	"log/slog"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/degraded"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/sales"
	"github.com/seckill/seckill/store"
)

// Comeback is the degraded mode's way back to Redis (degraded.Comeback):
// when a sale on the database path may return, and the roll-back of a
// resync that stalled.
type Comeback interface {
	// Pinged records whether Redis answered this worker's ping at now.
	Pinged(answered bool, now time.Time)
	MayReturn(ctx context.Context, s *domain.Sale, now time.Time) bool
	AbortStalled(ctx context.Context, saleID int64) (bool, error)
}

// Resyncer returns sales from database mode to Redis when the degraded
// mode's way back allows it, rolls back resyncs that stalled, and rebuilds
// live sales whose Redis lost writes.
type Resyncer struct {
	Store *store.Store
	Redis *redisgateway.Client
	// Temporal lists the holds whose workflows run unrecorded, which a
	// rebuild must count (sales.RebuildLost); nil counts none.
	Temporal client.Client
	Comeback Comeback
	Logger   *slog.Logger
	// Rebuilt, when set, hears of each rebuild of a sale whose keys Redis
	// lost (wentBack false) or whose Redis went back in time, and how long
	// it took.
	Rebuilt func(wentBack bool, took time.Duration)
	// HoldsLost, when set, hears at each change of Redis's identity, and
	// at the first look, from when holds' inbox entries may be lost, and
	// the time (LostHolds.Changed).
	HoldsLost func(since, now time.Time)

	// identity is Redis's lineage as last read (redisgateway.Client.Identity); a
	// change means a restart or a promotion, which may have lost writes.
	identity string
	// identitySeen is when identity was last read: the Redis before a
	// change lost at most the writes of lostWritesSpan before it.
	identitySeen time.Time
	// unverified names the open sales whose writes a Redis that went (a
	// restart, a promotion) may have lost, each with the join number from
	// which (identityChanged). A sale is checked at its first look as a
	// live sale on Redis, so one mid-rebuild at the change is checked once
	// it is back, and one whose check failed is checked again.
	unverified map[int64]int64
	// leaveSuspects holds, per sale, the waiters Redis had after a change
	// that the database did not keep: a leave or hand-over the Redis that
	// went lost, or a join whose record was still on its way. They are
	// read again once every join then in flight has recorded or failed
	// (leaveGrace), and those still unkept are taken off.
	leaveSuspects map[int64]suspectWaiters
	// watch names the sales whose keys to check on a tick: those the
	// change feed names (a reserve that found the keys gone notes its
	// sale) and the tick's share of a full pass.
	watch changeWatch
}

// Run resyncs every degraded.ResyncEvery until ctx ends.
func (r *Resyncer) Run(ctx context.Context) {
	everyTick(ctx, degraded.ResyncEvery, true, func() { r.Once(ctx) })
}

// Once checks every open sale once. The live sales on Redis due for a
// key check (changeWatch) are checked together, before the sales off
// Redis are handled: one round trip however many are due, so a sale the
// feed names is rebuilt within the tick whatever the number of sales.
func (r *Resyncer) Once(ctx context.Context) {
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	dir, err := r.Store.OpenSales(lctx)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			r.Logger.Warn("resync: list sales", "err", err)
		}
		return
	}
	open := dir.List()
	pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	pingErr := r.Redis.Ping(pctx)
	cancel()
	now := time.Now()
	r.Comeback.Pinged(pingErr == nil, now)
	if pingErr == nil {
		if changed, lostSince := r.identityChanged(ctx); changed {
			r.noteUnverified(open, lostSince)
		}
		r.dropLostLeaves(ctx, now)
	}
	due := r.due(ctx, now, pingErr == nil)
	var check, off []*domain.Sale
	for _, s := range open {
		switch {
		case s.Mode != domain.ModeRedis:
			off = append(off, s)
		case pingErr == nil && liveOnRedis(s, now):
			// Live sales only: an ended or stopped one is being torn down,
			// which deletes its keys on purpose.
			if s, ok := r.checked(ctx, s, due); ok {
				check = append(check, s)
			}
		}
	}
	r.rebuildLost(ctx, check)
	for _, s := range off {
		r.offRedis(ctx, s, now)
	}
}

// liveOnRedis reports whether a sale on Redis sells at now: warmed, not
// ended, not stopped.
func liveOnRedis(s *domain.Sale, now time.Time) bool {
	return s.Warmed && now.Before(s.EndsAt) && s.Control != domain.ControlStopped
}

// checked answers whether a live sale on Redis has its keys checked on
// this tick: due, marked went back, or unverified since Redis changed
// (whose counters are compared first, which may mark it went back: the
// sale answered is then a copy, as the directory's is shared).
func (r *Resyncer) checked(ctx context.Context, s *domain.Sale, due dueSet) (*domain.Sale, bool) {
	lostSince, verify := r.unverified[s.ID]
	if verify {
		own := *s
		s = &own
		if r.verifyCounters(ctx, s, lostSince) {
			delete(r.unverified, s.ID)
		}
	}
	return s, verify || due.has(s.ID) || s.RedisWentBack
}

// offRedis handles a sale off Redis: a stalled resync is rolled back, a
// sale in database mode goes back to Redis when the way back allows.
func (r *Resyncer) offRedis(ctx context.Context, s *domain.Sale, now time.Time) {
	switch s.Mode {
	case domain.ModeResync:
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		rolled, err := r.Comeback.AbortStalled(actx, s.ID)
		cancel()
		if err != nil {
			r.Logger.Warn("resync: roll back a stalled resync", "sale_id", s.ID, "err", err)
		} else if rolled {
			r.Logger.Warn("resync: rolled back a stalled resync to database mode", "sale_id", s.ID)
		}
	case domain.ModeDatabase:
		if !r.Comeback.MayReturn(ctx, s, now) {
			return
		}
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		done, err := sales.Resync(rctx, r.Store, r.Redis, r.Temporal, s.ID)
		cancel()
		if err != nil {
			r.Logger.Error("resync: sale stays in database mode", "sale_id", s.ID, "err", err)
		} else if done {
			r.Logger.Info("resync: sale is back on Redis", "sale_id", s.ID)
		}
	}
}

// rebuildLost rebuilds the sales of check whose Redis went back in time,
// and those whose keys Redis lost, found by one check of them all
// (redisgateway.Client.SalesKeysLost). A check that fails leaves the
// sales to the next tick: Redis failing is the breaker's and the ping's
// business.
func (r *Resyncer) rebuildLost(ctx context.Context, check []*domain.Sale) {
	ids := make([]int64, 0, len(check))
	for _, s := range check {
		if !s.RedisWentBack {
			ids = append(ids, s.ID)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, redisTimeout)
	lost, err := r.Redis.SalesKeysLost(cctx, ids)
	cancel()
	if err != nil && ctx.Err() == nil {
		r.Logger.Warn("resync: check live sales' keys", "sales", len(ids), "err", err)
	}
	for _, s := range check {
		if s.RedisWentBack || lost[s.ID] {
			r.rebuild(ctx, s)
		}
	}
}

// due answers the sales to check on this tick (changeWatch); with Redis
// not answering it names none.
func (r *Resyncer) due(ctx context.Context, now time.Time, redisUp bool) dueSet {
	if !redisUp {
		return dueSet{shares: 1, share: -1}
	}
	r.watch.Redis, r.watch.Every = r.Redis, degraded.ResyncEvery
	due, err := r.watch.due(ctx)
	if err != nil && ctx.Err() == nil {
		r.Logger.Warn("resync: change feed", "err", err)
	}
	r.watch.done(now)
	return due
}

// lostWritesSpan bounds how long before it stopped serving a Redis may
// have acknowledged writes it then lost: an AOF fsynced every second loses
// at most its last two seconds, a promoted replica what it lagged by; the
// rest allows for the clocks of Redis and this worker.
const lostWritesSpan = time.Minute

// identityChanged reports whether Redis restarted or a replica was
// promoted since the last look (and at the first look, after this worker
// started): then every live sale is checked once for lost writes. lostSince
// is the join number (Redis's clock in µs) from which waitlist joins may
// be lost: lostWritesSpan before the last look at the Redis that went, 0
// (every join) at the first look.
func (r *Resyncer) identityChanged(ctx context.Context) (changed bool, lostSince int64) {
	ictx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	id, err := r.Redis.Identity(ictx)
	cancel()
	if err != nil {
		return false, 0
	}
	seen, now := r.identitySeen, time.Now()
	r.identitySeen = now
	if id == r.identity {
		return false, 0
	}
	holdsFrom := now // the first look: what went before this worker is unknown
	if r.identity != "" {
		r.Logger.Warn("resync: Redis restarted or failed over; checking every live sale for lost writes")
		lostSince = seen.Add(-lostWritesSpan).UnixMicro()
		holdsFrom = seen
	}
	if r.HoldsLost != nil {
		r.HoldsLost(holdsFrom.Add(-lostWritesSpan), now)
	}
	r.identity = id
	return true, lostSince
}

// noteUnverified notes every open sale for a check for lost writes since
// lostSince, keeping an earlier mark of a sale not yet checked, and drops
// the marks of sales no longer open.
func (r *Resyncer) noteUnverified(open []*domain.Sale, lostSince int64) {
	next := make(map[int64]int64, len(open))
	for _, s := range open {
		next[s.ID] = lostSince
		if prev, ok := r.unverified[s.ID]; ok && prev < lostSince {
			next[s.ID] = prev
		}
	}
	r.unverified = next
}

// verifyCounters marks a live sale whose Redis counters are behind the
// database's (a hold number or a waitlist join the database recorded that
// Redis never reached): Redis lost acknowledged writes, and the sale is
// rebuilt like one a hold found behind (store.MarkRedisWentBack). It
// finds what no later hold would: a sold-out sale's lost waitlist joins.
// A join number is Redis's clock, not a counter, so a join made after the
// loss hides a lost one from the comparison: the joins made since
// lostSince are then looked up one by one (restoreLostJoins). Hold numbers
// need no such look: they are a counter that goes back with Redis, and the
// database refuses a number it recorded. It reports whether the check was
// made (no store failed it).
func (r *Resyncer) verifyCounters(ctx context.Context, s *domain.Sale, lostSince int64) bool {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// The database first: every number it records Redis handed out
	// before, so Redis read after it is at least as far unless it went
	// back. Read the other way round, holds recorded between the two
	// reads under load would pass for lost writes.
	maxSeq, maxJoin, err := r.Store.RedisCounters(cctx, s.ID)
	if err != nil {
		r.Logger.Warn("resync: read a sale's recorded counters", "sale_id", s.ID, "err", err)
		return false
	}
	holds, lastJoin, err := r.Redis.HoldCounters(cctx, s.ID)
	if err != nil {
		r.Logger.Warn("resync: read a sale's Redis counters", "sale_id", s.ID, "err", err)
		return false
	}
	if holds >= maxSeq && lastJoin >= maxJoin {
		if err := r.restoreLostJoins(cctx, s.ID, lostSince); err != nil {
			r.Logger.Warn("resync: restore lost waitlist joins", "sale_id", s.ID, "err", err)
			return false
		}
		if err := r.suspectLostLeaves(cctx, s.ID, time.Now()); err != nil {
			r.Logger.Warn("resync: look for lost waitlist leaves", "sale_id", s.ID, "err", err)
			return false
		}
		return true
	}
	r.Logger.Warn("resync: Redis is behind the database (lost acknowledged writes)", "sale_id", s.ID,
		"holds", holds, "recorded_holds", maxSeq, "last_join", lastJoin, "recorded_join", maxJoin)
	if err := r.Store.MarkRedisWentBack(cctx, s.ID); err != nil {
		r.Logger.Warn("resync: mark a sale for a rebuild", "sale_id", s.ID, "err", err)
		return false
	}
	s.RedisWentBack = true
	return true
}

// restoreLostJoins puts back, at their places, the waitlist joins made
// since lostSince that the database keeps and Redis lacks. The database is
// read first: a join it recorded was on Redis before, so one missing there
// now was lost, served (a hand-over's buyer mark, which the restore
// respects) or left. A leave takes the user off Redis before the
// database, so the missing joins are read from the database again and
// only those still there are restored.
func (r *Resyncer) restoreLostJoins(ctx context.Context, saleID, lostSince int64) error {
	joins, err := r.Store.WaitingJoinsSince(ctx, saleID, lostSince)
	if err != nil || len(joins) == 0 {
		return err
	}
	missing, err := r.Redis.WaitlistMissing(ctx, saleID, waiters(joins))
	if err != nil || len(missing) == 0 {
		return err
	}
	again, err := r.Store.WaitingJoinsSince(ctx, saleID, missing[0].Joined)
	if err != nil {
		return err
	}
	kept := make(map[redisgateway.Waiter]bool, len(again))
	for _, w := range waiters(again) {
		kept[w] = true
	}
	still := missing[:0]
	for _, w := range missing {
		if kept[w] {
			still = append(still, w)
		}
	}
	n, err := r.Redis.RestoreWaitlist(ctx, saleID, still)
	if err != nil {
		return err
	}
	if n > 0 {
		r.Logger.Warn("resync: Redis lost waitlist joins (lost acknowledged writes); restored them at their places",
			"sale_id", saleID, "restored", n, "missing", len(missing))
	}
	return nil
}

// waiters converts the database's joins to Redis's waiters.
func waiters(joins []store.WaitJoin) []redisgateway.Waiter {
	out := make([]redisgateway.Waiter, len(joins))
	for i, j := range joins {
		out[i] = redisgateway.Waiter{UserID: j.UserID, Joined: j.Joined}
	}
	return out
}

// rebuild rebuilds a live sale whose keys Redis lost (a key deleted, a
// restart without its AOF, a failover to an empty replica): the reserve
// script answers not_ready for it, which no breaker counts, so nothing
// else would bring it back. It rebuilds a sale whose Redis went back in
// time (a failover to a lagging replica, an AOF missing its tail: a hold
// found its number in the database, store.MarkRedisWentBack) the same
// way: the database decided every hold meanwhile, and the rebuild gives
// Redis back the holds, buyer marks and stock it lost.
func (r *Resyncer) rebuild(ctx context.Context, s *domain.Sale) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	why := "Redis lost a live sale's keys"
	if s.RedisWentBack {
		why = "Redis went back in time (lost acknowledged writes)"
		if took, err := r.Store.TakeRedisWentBack(cctx, s.ID); err != nil || !took {
			if err != nil {
				r.Logger.Warn("resync: take the went-back mark", "sale_id", s.ID, "err", err)
			}
			return // another worker took it
		}
	}
	began := time.Now()
	r.Logger.Warn("resync: rebuilding a sale from the database", "sale_id", s.ID, "why", why)
	done, err := sales.RebuildLost(cctx, r.Store, r.Redis, r.Temporal, s.ID)
	switch {
	case err != nil:
		r.Logger.Error("resync: rebuilding a sale failed; it stays on the database path", "sale_id", s.ID, "why", why, "err", err)
	case done:
		r.Logger.Info("resync: sale rebuilt and back on Redis", "sale_id", s.ID, "why", why, "took", time.Since(began))
		if r.Rebuilt != nil {
			r.Rebuilt(s.RedisWentBack, time.Since(began))
		}
	}
}
