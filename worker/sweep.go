package worker

import (
	"context"
	"log/slog"
	"time"

	"github.com/seckill/seckill/domain"
)

// SaleSweeper makes sure every open sale has its SaleWorkflow, also when
// the API could not start it at creation (Temporal down). A sale it has
// not yet seen started is tried every round; one it has is looked at
// again once per RecheckEvery (its workflow terminated by an operator),
// a share of those sales each round, so a marketplace's thousands of
// open sales cost Temporal a few starts a round, not one each.
type SaleSweeper struct {
	OpenSales func(ctx context.Context) ([]*domain.Sale, error)
	// Start starts a sale's workflow; a workflow already running is no
	// error.
	Start        func(ctx context.Context, in domain.SaleInput) error
	Every        time.Duration
	RecheckEvery time.Duration
	Logger       *slog.Logger

	started map[int64]bool // sales whose workflow a start found running
	round   int64
}

// Run sweeps until ctx ends.
func (s *SaleSweeper) Run(ctx context.Context) {
	everyTick(ctx, s.Every, true, func() { s.Once(ctx) })
}

// Once starts the sale workflows that are missing: those of sales not yet
// seen started, and this round's share of the others.
func (s *SaleSweeper) Once(ctx context.Context) {
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	open, err := s.OpenSales(lctx)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			s.Logger.Warn("sale sweeper: list sales", "err", err)
		}
		return
	}
	shares := max(int64(s.RecheckEvery/max(s.Every, time.Second)), 1)
	share := s.round % shares
	s.round++
	seen := make(map[int64]bool, len(open))
	for _, sale := range open {
		seen[sale.ID] = s.started[sale.ID]
		if s.started[sale.ID] && domain.PassShare(sale.ID, shares) != share {
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
