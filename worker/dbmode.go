package worker

import (
	"context"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/sales"
	"github.com/seckill/seckill/store"
)

// OutboxRelay starts the workflows of database-path reservations whose
// start the API did not confirm: the outbox row was committed with the
// reservation, so a crash between commit and start loses nothing.
type OutboxRelay struct {
	Store   *store.Store
	Starter func(ctx context.Context, in domain.OrderInput) error
	// MinAge leaves fresh rows to the API's own start.
	MinAge time.Duration
	Every  time.Duration
	Logger *slog.Logger
}

// Run relays until ctx ends.
func (o *OutboxRelay) Run(ctx context.Context) {
	everyTick(ctx, o.Every, func() {
		if _, err := o.Once(ctx); err != nil && ctx.Err() == nil {
			o.Logger.Warn("outbox relay", "err", err)
		}
	})
}

// everyTick runs fn at once and then every period until ctx ends.
func everyTick(ctx context.Context, period time.Duration, fn func()) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		fn()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Once relays one batch and returns how many workflows it started.
func (o *OutboxRelay) Once(ctx context.Context) (int, error) {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	entries, err := o.Store.PendingOutbox(qctx, o.MinAge, 256)
	cancel()
	if err != nil {
		return 0, err
	}
	started := 0
	for _, e := range entries {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := o.Starter(sctx, domain.DatabasePathInput(e.Token, e.SaleID, e.UserID, e.Req))
		cancel()
		if err != nil {
			return started, err // Temporal is down: try again next tick
		}
		mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = o.Store.MarkDispatched(mctx, e.Token)
		cancel()
		if err != nil {
			return started, err
		}
		started++
	}
	return started, nil
}

// Resyncer returns sales from database mode to Redis once Redis has
// answered for a while, and rolls back resyncs that stalled.
type Resyncer struct {
	Store   *store.Store
	Redis   redis.UniversalClient
	Scripts *lua.Scripts
	// Healthy is how long Redis must answer before a sale goes back.
	Healthy time.Duration
	// StaleResync is how long a resync may take before it is rolled back.
	StaleResync time.Duration
	Every       time.Duration
	Logger      *slog.Logger

	healthySince time.Time
}

// Run resyncs until ctx ends.
func (r *Resyncer) Run(ctx context.Context) {
	everyTick(ctx, r.Every, func() { r.Once(ctx) })
}

// Once checks every open sale once.
func (r *Resyncer) Once(ctx context.Context) {
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	open, err := r.Store.ListOpenSales(lctx)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			r.Logger.Warn("resync: list sales", "err", err)
		}
		return
	}
	pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	pingErr := r.Redis.Ping(pctx).Err()
	cancel()
	now := time.Now()
	switch {
	case pingErr != nil:
		r.healthySince = time.Time{}
	case r.healthySince.IsZero():
		r.healthySince = now
	}
	for _, s := range open {
		switch s.Mode {
		case domain.ModeRedis:
			// Live sales only: an ended or stopped one is being torn down,
			// which deletes its keys on purpose.
			if pingErr == nil && s.Warmed && now.Before(s.EndsAt) && s.Control != domain.ControlStopped {
				r.rebuildIfLost(ctx, s.ID)
			}
		case domain.ModeResync:
			actx, cancel := context.WithTimeout(ctx, 5*time.Second)
			rolled, err := r.Store.AbortResync(actx, s.ID, 0, r.StaleResync)
			cancel()
			if err != nil {
				r.Logger.Warn("resync: roll back a stalled resync", "sale_id", s.ID, "err", err)
			} else if rolled {
				r.Logger.Warn("resync: rolled back a stalled resync to database mode", "sale_id", s.ID)
			}
		case domain.ModeDatabase:
			if r.healthySince.IsZero() || now.Sub(r.healthySince) < r.Healthy {
				continue
			}
			rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			done, err := sales.Resync(rctx, r.Store, r.Redis, r.Scripts, s.ID)
			cancel()
			if err != nil {
				r.Logger.Error("resync: sale stays in database mode", "sale_id", s.ID, "err", err)
			} else if done {
				r.Logger.Info("resync: sale is back on Redis", "sale_id", s.ID)
			}
		}
	}
}

// rebuildIfLost rebuilds a live sale whose keys Redis lost (a key deleted,
// a restart without its AOF, a failover to an empty replica): the reserve
// script answers not_ready for it, which no breaker counts, so nothing
// else would bring it back.
func (r *Resyncer) rebuildIfLost(ctx context.Context, saleID int64) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	lost, err := sales.KeysLost(cctx, r.Redis, saleID)
	if err != nil || !lost {
		return // Redis failing is the breaker's and the ping's business
	}
	r.Logger.Warn("resync: Redis lost a live sale's keys; rebuilding it from the database", "sale_id", saleID)
	done, err := sales.RebuildLost(cctx, r.Store, r.Redis, r.Scripts, saleID)
	switch {
	case err != nil:
		r.Logger.Error("resync: rebuilding a lost sale failed; it stays on the database path", "sale_id", saleID, "err", err)
	case done:
		r.Logger.Info("resync: lost sale rebuilt and back on Redis", "sale_id", saleID)
	}
}

// SaleSweeper makes sure every open sale has its SaleWorkflow, also when
// the API could not start it at creation (Temporal down).
type SaleSweeper struct {
	Store  *store.Store
	Start  func(ctx context.Context, in domain.SaleInput) error
	Every  time.Duration
	Logger *slog.Logger
}

// Run sweeps until ctx ends.
func (s *SaleSweeper) Run(ctx context.Context) {
	everyTick(ctx, s.Every, func() { s.Once(ctx) })
}

// Once starts the sale workflows that are missing.
func (s *SaleSweeper) Once(ctx context.Context) {
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	open, err := s.Store.ListOpenSales(lctx)
	cancel()
	if err != nil && ctx.Err() == nil {
		s.Logger.Warn("sale sweeper: list sales", "err", err)
	}
	for _, sale := range open {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := s.Start(sctx, domain.SaleInput{SaleID: sale.ID})
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				s.Logger.Warn("sale sweeper: start sale workflow", "sale_id", sale.ID, "err", err)
			}
			break // Temporal is down: try again next round
		}
	}
}
