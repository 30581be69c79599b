package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"golang.org/x/sync/semaphore"
)

// ReconcileRunTimeout bounds one reconciliation once it has its slot. The
// sale workflow's deadline for the activity is longer (its wait for a slot
// is not counted against the run), so it is held here.
const ReconcileRunTimeout = 2 * time.Minute

// heartbeatEvery is how often a reconciliation tells Temporal its worker
// is alive while it waits or runs, when its caller asked for heartbeats.
const heartbeatEvery = 10 * time.Second

// ReconcileSlots bounds the reconciliations one worker runs at once, so a
// wave of them (sales ending or signalled together, a signaller's full
// pass) waits here, in turn, instead of crowding MySQL and Redis out from
// under the order path. A nil *ReconcileSlots does not bound.
type ReconcileSlots struct {
	sem *semaphore.Weighted
}

// NewReconcileSlots bounds to n at once (at least 1).
func NewReconcileSlots(n int) *ReconcileSlots {
	return &ReconcileSlots{sem: semaphore.NewWeighted(int64(max(n, 1)))}
}

// Do runs fn in a slot, with run as its time. It waits for a slot as long
// as ctx's deadline still leaves fn its run; past that (a wave longer
// than the deadline, or an activity scheduled with a deadline too short
// to wait) fn runs at once, over the bound: a reconciliation late or over
// the bound is better than one that times out and is tried again.
func (s *ReconcileSlots) Do(ctx context.Context, run time.Duration, fn func(context.Context) error) error {
	if s != nil {
		wctx, cancel := ctx, context.CancelFunc(func() {})
		if deadline, ok := ctx.Deadline(); ok {
			wctx, cancel = context.WithDeadline(ctx, deadline.Add(-run))
		}
		err := s.sem.Acquire(wctx, 1)
		cancel()
		switch {
		case err == nil:
			defer s.sem.Release(1)
		case ctx.Err() != nil:
			return fmt.Errorf("wait for a reconciliation slot: %w", ctx.Err())
		case !errors.Is(err, context.DeadlineExceeded):
			return fmt.Errorf("wait for a reconciliation slot: %w", err)
		}
	}
	rctx, cancel := context.WithTimeout(ctx, run)
	defer cancel()
	return fn(rctx)
}

// keepAlive heartbeats the activity of ctx every heartbeatEvery until the
// returned func is called, when its caller set a heartbeat timeout (else
// it does nothing): a worker that dies while its reconciliation waits is
// found within that timeout, not at the activity's long deadline.
func keepAlive(ctx context.Context) (stop func()) {
	if !activity.IsActivity(ctx) || activity.GetInfo(ctx).HeartbeatTimeout <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(heartbeatEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	return func() { close(done) }
}
