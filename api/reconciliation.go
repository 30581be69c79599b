package api

import (
	"context"
	"log/slog"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/orders"
	"github.com/seckill/seckill/reconcile"
)

// reconcileTimeout bounds one on-demand reconciliation: two passes a second
// apart plus a Temporal describe per suspicious token; it stays under the
// server's write timeout.
const reconcileTimeout = 15 * time.Second

// GET /admin/v1/sales/{sale_id}/reconciliation[?repair=true]
//
// A fresh two-pass reconciliation. It only reports unless repair=true: then
// it also repairs what is safe (starting the token's own workflow, or
// rebuilding a drifted Redis stock while nothing is in flight), exactly as
// the sale workflow does every minute.
func (s *server) reconciliation(c *fiber.Ctx) error {
	var repair bool
	switch c.Query("repair") {
	case "", "false", "0":
	case "true", "1":
		repair = true
	default:
		return sendError(c, domain.EInvalid, "repair: true or false")
	}
	id, err := saleIDParam(c, "sale_id")
	if err != nil {
		return sendErr(c, err)
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), reconcileTimeout)
	defer cancel()
	sale, err := s.operator.Sale(ctx, id)
	if err != nil {
		return sendErr(c, err)
	}
	if s.temporal == nil {
		// Holds and releases are judged against their workflows.
		return unavailable(c, 5, "temporal is not configured; reconciliation needs it")
	}
	r := s.reconciler(s.log(c))
	rep, err := r.Run(ctx, sale.ID, repair)
	if err != nil {
		s.log(c).Error("reconciliation", "sale_id", sale.ID, "repair", repair, "err", err)
		return unavailable(c, 5, "reconciliation could not read Redis, the database or Temporal; retry")
	}
	s.log(c).Info("reconciliation", "sale_id", sale.ID, "repair", repair, "consistent", rep.Consistent,
		"discrepancies", len(rep.Discrepancies))
	return c.JSON(rep)
}

// reconciler reconciles and repairs through this API's clients: a repair
// starts or restarts the token's own workflow.
func (s *server) reconciler(logger *slog.Logger) *reconcile.Reconciler {
	return s.backend.Reconciler(&reconcile.Reconciler{
		Redis: s.rdb, Temporal: s.temporal, Logger: logger,
		Start: func(ctx context.Context, in domain.OrderInput) error {
			return orders.Start(ctx, s.temporal, s.cfg.TaskQueue, in)
		},
		Restart: func(ctx context.Context, in domain.OrderInput) error {
			_, err := orders.Restart(ctx, s.temporal, s.cfg.TaskQueue, in)
			return err
		},
	})
}
