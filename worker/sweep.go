package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/temporalgateway"
)

// Bounds of the sweeper's starts. A catch-up of thousands of sales (the
// API's starts of a wave of creations left to it) goes at what Temporal
// takes: a few starts in flight keep it busy without queuing them at the
// server, where each would wait out its timeout.
const (
	sweepParallel     = 4
	sweepStartTimeout = 10 * time.Second
)

// SaleSweeper makes sure every open sale has its SaleWorkflow, also when
// the API could not start it at creation (Temporal down). A sale it has
// not yet seen started is tried every round; the others are rechecked
// once per RecheckEvery (a workflow terminated by an operator) by one
// listing of the running sale workflows (Running), paged, and only the
// sales missing from it are started again: a marketplace's thousands of
// idle sales cost Temporal a few list calls every RecheckEvery, not a
// start each.
type SaleSweeper struct {
	OpenSales func(ctx context.Context) ([]*domain.Sale, error)
	// Start starts a sale's workflow; a workflow already running is no
	// error. It is called for several sales at once.
	Start func(ctx context.Context, in domain.SaleInput) error
	// Running lists the sales whose workflow runs. A sale started just
	// before the listing may be missing from it (visibility lags): it is
	// started again, which is no error.
	Running      func(ctx context.Context) (map[int64]bool, error)
	Every        time.Duration
	RecheckEvery time.Duration
	Logger       *slog.Logger

	started   map[int64]bool // sales whose workflow a start found running
	rechecked time.Time      // the last listing of the running workflows
}

// Run sweeps until ctx ends.
func (s *SaleSweeper) Run(ctx context.Context) {
	everyTick(ctx, s.Every, true, func() { s.Once(ctx, time.Now()) })
}

// Once starts the sale workflows that are missing at now: those of sales
// not yet seen started, and, once per RecheckEvery, those the listing of
// running workflows lacks.
func (s *SaleSweeper) Once(ctx context.Context, now time.Time) {
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	open, err := s.OpenSales(lctx)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			s.Logger.Warn("sale sweeper: list sales", "err", err)
		}
		return
	}
	running := s.recheck(ctx, now)
	seen := make(map[int64]bool, len(open))
	var missing []int64
	for _, sale := range open {
		seen[sale.ID] = s.started[sale.ID]
		if !s.started[sale.ID] || (running != nil && !running[sale.ID]) {
			missing = append(missing, sale.ID)
		}
	}
	s.startMissing(ctx, missing, seen)
	s.started = seen // a sale no longer open is forgotten
}

// startMissing starts the missing sales' workflows, sweepParallel at a
// time, and notes in seen those started. A start failing alone (a slow
// call timed out) leaves its sale to the next round; Temporal unavailable,
// or sweepParallel failures in a row with no start between, stops the
// round: Temporal is not taking starts, and the next round tries again.
func (s *SaleSweeper) startMissing(ctx context.Context, missing []int64, seen map[int64]bool) {
	if len(missing) == 0 {
		return
	}
	var mu sync.Mutex
	var failed, streak int
	var lastErr error
	started := make([]bool, len(missing))
	_, stopped := eachParallel(ctx, len(missing), sweepParallel, sweepStartTimeout, func(sctx context.Context, i int) error {
		if err := sctx.Err(); err != nil {
			return err // the round stopped before this start
		}
		err := s.Start(sctx, domain.SaleInput{SaleID: missing[i]})
		mu.Lock()
		defer mu.Unlock()
		if err == nil {
			started[i], streak = true, 0
			return nil
		}
		if errors.Is(sctx.Err(), context.Canceled) {
			return err // cut short by the round's stop: not Temporal's failure
		}
		failed, streak, lastErr = failed+1, streak+1, err
		if temporalgateway.StartUnavailable(err) || streak >= sweepParallel {
			return fmt.Errorf("sale %d: %w", missing[i], err)
		}
		return nil
	})
	n := 0
	for i, id := range missing {
		if started[i] {
			seen[id] = true
			n++
		}
	}
	if (failed > 0 || stopped != nil) && ctx.Err() == nil {
		s.Logger.Warn("sale sweeper: sale workflow starts failed; tried again next round", "missing", len(missing),
			"started", n, "failed", failed, "round_stopped", stopped != nil, "err", lastErr)
	}
}

// recheck lists the running sale workflows when a recheck is due (nil
// otherwise, and when the listing failed: it is tried next round).
func (s *SaleSweeper) recheck(ctx context.Context, now time.Time) map[int64]bool {
	if len(s.started) == 0 {
		s.rechecked = now // this round starts every sale
		return nil
	}
	if now.Sub(s.rechecked) < s.RecheckEvery {
		return nil
	}
	running, err := s.Running(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.Logger.Warn("sale sweeper: list running sale workflows", "err", err)
		}
		return nil
	}
	s.rechecked = now
	return running
}
