package workflows

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/temporalgateway"
)

// The deploy drill: how a change to OrderWorkflow's command sequence ships
// while orders are in flight (docs/runbook.md, "Deploying workflow code").

// drillChange names the drill's patch.
const drillChange = "deploy-drill-extra-timer"

// orderWorkflowNext is OrderWorkflowV2 as the next release would ship it: one
// more command (a timer) guarded by workflow.GetVersion. Workflows started
// before the deploy replay without it; new ones take it.
func orderWorkflowNext(ctx workflow.Context, in domain.OrderInput) (domain.OrderState, error) {
	if workflow.GetVersion(ctx, drillChange, workflow.DefaultVersion, 1) == 1 {
		if err := workflow.Sleep(ctx, time.Millisecond); err != nil {
			return domain.OrderState{}, fmt.Errorf("drill timer: %w", err)
		}
	}
	return OrderWorkflowV2(ctx, in)
}

// orderWorkflowUnguarded is the same change without GetVersion.
func orderWorkflowUnguarded(ctx workflow.Context, in domain.OrderInput) (domain.OrderState, error) {
	if err := workflow.Sleep(ctx, time.Millisecond); err != nil {
		return domain.OrderState{}, fmt.Errorf("drill timer: %w", err)
	}
	return OrderWorkflowV2(ctx, in)
}

// replayerOf registers wf as the type orders start as, beside the type of
// earlier releases, which the drill does not change.
func replayerOf(wf any) worker.WorkflowReplayer {
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(wf, workflow.RegisterOptions{Name: domain.OrderWorkflowName})
	r.RegisterWorkflowWithOptions(OrderWorkflow, workflow.RegisterOptions{Name: domain.OrderWorkflowV1Name})
	return r
}

// An order placed by today's worker is paid after that worker stopped and
// a worker with the changed code took over: the new worker rebuilds the
// workflow by replaying its history (the old branch of the patch) and
// finishes it. A workflow started after the deploy takes the new branch,
// and today's code cannot replay it: a rollback is safe only while no
// workflow has taken a new branch. The same change without GetVersion
// fails the replay of the recorded histories.
func TestDeployOfChangedWorkflowCodeMidFlight(t *testing.T) {
	s := MustStack(t)
	queue := s.queue + "-deploy"
	acts := &activities.Activities{Store: s.st, Redis: redisgateway.NewClient(s.rdb)}
	before := worker.New(s.c, queue, worker.Options{})
	Register(before, acts)
	require.NoError(t, before.Start())

	sale := s.MustWarmSale(t, 2, 10*time.Minute, 2)
	start := func(req string) domain.OrderInput {
		user := testenv.UniqueUser()
		outcome, token := s.reserve(sale, user, req)
		require.Equal(t, redisgateway.OutcomeOK, outcome)
		in := domain.OrderInput{Token: token, SaleID: sale.ID, UserID: user, RequestID: req, Path: domain.PathRedis}
		require.NoError(t, temporalgateway.Start(ctxT(t, 10*time.Second), s.c, queue, in))
		return in
	}
	inFlight := start("req-deploy-old")
	s.waitStatus(inFlight.Token, domain.StatusPendingPayment)
	s.waitWorkflowStatus(inFlight.Token, domain.StatusPendingPayment)
	before.Stop() // the old release is gone; the workflow waits on its timer

	after := worker.New(s.c, queue, worker.Options{})
	after.RegisterWorkflowWithOptions(orderWorkflowNext, workflow.RegisterOptions{Name: domain.OrderWorkflowName})
	after.RegisterActivity(acts)
	require.NoError(t, after.Start())
	t.Cleanup(after.Stop)

	s.mustUpdate(inFlight.Token, domain.UpdatePay, domain.PayRequest{PaymentRef: "deploy-old-pay"}, domain.StatusPaid)
	require.Equal(t, domain.StatusPaid, s.result(inFlight.Token).Status)
	fresh := start("req-deploy-new")
	s.waitWorkflowStatus(fresh.Token, domain.StatusPendingPayment)
	s.mustUpdate(fresh.Token, domain.UpdatePay, domain.PayRequest{PaymentRef: "deploy-new-pay"}, domain.StatusPaid)
	require.Equal(t, domain.StatusPaid, s.result(fresh.Token).Status)
	s.requireConsistent(sale)

	dir := t.TempDir()
	oldPath, newPath := filepath.Join(dir, "in_flight.json"), filepath.Join(dir, "fresh.json")
	s.saveHistory(oldPath, domain.OrderWorkflowID(inFlight.Token), "")
	s.saveHistory(newPath, domain.OrderWorkflowID(fresh.Token), "")
	markers := func(wid string) (versions, timers int) {
		for _, ev := range s.history(wid, "") {
			switch ev.GetEventType() {
			case enumspb.EVENT_TYPE_MARKER_RECORDED:
				// Only the drill's own patch: today's code has patches of
				// its own (redis-step-reads-state).
				m := ev.GetMarkerRecordedEventAttributes()
				if id := m.GetDetails()["change-id"]; m.GetMarkerName() == "Version" && id != nil &&
					len(id.GetPayloads()) == 1 && strings.Contains(string(id.GetPayloads()[0].GetData()), drillChange) {
					versions++
				}
			case enumspb.EVENT_TYPE_TIMER_FIRED:
				timers++
			}
		}
		return versions, timers
	}
	v, _ := markers(domain.OrderWorkflowID(inFlight.Token))
	require.Zero(t, v, "the in-flight workflow kept the old branch")
	v, timers := markers(domain.OrderWorkflowID(fresh.Token))
	require.Equal(t, 1, v, "the new workflow took the new branch")
	require.Equal(t, 1, timers, "and ran its extra timer")

	next := replayerOf(orderWorkflowNext)
	require.NoError(t, next.ReplayWorkflowHistoryFromJSONFile(nil, oldPath))
	require.NoError(t, next.ReplayWorkflowHistoryFromJSONFile(nil, newPath))
	retired := readRetired(t)
	for _, f := range historyFiles(t, historyDir) {
		if base := filepath.Base(f); base[:len(orderHistoryPrefix)] == orderHistoryPrefix && !retired[base] {
			require.NoError(t, next.ReplayWorkflowHistoryFromJSONFile(nil, f), "the patched code replays %s", f)
		}
	}
	require.Error(t, replayerOf(OrderWorkflowV2).ReplayWorkflowHistoryFromJSONFile(nil, newPath),
		"today's code cannot replay a workflow that took the new branch: no rollback past it")
	require.Error(t, replayerOf(orderWorkflowUnguarded).ReplayWorkflowHistoryFromJSONFile(nil, filepath.Join(historyDir, "order_paid@v2.json")),
		"the change without GetVersion breaks the recorded histories")
}
