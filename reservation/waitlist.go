package reservation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/gate"
	"github.com/seckill/seckill/internal/reqid"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/salecache"
	"github.com/seckill/seckill/store"
)

// The waitlist: users wait in Redis (redisgateway/waitlist.go) for units returned
// after a sale sold out; every API instance offers those units to the
// waitlist's head once a second (HandOverAll), each one a Redis hold
// exactly like a 202's, recorded in MySQL at once and started by the
// relay.

// Bounds of the waitlist's calls, and how many waiters one hand-over
// offers units to.
const (
	waitlistTimeout = 10 * time.Second
	handOverTimeout = 2 * time.Second
	waitlistBatch   = 32
	// TimeSlack is how far an in-process check of a sale's window stays
	// from its edges: the authoritative check runs on Redis's clock in
	// the script (or the database's).
	TimeSlack = 2 * time.Second
)

// WaitlistDeps are what the waitlist needs. Starter, when set, starts a
// handed-over hold's workflow (SECKILL_API_STARTS_REDIS_ORDERS); HandedOver
// counts each unit handed over.
type WaitlistDeps struct {
	Cache      *salecache.Cache
	Gate       *gate.Service
	Store      *store.Store
	Redis      *redisgateway.Client
	Holds      *Holds
	Starter    Starter
	TokenKey   []byte
	HandedOver func()
	Logger     *slog.Logger
}

// Waitlist is the use cases of a sale's waitlist. Refusals are
// *domain.Error; a failure of Redis or the database is a 503.
type Waitlist struct{ d WaitlistDeps }

// NewWaitlist is the waitlist of d.
func NewWaitlist(d WaitlistDeps) *Waitlist { return &Waitlist{d: d} }

// Join puts user on the sale's waitlist and answers their position.
func (w *Waitlist) Join(ctx context.Context, e *salecache.Entry, user int64, now time.Time) (int64, error) {
	sale := e.Sale()
	if err := w.mayWait(ctx, sale, user, now); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, waitlistTimeout)
	defer cancel()
	if !e.OnRedis(sale.ModeEpoch) {
		// Redis's buyer marks lag the database path: ask the database.
		holds, err := w.d.Store.HoldsAnotherLive(ctx, sale.ID, user, "")
		if err != nil {
			return 0, w.failed(ctx, "waitlist: live reservations", err)
		}
		if holds {
			return 0, domain.ErrAlreadyHolds
		}
	}
	pos, joined, err := w.d.Redis.JoinWaitlist(ctx, sale.ID, user)
	if errors.Is(err, domain.ErrAlreadyHolds) {
		return 0, err
	}
	if err != nil {
		return 0, w.failed(ctx, "waitlist: join", err)
	}
	// The 200 keeps the place through a Redis that loses writes: the
	// rebuild puts back every join the database kept.
	kept, err := w.d.Store.RecordWaitlistJoin(ctx, sale.ID, store.WaitJoin{UserID: user, Joined: joined})
	if err != nil {
		return 0, w.failed(ctx, "waitlist: record the join", err)
	}
	if kept != joined {
		return w.keepEarlierPlace(ctx, sale.ID, user, joined, kept)
	}
	return pos, nil
}

// keepEarlierPlace moves back to its earlier join a user whose join Redis
// lost (a restart or failover dropped it) before they joined again and
// the worker's look at the new Redis put it back: the database kept the
// earlier join, whose place the first 200 promised.
func (w *Waitlist) keepEarlierPlace(ctx context.Context, saleID, user, joined, kept int64) (int64, error) {
	if _, err := w.d.Redis.DropWaiters(ctx, saleID, []redisgateway.Waiter{{UserID: user, Joined: joined}}); err != nil {
		return 0, w.failed(ctx, "waitlist: move back to the earlier join", err)
	}
	if _, err := w.d.Redis.RestoreWaitlist(ctx, saleID, []redisgateway.Waiter{{UserID: user, Joined: kept}}); err != nil {
		return 0, w.failed(ctx, "waitlist: move back to the earlier join", err)
	}
	reqid.Logger(ctx, w.d.Logger).Warn("waitlist: Redis had lost the user's join; back at its place",
		"sale_id", saleID, "user_id", user, "joined", kept)
	pos, err := w.d.Redis.WaitlistPosition(ctx, saleID, user)
	if err != nil {
		return 0, w.failed(ctx, "waitlist: position", err)
	}
	return pos, nil
}

// mayWait refuses a user the waitlist of a sale they could not buy in.
func (w *Waitlist) mayWait(ctx context.Context, sale *domain.Sale, user int64, now time.Time) error {
	switch {
	case sale.Control == domain.ControlStopped || now.After(sale.EndsAt.Add(TimeSlack)):
		return domain.ErrSaleEnded
	case now.Before(sale.StartsAt.Add(-TimeSlack)):
		return domain.ErrSaleNotStarted
	case w.d.Cache.Blacklisted(user):
		return domain.Errorf(domain.EBlacklisted, "this user may not buy")
	}
	eligible, err := w.d.Gate.Eligible(ctx, sale, user)
	var de *domain.Error
	switch {
	case errors.As(err, &de):
		return err
	case err != nil:
		reqid.Logger(ctx, w.d.Logger).Error("waitlist: gate", "sale_id", sale.ID, "err", err)
		return domain.Unavailable("database unavailable; retry")
	case !eligible:
		return domain.Errorf(domain.ENotEligible, "this sale is restricted to listed users")
	}
	return nil
}

