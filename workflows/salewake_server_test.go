package workflows

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/temporalgateway"
)

// startSale starts the sale's workflow on queue and terminates it at the
// test's end if it still runs.
func (s *stack) startSale(queue string, in domain.SaleInput) client.WorkflowRun {
	s.t.Helper()
	run, err := s.c.ExecuteWorkflow(ctxT(s.t, 10*time.Second), client.StartWorkflowOptions{
		ID: domain.SaleWorkflowID(in.SaleID), TaskQueue: queue,
	}, domain.SaleWorkflowName, in)
	require.NoError(s.t, err)
	s.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.c.TerminateWorkflow(ctx, run.GetID(), run.GetRunID(), "test over") // ended already, or now
	})
	return run
}

// activityCount counts the run's activities of the type.
func (s *stack) activityCount(run client.WorkflowRun, name string) int {
	s.t.Helper()
	var n int
	for _, ev := range s.history(run.GetID(), run.GetRunID()) {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == name {
			n++
		}
	}
	return n
}

// waitSettled waits until the run's history ends with a started timer
// and has n reconciliations, and answers its length.
func (s *stack) waitSettled(run client.WorkflowRun, reconciles int) int {
	s.t.Helper()
	var length int
	require.EventuallyWithT(s.t, func(c *assert.CollectT) {
		h := s.history(run.GetID(), run.GetRunID())
		if !assert.NotEmpty(c, h) {
			return
		}
		assert.Equal(c, enumspb.EVENT_TYPE_TIMER_STARTED, h[len(h)-1].GetEventType())
		assert.Equal(c, reconciles, s.activityCount(run, "ReconcileSale"))
		length = len(h)
	}, 60*time.Second, 200*time.Millisecond, "the sale workflow never settled")
	return length
}

// On the server: a quiet live sale's history gains no event over many
// reconcile periods, and it is not reconciled; a signalled change is
// reconciled and the workflow sleeps again; a signal to a closed or
// missing sale workflow is no error.
func TestSaleWorkflowQuietSaleAddsNoEventsOnTheServer(t *testing.T) {
	s := MustStack(t)
	queue := s.queue + "-wake"
	s.saleWorker(queue)
	now := time.Now().UTC()
	sale := testenv.MustSale(t, s.st, 2, func(x *domain.Sale) {
		x.StartsAt = now.Add(-time.Second)
		x.EndsAt = now.Add(time.Hour)
	})
	run := s.startSale(queue, domain.SaleInput{SaleID: sale.ID, ReconcileEvery: time.Second})
	quiet := s.waitSettled(run, 0)
	// The start and its task (4), a load, the warm-up with its task (1 +
	// 3 + 3), a load and the timer: SaleWorkflowV2 records no version
	// marker or upsert, and its loads are local activities (markers).
	require.Equal(t, 13, quiet, "events of a sale's first tasks")

	time.Sleep(10 * time.Second) // ten periods
	require.Len(t, s.history(run.GetID(), run.GetRunID()), quiet, "a quiet sale's history grew")

	require.NoError(t, temporalgateway.SignalSaleChanged(ctxT(t, 10*time.Second), s.c, sale.ID))
	woken := s.waitSettled(run, 1)
	// The signal and its task (4), the timer's cancel, a load, a
	// reconciliation with its task (3 + 3), the next timer.
	require.Equal(t, quiet+13, woken, "events of one signalled reconciliation")
	time.Sleep(3 * time.Second)
	require.Len(t, s.history(run.GetID(), run.GetRunID()), woken, "asleep again")

	require.NoError(t, s.c.TerminateWorkflow(ctxT(t, 10*time.Second), run.GetID(), run.GetRunID(), "ended"))
	require.NoError(t, temporalgateway.SignalSaleChanged(ctxT(t, 10*time.Second), s.c, sale.ID), "a signal to a closed workflow")
	require.NoError(t, temporalgateway.SignalSaleChanged(ctxT(t, 10*time.Second), s.c, sale.ID+1_000_000), "a signal to no workflow")
}

// On the server: sales ending together wait their turn for their worker's
// reconciliation slots. While the test holds the worker's one slot, three
// sales past their payment window wait in their final reconciliation,
// heartbeating, neither timed out nor tried again; released, each
// reconciles and retires.
func TestSaleReconciliationsWaitForTheWorkersSlots(t *testing.T) {
	s := MustStack(t)
	queue := s.queue + "-slots"
	slots := activities.NewReconcileSlots(1)
	s.saleWorkerSlots(queue, slots)
	held, release, holder := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		holder <- slots.Do(context.Background(), time.Minute, func(context.Context) error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()

	now := time.Now().UTC()
	var runs []client.WorkflowRun
	for range 3 {
		sale := testenv.MustSale(t, s.st, 1, func(x *domain.Sale) {
			x.StartsAt = now.Add(-time.Second)
			x.EndsAt = now.Add(3 * time.Second)
			x.PaymentWindowSeconds = 1
		})
		runs = append(runs, s.startSale(queue, domain.SaleInput{SaleID: sale.ID, RetireMargin: time.Millisecond}))
	}
	waiting := func(c *assert.CollectT, run client.WorkflowRun) *workflowpb.PendingActivityInfo {
		d, err := s.c.DescribeWorkflow(ctxT(t, 10*time.Second), run.GetID(), run.GetRunID())
		if !assert.NoError(c, err) {
			return nil
		}
		assert.Equal(c, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, d.RawResponse.GetWorkflowExecutionInfo().GetStatus())
		pending := d.RawResponse.GetPendingActivities()
		if !assert.Len(c, pending, 1) {
			return nil
		}
		assert.Equal(c, "ReconcileSale", pending[0].GetActivityType().GetName())
		assert.EqualValues(c, 1, pending[0].GetAttempt(), "neither timed out nor tried again")
		return pending[0]
	}
	// Past the activity's first heartbeat, each still waits in its one attempt.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, run := range runs {
			if p := waiting(c, run); p != nil {
				assert.NotNil(c, p.GetLastHeartbeatTime(), "heartbeats while it waits")
			}
		}
	}, 60*time.Second, 500*time.Millisecond, "the sales never waited in their final reconciliation")
	for _, run := range runs {
		require.Zero(t, s.activityCount(run, "TeardownSale"), "retired without its final reconciliation")
	}

	close(release)
	require.NoError(t, <-holder)
	for _, run := range runs {
		var result domain.SaleResult
		require.NoError(t, run.Get(ctxT(t, 60*time.Second), &result))
		require.NotNil(t, result.FinalReport)
		require.Equal(t, 1, s.activityCount(run, "ReconcileSale"), "the final reconciliation only")
	}
}
