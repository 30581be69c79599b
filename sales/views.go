package sales

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/reqid"
)

const (
	// viewTimeout bounds an operator's read of the sales.
	viewTimeout = 10 * time.Second
	// reportTimeout bounds the query of a sale workflow's last report.
	reportTimeout = 3 * time.Second
)

// SaleDetail is one sale as an operator's detail view shows it: the
// sale as the database has it (the cache may be a second behind an
// operator's change), its stock left and waitlist as this instance's
// cache has them, its reservations by status and refunds, and the sale
// workflow's answer to its report query: its last reconciliation report,
// or where it stands before the first. Without that answer (no Temporal,
// no workflow, no worker answering) Report is nil and ReportError says
// why.
type SaleDetail struct {
	Sale        *domain.Sale
	StockLeft   int64
	Waiting     int64
	Orders      map[domain.ReservationStatus]int64
	Refunds     int64
	Report      json.RawMessage
	ReportError string
}

// Detail is one sale's detail view: 404 for an unknown sale, 503 when
// the database does not answer.
func (o *Operator) Detail(ctx context.Context, id int64) (SaleDetail, error) {
	ctx, cancel := context.WithTimeout(ctx, viewTimeout)
	defer cancel()
	e, err := o.d.Cache.Get(ctx, id)
	if err != nil {
		return SaleDetail{}, o.lookupFailed(ctx, err)
	}
	sale, err := o.d.Store.GetSale(ctx, id)
	if err != nil {
		return SaleDetail{}, o.lookupFailed(ctx, err)
	}
	d := SaleDetail{Sale: sale, StockLeft: e.StockLeft(), Waiting: e.Waiting()}
	if d.Orders, err = o.d.Store.CountReservations(ctx, id); err != nil {
		reqid.Logger(ctx, o.d.Logger).Warn("count reservations", "sale_id", id, "err", err)
		return SaleDetail{}, domain.Unavailable("order data unavailable")
	}
	if d.Refunds, err = o.d.Store.CountRefunds(ctx, id); err != nil {
		reqid.Logger(ctx, o.d.Logger).Warn("count refunds", "sale_id", id, "err", err)
		return SaleDetail{}, domain.Unavailable("refund data unavailable")
	}
	if d.Report, err = o.report(ctx, id); err != nil {
		d.ReportError = err.Error()
		reqid.Logger(ctx, o.d.Logger).Info("sale report unavailable", "sale_id", id, "reason", d.ReportError)
	}
	return d, nil
}

// report queries the sale workflow for its report.
func (o *Operator) report(ctx context.Context, saleID int64) (json.RawMessage, error) {
	if o.d.Temporal == nil {
		return nil, errors.New("temporal is not configured")
	}
	ctx, cancel := context.WithTimeout(ctx, reportTimeout)
	defer cancel()
	v, err := o.d.Temporal.QueryWorkflow(ctx, domain.SaleWorkflowID(saleID), "", domain.QueryReport)
	if err != nil {
		return nil, fmt.Errorf("query the sale workflow: %w", err)
	}
	var raw json.RawMessage
	if err := v.Get(&raw); err != nil {
		return nil, fmt.Errorf("decode the sale workflow's report: %w", err)
	}
	return raw, nil
}

// Recache reads a sale from the database into this instance's cache, for
// a change made outside these use cases (the gate's allowlist); the other
// instances follow within a refresh. A failed read leaves the cache to
// its refresh.
func (o *Operator) Recache(ctx context.Context, id int64) {
	ctx, cancel := context.WithTimeout(ctx, viewTimeout)
	defer cancel()
	sale, err := o.d.Store.GetSale(ctx, id)
	if err != nil {
		reqid.Logger(ctx, o.d.Logger).Warn("recache sale; the refresh will", "sale_id", id, "err", err)
		return
	}
	o.d.Cache.Put(sale)
}

// lookupFailed is a failed sale read as an operator is answered: the
// cache's 404 as it is, anything else 503.
func (o *Operator) lookupFailed(ctx context.Context, err error) error {
	if domain.ErrorCode(err) == domain.ENotFound {
		return err
	}
	reqid.Logger(ctx, o.d.Logger).Warn("sale lookup", "err", err)
	return domain.Unavailable("sale data unavailable")
}
