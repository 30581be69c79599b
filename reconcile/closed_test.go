package reconcile_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/temporalgateway"
)

// A regular pass lists the sale's closed order workflows, not its running
// ones: while an order's workflow runs nothing is found; once an operator
// terminates it, the pass reports its live reservation workflow_closed,
// and so does the teardown's full check (RepairClosedWorkflows, which
// lists the running ones), found without repair here as there is no
// Restart.
func TestClosedOrderWorkflowIsFoundWithoutListingTheRunningOnes(t *testing.T) {
	f := mustWarmSale(t, 5)
	user := testenv.UniqueUser()
	in := f.hold(user, "request-closed")
	f.order(in)
	tc := testenv.MustTemporal(t)
	// A task queue nobody polls: the workflow stays running until
	// terminated.
	require.NoError(t, temporalgateway.Start(ctx(t), tc, fmt.Sprintf("reconcile-unpolled-%d", user), in))
	id := domain.OrderWorkflowID(in.Token)
	t.Cleanup(func() { _ = tc.TerminateWorkflow(ctx(t), id, "", "test cleanup") })

	rep := f.run(false)
	require.NotContains(t, kinds(rep), domain.KindWorkflowClosed, "running: %+v", rep)

	require.NoError(t, tc.TerminateWorkflow(ctx(t), id, "", "operator"))
	// Visibility shows the close a moment later.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		rep := f.run(false)
		assert.Contains(c, kinds(rep), domain.KindWorkflowClosed, "%+v", rep)
		for _, d := range rep.Discrepancies {
			if d.Kind == domain.KindWorkflowClosed {
				assert.Equal(c, in.Token, d.Token)
			}
		}
	}, 30*time.Second, 200*time.Millisecond)

	found, err := f.rec.RepairClosedWorkflows(ctx(t), f.sale.ID)
	require.NoError(t, err)
	require.Len(t, found, 1)
	require.Equal(t, domain.KindWorkflowClosed, found[0].Kind)
	require.Equal(t, in.Token, found[0].Token)
}
