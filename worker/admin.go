package worker

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/sales"
	"github.com/seckill/seckill/store"
)

// Follower applies stock additions the database committed and Redis
// has not taken (a Redis pause during the admin write, or an API instance
// gone before its own retries), and writes each open sale's control
// (pause, resume, stop) into Redis, so Redis follows committed admin
// writes without an operator; and sweeps admin Idempotency-Keys older
// than KeyKeep.
//
// A tick writes the control of the sales whose control in the database is
// not the one this follower last found in Redis, of those the change feed
// names (a warm-up or rebuild writes the control it read) and of its share
// of the full pass (FullEvery): an idle sale costs Redis one script a
// full pass, not one a tick.
type Follower struct {
	Redis     *redisgateway.Client
	Store     *store.Store
	Logger    *slog.Logger
	Every     time.Duration // 1s when zero
	KeyKeep   time.Duration // store.KeyKeep when zero
	FullEvery time.Duration // controlFullEvery when zero

	watch changeWatch
	// followed is each open sale's control as last written or found in
	// Redis.
	followed map[int64]domain.SaleControl
	// seen is the directory's picture every sale of which was last
	// followed.
	seen *store.OpenSales
}

// sweepEvery: expired keys are few; one bounded delete a minute keeps up.
const sweepEvery = time.Minute

// Run follows and sweeps until ctx is cancelled.
func (f *Follower) Run(ctx context.Context) {
	every := orDefault(f.Every, time.Second)
	keep := orDefault(f.KeyKeep, store.KeyKeep)
	outage := outageLog{logger: f.Logger, what: "stock follower"}
	var swept time.Time
	everyTick(ctx, every, false, func() {
		tctx, cancel := context.WithTimeout(ctx, every)
		err := f.Once(tctx)
		cancel()
		outage.note(ctx, err)
		if time.Since(swept) < sweepEvery {
			return
		}
		swept = time.Now()
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if _, err := f.Store.SweepKeys(sctx, time.Now().Add(-keep), 10_000); err != nil && ctx.Err() == nil {
			f.Logger.Warn("idempotency key sweep", "err", err)
		}
		if _, err := f.Store.SweepRedemptions(sctx, time.Now(), 10_000); err != nil && ctx.Err() == nil {
			f.Logger.Warn("challenge redemption sweep", "err", err)
		}
	})
}

// Once applies the pending stock additions and the open sales' controls.
func (f *Follower) Once(ctx context.Context) error {
	if _, err := sales.FollowStock(ctx, f.Store, f.Redis, 0); err != nil {
		return err
	}
	return f.followControl(ctx)
}

// followControl writes the database's control of the open sales due
// (see Follower) into Redis; control.lua writes nothing when Redis has it
// already. While no open sale changed since its last tick (the directory's
// set is the same) only the sales due are looked at. A control committed
// after the list was read may be overwritten for one tick (the API
// instances enforce it from their caches meanwhile); the next tick writes
// it, as it differs from the one followed.
func (f *Follower) followControl(ctx context.Context) error {
	open, err := f.Store.OpenSales(ctx)
	if err != nil {
		return fmt.Errorf("follow control: %w", err)
	}
	began := time.Now()
	f.watch.Redis, f.watch.Every, f.watch.FullEvery = f.Redis, orDefault(f.Every, time.Second), orDefault(f.FullEvery, controlFullEvery)
	due, err := f.watch.due(ctx)
	if err != nil && ctx.Err() == nil {
		f.Logger.Warn("control follower: change feed", "err", err)
	}
	look, followed := open.List(), make(map[int64]domain.SaleControl, open.Len())
	if open.Same(f.seen) {
		look, followed = due.of(open, nil), f.followed
	}
	f.seen = nil // set again once every sale looked at is followed
	for _, sale := range look {
		if sale.Mode != domain.ModeRedis {
			continue // a resync writes Redis whole when it takes the sale back
		}
		if c, ok := f.followed[sale.ID]; ok && c == sale.Control && !due.has(sale.ID) {
			followed[sale.ID] = c
			continue
		}
		if _, err := f.Redis.SetControl(ctx, sale.ID, string(sale.Control)); err != nil {
			f.followed = followed // the rest are due again next tick
			return fmt.Errorf("follow control of sale %d: %w", sale.ID, err)
		}
		followed[sale.ID] = sale.Control
	}
	f.followed, f.seen = followed, open
	f.watch.done(began)
	return nil
}
