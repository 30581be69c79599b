package activities

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/domain"
)

// Metrics are the activities' Prometheus metrics; a nil *Metrics records
// nothing (tests, tools).
type Metrics struct {
	// OrdersEnded counts reservations that reached an end state, by
	// status, counted once: by the activity call that moved them there.
	OrdersEnded *prometheus.CounterVec
	// Consistent and Discrepancies describe each sale's latest
	// reconciliation (the sale workflow's, about every minute).
	Consistent    *prometheus.GaugeVec
	Discrepancies *prometheus.GaugeVec
	// WithoutWorkflow is 1 for each live reservation whose workflow was
	// found closed by the latest check of its sale (repaired or not).
	WithoutWorkflow *prometheus.GaugeVec
}

// NewMetrics creates the activities' metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		OrdersEnded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_orders_ended_total",
			Help: "Reservations that reached an end state (PAID, EXPIRED, CANCELLED, FAILED), counted once when the transition commits.",
		}, []string{"status"}),
		Consistent: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "seckill_reconciliation_consistent",
			Help: "1 when the sale's latest reconciliation was consistent, else 0.",
		}, []string{"sale"}),
		Discrepancies: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "seckill_reconciliation_discrepancies",
			Help: "Discrepancies the sale's latest reconciliation listed (seen in two passes), repaired ones included.",
		}, []string{"sale"}),
		WithoutWorkflow: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "seckill_reservations_without_workflow",
			Help: "Live reservations whose order workflow the sale's latest check found closed (workflow_closed); the reconciliation report names them.",
		}, []string{"sale"}),
	}
	for _, c := range []prometheus.Collector{m.OrdersEnded, m.Consistent, m.Discrepancies, m.WithoutWorkflow} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register activity metrics: %w", err)
		}
	}
	// Export every status at zero so rate() and alerts see the series
	// before the first end.
	for _, st := range []domain.ReservationStatus{domain.StatusPaid, domain.StatusExpired, domain.StatusCancelled, domain.StatusFailed} {
		m.OrdersEnded.WithLabelValues(string(st))
	}
	return m, nil
}

func (m *Metrics) ended(status domain.ReservationStatus) {
	if m != nil {
		m.OrdersEnded.WithLabelValues(string(status)).Inc()
	}
}

func (m *Metrics) reconciled(rep *domain.ReconciliationReport) {
	if m == nil || rep == nil {
		return
	}
	sale := strconv.FormatInt(rep.SaleID, 10)
	consistent := 0.0
	if rep.Consistent {
		consistent = 1
	}
	m.Consistent.WithLabelValues(sale).Set(consistent)
	m.Discrepancies.WithLabelValues(sale).Set(float64(len(rep.Discrepancies)))
}

// Forget drops a retired sale's series, so the label set stays bounded.
// Each worker that reconciled the sale holds them; the one that tore it
// down drops them at once, the others when their retirer sees the sale
// finished (worker.Retirer).
func (m *Metrics) Forget(saleID int64) {
	if m == nil {
		return
	}
	sale := strconv.FormatInt(saleID, 10)
	m.Consistent.DeleteLabelValues(sale)
	m.Discrepancies.DeleteLabelValues(sale)
	m.WithoutWorkflow.DeleteLabelValues(sale)
}

// statusBefore reads a reservation's status ahead of an ending transition,
// so a replayed activity (the transition already committed) is not counted
// twice. Only with metrics: it costs one read per ended order, off the hot
// path. A workflow runs one activity of a token at a time, so the read and
// the transition do not race.
func (a *Activities) statusBefore(ctx context.Context, token string) (domain.ReservationStatus, bool) {
	if a.Metrics == nil {
		return "", false
	}
	r, err := a.Store.GetReservation(ctx, token)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			// The transition itself will surface a real fault; here
			// only the count is at stake.
			slog.Warn("orders ended metric: read status before the transition; not counted", "token", token, "err", err)
		}
		return "", false
	}
	return r.Status, true
}

// countEnd counts the transition from before to after when it ended the
// reservation now.
func (a *Activities) countEnd(before domain.ReservationStatus, known bool, after domain.ReservationStatus) {
	if known && before != after && after.Terminal() {
		a.Metrics.ended(after)
	}
}

// withoutWorkflow counts the sale's workflow_closed findings. Only the
// count: a label per token would grow the series without bound and put a
// bearer's reservation id in every scrape.
func (m *Metrics) withoutWorkflow(saleID int64, found []domain.Discrepancy) {
	if m == nil {
		return
	}
	n := 0
	for _, d := range found {
		if d.Kind == domain.KindWorkflowClosed {
			n++
		}
	}
	m.WithoutWorkflow.WithLabelValues(strconv.FormatInt(saleID, 10)).Set(float64(n))
}
