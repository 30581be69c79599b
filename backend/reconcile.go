package backend

import (
	"context"
	"log/slog"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/reqid"
	"github.com/seckill/seckill/reconcile"
	"github.com/seckill/seckill/temporalgateway"
)

// reconcileTimeout bounds one on-demand reconciliation: two passes a second
// apart plus a Temporal describe per suspicious token; it stays under the
// API's write timeout.
const reconcileTimeout = 15 * time.Second

// Reconcile runs a fresh two-pass reconciliation of a sale. It only
// reports unless repair: then it also repairs what is safe (starting the
// token's own workflow, or rebuilding a drifted Redis stock while nothing
// is in flight), exactly as the sale workflow does every minute.
func (sv *Services) Reconcile(ctx context.Context, saleID int64, repair bool) (*domain.ReconciliationReport, error) {
	ctx, cancel := context.WithTimeout(ctx, reconcileTimeout)
	defer cancel()
	sale, err := sv.Operator.Sale(ctx, saleID)
	if err != nil {
		return nil, err
	}
	if sv.temporal == nil {
		// Holds and releases are judged against their workflows.
		return nil, &domain.Error{Code: domain.EUnavailable, Message: "temporal is not configured; reconciliation needs it", RetryAfter: 5}
	}
	logger := reqid.Logger(ctx, sv.logger)
	rep, err := sv.reconciler(logger).Run(ctx, sale.ID, repair)
	if err != nil {
		logger.Error("reconciliation", "sale_id", sale.ID, "repair", repair, "err", err)
		return nil, &domain.Error{Code: domain.EUnavailable, Message: "reconciliation could not read Redis, the database or Temporal; retry", RetryAfter: 5}
	}
	logger.Info("reconciliation", "sale_id", sale.ID, "repair", repair, "consistent", rep.Consistent,
		"discrepancies", len(rep.Discrepancies))
	return rep, nil
}

// reconciler reconciles and repairs through the services' clients: a
// repair starts or restarts the token's own workflow.
func (sv *Services) reconciler(logger *slog.Logger) *reconcile.Reconciler {
	return &reconcile.Reconciler{
		Store: sv.backend.st, Redis: sv.rdb, Temporal: sv.temporal, Logger: logger,
		Start: func(ctx context.Context, in domain.OrderInput) error {
			return temporalgateway.Start(ctx, sv.temporal, sv.cfg.TaskQueue, in)
		},
		Restart: func(ctx context.Context, in domain.OrderInput) error {
			_, err := temporalgateway.Restart(ctx, sv.temporal, sv.cfg.TaskQueue, in)
			return err
		},
	}
}
