package worker

import (
	"context"
	"log/slog"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/store"
)

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
	everyTick(ctx, s.Every, true, func() { s.Once(ctx) })
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
