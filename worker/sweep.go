package worker

import (
	"context"
	"log/slog"
	"time"

	"github.com/seckill/seckill/domain"
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
	// error.
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
	for _, sale := range open {
		seen[sale.ID] = s.started[sale.ID]
		if s.started[sale.ID] && (running == nil || running[sale.ID]) {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := s.Start(sctx, domain.SaleInput{SaleID: sale.ID})
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				s.Logger.Warn("sale sweeper: start sale workflow", "sale_id", sale.ID, "err", err)
			}
			break // Temporal is down: try again next round
		}
		seen[sale.ID] = true
	}
	s.started = seen // a sale no longer open is forgotten
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
