package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

// TestOrderTemporalCallsPerOrder counts, exactly, the Temporal calls an
// order costs on the real stack, by method: the worker's (its client
// starts the workflow, as the relay does, and runs it) and the API's (the
// pay update). The test's own reads go through a client of their own.
//
//	expired: the start, eager (its answer hands out the first workflow
//	task); that task's completion (BeginOrder, the timer); the poll that
//	hands out the timer's task; its completion (ReleaseAndSync, the end).
//	paid: the same start and first completion; the API's update; the poll
//	that hands out the update's task; its completion (MarkPaidAndSync,
//	the update's answer, the end).
func TestOrderTemporalCallsPerOrder(t *testing.T) {
	workerCalls, apiCalls := testenv.NewTemporalCalls(), testenv.NewTemporalCalls()
	s := mustStackWith(t, nil, workerCalls.Option)
	reader := *s
	reader.c = testenv.MustTemporal(t)
	api := *s
	api.c = testenv.MustTemporal(t, apiCalls.Option)

	expiring := s.MustWarmSale(t, 1, time.Second, 1)
	paying := s.MustWarmSale(t, 1, 10*time.Minute, 1)
	expired := s.MustOrder(expiring, testenv.UniqueUser(), "req-calls-expired")
	paid := s.MustOrder(paying, testenv.UniqueUser(), "req-calls-paid")

	// The pay update goes in once the first task has completed, so that
	// its task is one of its own (not handed out in that completion's
	// answer).
	reader.waitEvent(paid.Token, enumspb.EVENT_TYPE_TIMER_STARTED)
	api.mustUpdate(paid.Token, domain.UpdatePay, domain.PayRequest{PaymentRef: "calls-pay"}, domain.StatusPaid)
	require.Equal(t, domain.StatusPaid, reader.result(paid.Token).Status)
	require.Equal(t, domain.StatusExpired, reader.result(expired.Token).Status)
	s.requireConsistent(expiring)
	s.requireConsistent(paying)
	t.Logf("worker's calls:\n%s", workerCalls)
	t.Logf("API's calls:\n%s", apiCalls)

	first := map[string]int{"StartWorkflowExecution": 1, "RespondWorkflowTaskCompleted": 1}
	for _, c := range []struct {
		name        string
		token       string
		worker, api map[string]int
	}{
		{"expired", expired.Token, plus(first, map[string]int{"PollWorkflowTaskQueue": 1, "RespondWorkflowTaskCompleted": 1}), map[string]int{}},
		{"paid", paid.Token, plus(first, map[string]int{"PollWorkflowTaskQueue": 1, "RespondWorkflowTaskCompleted": 1}), map[string]int{"UpdateWorkflowExecution": 1}},
	} {
		id := domain.OrderWorkflowID(c.token)
		assert.Equal(t, c.worker, workerCalls.Of(id), "the worker's calls for the %s order", c.name)
		assert.Equal(t, c.api, apiCalls.Of(id), "the API's calls for the %s order", c.name)
	}
}

// plus is the sum of two counts by method.
func plus(a, b map[string]int) map[string]int {
	out := map[string]int{}
	for _, m := range []map[string]int{a, b} {
		for k, v := range m {
			out[k] += v
		}
	}
	return out
}

// waitEvent waits until the token's workflow history holds an event of the
// type.
func (s *stack) waitEvent(token string, want enumspb.EventType) {
	s.t.Helper()
	require.EventuallyWithT(s.t, func(c *assert.CollectT) {
		found := false
		for _, ev := range s.history(domain.OrderWorkflowID(token), "") {
			found = found || ev.GetEventType() == want
		}
		assert.True(c, found)
	}, 30*time.Second, 50*time.Millisecond, "workflow of %s never recorded %s", token, want)
}
