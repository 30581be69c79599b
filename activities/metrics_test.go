package activities

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
)

func MustMetrics(tb testing.TB) *Metrics {
	tb.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	require.NoError(tb, err)
	return m
}

// An ended order is counted once, by the call that ended it, not by reruns.
func TestOrdersEndedCountedOnce(t *testing.T) {
	a := MustActivities(t)
	a.Metrics = MustMetrics(t)
	ctx := testCtx(t)
	ended := func(st domain.ReservationStatus) float64 {
		return testutil.ToFloat64(a.Metrics.OrdersEnded.WithLabelValues(string(st)))
	}

	cancelled := mustHeldOrder(t, a, 1)
	_, err := a.RecordReservation(ctx, cancelled)
	require.NoError(t, err)
	_, err = a.PlaceOrder(ctx, cancelled.Token)
	require.NoError(t, err)
	for range 2 {
		st, err := a.ReleaseOrder(ctx, cancelled.Token, domain.StatusCancelled)
		require.NoError(t, err)
		require.Equal(t, domain.StatusCancelled, st.Status)
	}
	require.InDelta(t, 1, ended(domain.StatusCancelled), 0)

	paid := mustHeldOrder(t, a, 1)
	_, err = a.RecordReservation(ctx, paid)
	require.NoError(t, err)
	_, err = a.PlaceOrder(ctx, paid.Token)
	require.NoError(t, err)
	for range 2 {
		_, err := a.MarkPaid(ctx, paid.Token, "ref-metrics")
		require.NoError(t, err)
	}
	require.InDelta(t, 1, ended(domain.StatusPaid), 0)

	failed := mustHeldOrder(t, a, 1)
	_, err = a.RecordReservation(ctx, failed)
	require.NoError(t, err)
	for range 2 {
		st, err := a.EndQueued(ctx, failed.Token, domain.StatusFailed, "test")
		require.NoError(t, err)
		require.Equal(t, domain.StatusFailed, st.Status)
	}
	require.InDelta(t, 1, ended(domain.StatusFailed), 0)
	require.InDelta(t, 0, ended(domain.StatusExpired), 0)
}

func TestReconciliationGauges(t *testing.T) {
	m := MustMetrics(t)
	m.reconciled(&domain.ReconciliationReport{SaleID: 7, Consistent: false,
		Discrepancies: []domain.Discrepancy{{Kind: domain.KindRedisStockDrift}, {Kind: domain.KindDBStockDrift}}})
	require.InDelta(t, 0, testutil.ToFloat64(m.Consistent.WithLabelValues("7")), 0)
	require.InDelta(t, 2, testutil.ToFloat64(m.Discrepancies.WithLabelValues("7")), 0)
	m.reconciled(&domain.ReconciliationReport{SaleID: 7, Consistent: true, Discrepancies: []domain.Discrepancy{}})
	require.InDelta(t, 1, testutil.ToFloat64(m.Consistent.WithLabelValues("7")), 0)
	require.InDelta(t, 0, testutil.ToFloat64(m.Discrepancies.WithLabelValues("7")), 0)
	m.Forget(7)
	require.Equal(t, 0, testutil.CollectAndCount(m.Consistent))
	var none *Metrics
	none.reconciled(&domain.ReconciliationReport{SaleID: 7}) // a nil *Metrics records nothing
	none.ended(domain.StatusPaid)
}
