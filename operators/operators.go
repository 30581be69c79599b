// Package operators is the operators' records that are not a sale's: the
// admin audit (who changed what) and the refunds the payment provider
// reported. The admin routes read and write them through it.
package operators

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/reqid"
	"github.com/seckill/seckill/store"
	"github.com/seckill/seckill/wire"
)

// dbTimeout bounds each database call.
const dbTimeout = 5 * time.Second

// Service is the audit and refund records of one database.
type Service struct {
	st     *store.Store
	logger *slog.Logger
}

// New is the records of st; logger is used when a request's context has
// none (reqid.Logger).
func New(st *store.Store, logger *slog.Logger) *Service {
	return &Service{st: st, logger: logger}
}

// Record keeps w, an admin write that succeeded. It is called after the
// write answered, so it runs on its own deadline even when the request's
// context is done.
func (s *Service) Record(ctx context.Context, w wire.AdminWrite) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dbTimeout)
	defer cancel()
	err := s.st.RecordAdminWrite(ctx, store.AdminWrite{Operator: w.Operator, Action: w.Action, SaleID: w.SaleID,
		Summary: w.Summary, Status: w.Status, RequestID: w.RequestID})
	if err != nil {
		return fmt.Errorf("record admin write: %w", err)
	}
	return nil
}

// Audit lists up to limit admin writes, newest first, of one sale when
// saleID > 0. A database failure is 503 unavailable.
func (s *Service) Audit(ctx context.Context, saleID int64, limit int) ([]wire.AdminWrite, error) {
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	ws, err := s.st.AdminAudit(ctx, saleID, limit)
	if err != nil {
		reqid.Logger(ctx, s.logger).Warn("list admin audit", "err", err)
		return nil, domain.Unavailable("audit store unavailable")
	}
	out := make([]wire.AdminWrite, len(ws))
	for i, w := range ws {
		out[i] = wire.AdminWrite{ID: w.ID, Operator: w.Operator, Action: w.Action, SaleID: w.SaleID, Summary: w.Summary,
			Status: w.Status, RequestID: w.RequestID, At: w.At}
	}
	return out, nil
}

// Refunds lists up to limit recorded refunds, newest first, of one sale
// when saleID > 0. A database failure is 503 unavailable.
func (s *Service) Refunds(ctx context.Context, saleID int64, limit int) ([]wire.Refund, error) {
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	rs, err := s.st.ListRefunds(ctx, saleID, limit)
	if err != nil {
		reqid.Logger(ctx, s.logger).Warn("list refunds", "err", err)
		return nil, domain.Unavailable("refund store unavailable")
	}
	out := make([]wire.Refund, len(rs))
	for i, r := range rs {
		out[i] = wire.Refund{ID: r.ID, Token: r.Token, SaleID: r.SaleID, UserID: r.UserID, PaymentRef: r.PaymentRef,
			AmountCents: r.AmountCents, Reason: r.Reason, CreatedAt: r.CreatedAt}
	}
	return out, nil
}
