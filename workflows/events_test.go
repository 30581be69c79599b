package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/histories"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

// TestOrderEventsPerOrder counts the history of an order of each kind on
// the real stack, exactly (an OrderWorkflowV2: no version marker, no
// search-attribute upsert; the start set them):
//
//	expired unpaid (12): started; workflow task (3); BeginOrder's marker;
//	the timer to pay_by + grace, started and fired; workflow task (3);
//	ReleaseAndSync's marker; completed.
//	paid (13): started; workflow task (3); BeginOrder's marker; the timer
//	started (never cancelled); workflow task (3) with the update accepted,
//	MarkPaidAndSync's marker, the update completed; completed.
func TestOrderEventsPerOrder(t *testing.T) {
	s := MustStack(t)
	expiring := s.MustWarmSale(t, 1, time.Second, 1)
	paying := s.MustWarmSale(t, 1, 10*time.Minute, 1)
	expired := s.MustOrder(expiring, testenv.UniqueUser(), "req-events-expired")
	paid := s.MustOrder(paying, testenv.UniqueUser(), "req-events-paid")

	s.waitStatus(paid.Token, domain.StatusPendingPayment)
	s.waitWorkflowStatus(paid.Token, domain.StatusPendingPayment)
	s.mustUpdate(paid.Token, domain.UpdatePay, domain.PayRequest{PaymentRef: "events-pay"}, domain.StatusPaid)
	require.Equal(t, domain.StatusPaid, s.result(paid.Token).Status)
	require.Equal(t, domain.StatusExpired, s.result(expired.Token).Status)
	s.waitStatus(expired.Token, domain.StatusExpired)
	s.requireConsistent(expiring)
	s.requireConsistent(paying)

	for _, c := range []struct {
		name  string
		token string
		want  histories.Count
	}{
		{"expired", expired.Token, histories.Count{Total: 12, Markers: 2, TimersStarted: 1, WorkflowTasks: 2}},
		{"paid", paid.Token, histories.Count{Total: 13, Markers: 2, TimersStarted: 1, WorkflowTasks: 2}},
	} {
		events := s.history(domain.OrderWorkflowID(c.token), "")
		for _, ev := range events {
			t.Log(c.name, ev.GetEventId(), ev.GetEventType())
		}
		require.Equal(t, domain.OrderWorkflowName, events[0].GetWorkflowExecutionStartedEventAttributes().GetWorkflowType().GetName())
		require.Equal(t, c.want, histories.CountEvents(events), "%s order's history", c.name)
	}
}
