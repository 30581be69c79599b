package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/inflight"
)

// The sweeper starts every sale's workflow in its first round, then only
// new sales; once per RecheckEvery it lists the running workflows once and
// starts only the sales missing from the list (so an idle marketplace
// costs Temporal no start); a failed start or listing is tried again next
// round; a sale no longer open is forgotten.
func TestSaleSweeperStartsNewSalesAtOnceAndRechecksByOneListing(t *testing.T) {
	var open []*domain.Sale
	running := map[int64]bool{}
	for id := range int64(1000) {
		open = append(open, &domain.Sale{ID: 5_000_000 + id})
		running[5_000_000+id] = true
	}
	var fail, failList bool
	lists := 0
	f := &sweepFake{started: map[int64]int{}, fail: func(int64) error {
		if fail {
			return errors.New("temporal down")
		}
		return nil
	}}
	starts := f.started
	s := &SaleSweeper{
		OpenSales: func(context.Context) ([]*domain.Sale, error) { return open, nil },
		Start:     f.start,
		Running: func(context.Context) (map[int64]bool, error) {
			if failList {
				return nil, errors.New("visibility down")
			}
			lists++
			return running, nil
		},
		Every: 30 * time.Second, RecheckEvery: 10 * time.Minute, Logger: slog.New(slog.DiscardHandler),
	}
	ctx := context.Background()
	now := time.Now()
	s.Once(ctx, now)
	require.Equal(t, 1000, len(starts), "every sale started in the first round")

	// Until RecheckEvery has passed a round starts only new sales, and
	// lists nothing.
	open = append(open, &domain.Sale{ID: 9_000_000})
	running[9_000_000] = true
	clear(starts)
	for i := range 19 {
		now = now.Add(s.Every)
		s.Once(ctx, now)
		require.Zero(t, lists, "round %d listed", i)
	}
	require.Equal(t, map[int64]int{9_000_000: 1}, starts, "only the new sale started")

	// The recheck: one listing; the sale whose workflow an operator
	// terminated is started again, no other.
	delete(running, 5_000_007)
	clear(starts)
	now = now.Add(s.Every)
	s.Once(ctx, now)
	require.Equal(t, 1, lists)
	require.Equal(t, map[int64]int{5_000_007: 1}, starts)
	now = now.Add(s.Every)
	s.Once(ctx, now)
	require.Equal(t, 1, lists, "one listing per RecheckEvery")

	// A failed listing is tried next round.
	now = now.Add(s.RecheckEvery)
	failList = true
	s.Once(ctx, now)
	failList = false
	now = now.Add(s.Every)
	s.Once(ctx, now)
	require.Equal(t, 2, lists, "the failed listing tried again")

	// A start that fails is tried again next round, and a closed sale is
	// forgotten.
	fail = true
	open = append(open[:10], &domain.Sale{ID: 9_000_001})
	now = now.Add(s.Every)
	s.Once(ctx, now)
	fail = false
	clear(starts)
	now = now.Add(s.Every)
	s.Once(ctx, now)
	require.Equal(t, map[int64]int{9_000_001: 1}, starts, "the failed start tried again")
	require.Len(t, s.started, 11)
}

// sweepFake is a Start that counts its calls and the most in flight at
// once, each call taking delay and answering fail's error for its sale.
type sweepFake struct {
	delay    time.Duration
	fail     func(id int64) error
	inFlight inflight.Gauge
	mu       sync.Mutex
	calls    int
	started  map[int64]int
}

func (f *sweepFake) start(ctx context.Context, in domain.SaleInput) error {
	defer f.inFlight.Enter()()
	f.mu.Lock()
	f.calls++
	f.mu.Unlock()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(f.delay):
	}
	if f.fail != nil {
		if err := f.fail(in.SaleID); err != nil {
			return err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.started == nil {
		f.started = map[int64]int{}
	}
	f.started[in.SaleID]++
	return nil
}

func sweeperOf(n int, f *sweepFake) *SaleSweeper {
	open := make([]*domain.Sale, n)
	for i := range open {
		open[i] = &domain.Sale{ID: 7_000_000 + int64(i)}
	}
	return &SaleSweeper{
		OpenSales: func(context.Context) ([]*domain.Sale, error) { return open, nil },
		Start:     f.start,
		Running:   func(context.Context) (map[int64]bool, error) { return map[int64]bool{}, nil },
		Every:     30 * time.Second, RecheckEvery: 10 * time.Minute, Logger: slog.New(slog.DiscardHandler),
	}
}

// A catch-up of many missing sales starts them sweepParallel at a time:
// in parallel, never more.
func TestSaleSweeperStartsMissingSalesBoundedInFlight(t *testing.T) {
	f := &sweepFake{delay: 5 * time.Millisecond}
	s := sweeperOf(200, f)
	s.Once(context.Background(), time.Now())
	require.Len(t, f.started, 200, "every missing sale started")
	require.Equal(t, 200, f.calls, "each once")
	require.Equal(t, sweepParallel, f.inFlight.Most(), "starts in flight at most")
	require.Len(t, s.started, 200)
}

// Temporal unavailable stops the round at once (only the starts already
// in flight are made); the next round, Temporal back, starts them all.
func TestSaleSweeperStartStopsTheRoundWhenTemporalIsUnavailable(t *testing.T) {
	down := true
	f := &sweepFake{delay: time.Millisecond, fail: func(int64) error {
		if down {
			return fmt.Errorf("start sale workflow: %w", serviceerror.NewUnavailable("connection refused"))
		}
		return nil
	}}
	s := sweeperOf(200, f)
	now := time.Now()
	s.Once(context.Background(), now)
	require.LessOrEqual(t, f.calls, sweepParallel, "starts after Temporal said it is unavailable")
	require.Empty(t, f.started)
	down = false
	s.Once(context.Background(), now.Add(s.Every))
	require.Len(t, f.started, 200, "the next round starts every sale")
}

// A lone timed-out start among successes does not stop the catch-up: the
// others start, and the next round tries only that sale. Timeouts with no
// start between them (Temporal hung) stop the round.
func TestSaleSweeperStartLoneDeadlineDoesNotStopTheOthers(t *testing.T) {
	slow := int64(7_000_000 + 17)
	f := &sweepFake{delay: time.Millisecond, fail: func(id int64) error {
		if id == slow {
			return fmt.Errorf("start sale workflow %d: %w", id, context.DeadlineExceeded)
		}
		return nil
	}}
	s := sweeperOf(200, f)
	now := time.Now()
	s.Once(context.Background(), now)
	require.Equal(t, 200, f.calls, "every sale tried")
	require.Len(t, f.started, 199, "all but the slow one started")
	f.fail, f.calls = nil, 0
	s.Once(context.Background(), now.Add(s.Every))
	require.Equal(t, 1, f.calls, "the next round tries only the slow one")
	require.Len(t, f.started, 200)

	hung := &sweepFake{delay: time.Millisecond, fail: func(int64) error { return context.DeadlineExceeded }}
	s = sweeperOf(200, hung)
	s.Once(context.Background(), now)
	require.Less(t, hung.calls, 2*sweepParallel, "starts after %d timeouts in a row", sweepParallel)
}
