package worker

import (
	"context"
	"log/slog"
	"time"

	"github.com/seckill/seckill/domain"
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
	everyTick(ctx, o.Every, true, func() {
		if _, err := o.Once(ctx); err != nil && ctx.Err() == nil {
			o.Logger.Warn("outbox relay", "err", err)
		}
	})
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
		err := o.Starter(sctx, e.Input())
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
