package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/temporalgateway"
)

// startOnce tells a new run from an existing one; an ordinary start never
// replaces a running or completed order, temporalgateway.Restart replaces only a
// closed one, and neither ever runs two at once.
func TestStartOrderReportsItsOutcome(t *testing.T) {
	s := MustStack(t)
	sale := s.MustWarmSale(t, 1, 10*time.Minute, 1)
	user := testenv.UniqueUser()
	outcome, token := s.reserve(sale, user, "req-outcome")
	require.Equal(t, redisgateway.OutcomeOK, outcome)
	in := domain.OrderInput{Token: token, SaleID: sale.ID, UserID: user, RequestID: "req-outcome", Path: domain.PathRedis}
	ctx := ctxT(t, time.Minute)
	// run returns the id's current run and its status.
	run := func() (string, enumspb.WorkflowExecutionStatus) {
		d, err := s.c.DescribeWorkflow(ctx, domain.OrderWorkflowID(token), "")
		require.NoError(t, err)
		info := d.RawResponse.GetWorkflowExecutionInfo()
		return info.GetExecution().GetRunId(), info.GetStatus()
	}

	o, err := temporalgateway.StartOutcomeOf(ctx, s.c, s.queue, in)
	require.NoError(t, err)
	require.Equal(t, temporalgateway.StartedNew, o)
	first, status := run()
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, status)
	o, err = temporalgateway.StartOutcomeOf(ctx, s.c, s.queue, in)
	require.NoError(t, err)
	require.Equal(t, temporalgateway.Existing, o)
	o, err = temporalgateway.Restart(ctx, s.c, s.queue, in)
	require.NoError(t, err)
	require.Equal(t, temporalgateway.Existing, o, "a running workflow is never duplicated")
	again, _ := run()
	require.Equal(t, first, again, "the running run is still the first")

	s.waitStatus(token, domain.StatusPendingPayment)
	s.mustUpdate(token, domain.UpdateCancel, domain.CancelRequest{Reason: "test"}, domain.StatusCancelled)
	require.Equal(t, domain.StatusCancelled, s.result(token).Status)
	o, err = temporalgateway.StartOutcomeOf(ctx, s.c, s.queue, in)
	require.NoError(t, err)
	require.Equal(t, temporalgateway.Existing, o, "an ordinary start finds the completed order")
	require.NoError(t, temporalgateway.Start(ctx, s.c, s.queue, in), "for the relay a closed workflow counts as started")
	again, status = run()
	require.Equal(t, first, again, "the completed order was not replaced")
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, status)

	// The repair's restart runs again; the new run adopts the end.
	o, err = temporalgateway.Restart(ctx, s.c, s.queue, in)
	require.NoError(t, err)
	require.Equal(t, temporalgateway.StartedNew, o)
	second, _ := run()
	require.NotEqual(t, first, second)
	require.Equal(t, domain.StatusCancelled, s.result(token).Status)
	s.requireConsistent(sale)
}