// Position is user's place on the sale's waitlist (404 when not on it).
func (w *Waitlist) Position(ctx context.Context, saleID, user int64) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, waitlistTimeout)
	defer cancel()
	pos, err := w.d.Redis.WaitlistPosition(ctx, saleID, user)
	if err != nil {
		return 0, w.failed(ctx, "waitlist: position", err)
	}
	if pos == 0 {
		return 0, domain.Errorf(domain.ENotFound, "not on the waitlist")
	}
	return pos, nil
}

// Leave takes user off the sale's waitlist.
func (w *Waitlist) Leave(ctx context.Context, saleID, user int64) error {
	ctx, cancel := context.WithTimeout(ctx, waitlistTimeout)
	defer cancel()
	if err := w.d.Redis.LeaveWaitlist(ctx, saleID, user); err != nil {
		return w.failed(ctx, "waitlist: leave", err)
	}
	if err := w.d.Store.ForgetWaitlistJoin(ctx, saleID, user, 0); err != nil {
		return w.failed(ctx, "waitlist: forget the join", err)
	}
	return nil
}

// failed logs a Redis or database failure and answers 503, retry.
func (w *Waitlist) failed(ctx context.Context, what string, err error) error {
	reqid.Logger(ctx, w.d.Logger).Warn(what, "err", err)
	return domain.Unavailable("waitlist unavailable; retry")
}

// HandOverAll offers units in stock to the waitlists of the cached sales
// that sell on Redis and have someone waiting.
func (w *Waitlist) HandOverAll(ctx context.Context, now time.Time) {
	waiting := w.d.Cache.EntriesWaiting()
	if len(waiting) == 0 || !w.d.Holds.Ready(ctx) {
		return // nothing to hand over, or its record could not follow
	}
	for _, e := range waiting {
		sale := e.Sale()
		if sale.Control != domain.ControlActive || now.Before(sale.StartsAt) || !now.Before(sale.EndsAt) || !e.OnRedis(sale.ModeEpoch) {
			continue
		}
		if err := w.handOver(ctx, sale); err != nil && ctx.Err() == nil {
			w.d.Logger.Warn("waitlist hand-over", "sale_id", sale.ID, "err", err)
		}
	}
}

// handOver runs one hand-over of a sale: its waitlist's head is offered
// the units in stock (handover.lua); each unit handed over is recorded in
// MySQL as a Redis hold at once, so the database path's quota counts it
// (HandOverAll hands nothing over while this instance's inserts fail).
func (w *Waitlist) handOver(ctx context.Context, sale *domain.Sale) error {
	ctx, cancel := context.WithTimeout(ctx, handOverTimeout)
	defer cancel()
	head, err := w.d.Redis.WaitlistHead(ctx, sale.ID, waitlistBatch)
	if err != nil || len(head) == 0 {
		return err
	}
	cands := make([]redisgateway.HandOverCandidate, len(head))
	for i, wt := range head {
		req := domain.WaitlistRequestID(wt.Joined)
		skip := w.d.Cache.Blacklisted(wt.UserID)
		if !skip {
			eligible, err := w.d.Gate.Eligible(ctx, sale, wt.UserID)
			if err != nil {
				return fmt.Errorf("eligibility of user %d: %w", wt.UserID, err)
			}
			skip = !eligible
		}
		cands[i] = redisgateway.HandOverCandidate{UserID: wt.UserID, RequestID: req, Token: domain.DeriveToken(w.d.TokenKey, sale.ID, wt.UserID, req), Skip: skip}
	}
	handed, left, err := w.d.Redis.HandOver(ctx, sale.ID, sale.ModeEpoch, cands)
	if err != nil {
		return err
	}
	var errs []error
	for _, h := range left {
		// Off the waitlist without a unit: the join is done, and a rebuild
		// must not put the waiter back.
		if joined, ok := domain.WaitlistJoinNumber(h.RequestID); ok {
			errs = append(errs, w.d.Store.ForgetWaitlistJoin(ctx, sale.ID, h.UserID, joined))
		}
	}
	for _, h := range handed {
		in := domain.RedisHoldInput(h.Token, sale.ID, h.UserID, h.RequestID)
		w.d.HandedOver()
		w.d.Logger.InfoContext(ctx, "waitlist hand-over", "sale_id", sale.ID, "user_id", h.UserID, "token", h.Token)
		if err := w.d.Holds.Record(ctx, in, sale.ModeEpoch); err != nil {
			errs = append(errs, err) // the relay records it from the inbox
		} else if joined, ok := domain.WaitlistJoinNumber(h.RequestID); ok {
			// Served: the reservation names the join, which is done.
			errs = append(errs, w.d.Store.ForgetWaitlistJoin(ctx, sale.ID, h.UserID, joined))
		}
		if w.d.Starter != nil {
			w.d.Starter.Enqueue(ctx, in)
		}
	}
	return errors.Join(errs...)
}
