package worker

import (
	"context"
	"errors"
	"fmt"
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
	var started []string
	var startErr error
	for _, e := range entries {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		startErr = o.Starter(sctx, e.Input())
		cancel()
		if startErr != nil {
			break // Temporal is down: try again next tick
		}
		started = append(started, e.Token)
	}
	// One mark for the batch; an entry left unmarked is started again
	// next tick, which finds its workflow.
	mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	markErr := o.Store.MarkDispatched(mctx, started...)
	cancel()
	if err := errors.Join(startErr, markErr); err != nil {
		return len(started), fmt.Errorf("outbox relay: %w", err)
	}
	return len(started), nil
}
