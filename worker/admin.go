package worker

import (
	"context"
	"log/slog"
	"time"

	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/sales"
	"github.com/seckill/seckill/store"
)

// StockFollower applies stock additions the database committed and Redis
// has not taken (a Redis pause during the admin write, or an API instance
// gone before its own retries) each tick, so Redis follows without an
// operator; and sweeps admin Idempotency-Keys older than KeyKeep.
type StockFollower struct {
	Redis   *lua.Client
	Store   *store.Store
	Logger  *slog.Logger
	Every   time.Duration // 1s when zero
	KeyKeep time.Duration // store.KeyKeep when zero
}

// sweepEvery: expired keys are few; one bounded delete a minute keeps up.
const sweepEvery = time.Minute

// Run follows and sweeps until ctx is cancelled.
func (f *StockFollower) Run(ctx context.Context) {
	every := orDefault(f.Every, time.Second)
	keep := orDefault(f.KeyKeep, store.KeyKeep)
	outage := outageLog{logger: f.Logger, what: "stock follower"}
	var swept time.Time
	everyTick(ctx, every, false, func() {
		tctx, cancel := context.WithTimeout(ctx, every)
		_, err := sales.FollowStock(tctx, f.Store, f.Redis, 0)
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
	})
}
