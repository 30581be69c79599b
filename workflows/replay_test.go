package workflows

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testenv"
)

// Histories of real runs, replayed against the current code: a change to
// the workflow's command sequence that is not guarded by
// workflow.GetVersion fails TestReplay.

const historyDir = "testdata"

// orderHistoryPrefix names the order workflow's history files.
const orderHistoryPrefix = "order_"

func TestReplay(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(historyDir, orderHistoryPrefix+"*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no recorded histories; run with SECKILL_RECORD_HISTORIES=1")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflowWithOptions(OrderWorkflow, workflow.RegisterOptions{Name: domain.OrderWorkflowName})
			require.NoError(t, r.ReplayWorkflowHistoryFromJSONFile(nil, f))
		})
	}
}

// TestRecordHistories runs the workflow for real through its four endings,
// saves their histories and replays them. The files go to a temporary
// folder; after a deliberate, versioned change, record the ones TestReplay
// reads with:
//
//	SECKILL_RECORD_HISTORIES=1 go test -count=1 -run TestRecordHistories ./workflows/
func TestRecordHistories(t *testing.T) {
	dir := t.TempDir()
	if os.Getenv("SECKILL_RECORD_HISTORIES") == "1" {
		dir = historyDir
	}
	s := MustStack(t)

	paidSale := s.MustWarmSale(t, 2, 10*time.Minute, 2)
	paid := s.MustOrder(paidSale, testenv.UniqueUser(), "req-rec-paid")
	s.waitStatus(paid.Token, domain.StatusPendingPayment)
	_, err := s.update(paid.Token, domain.UpdatePay, "rec-pay", domain.PayRequest{PaymentRef: "rec-pay"})
	require.NoError(t, err)
	require.Equal(t, domain.StatusPaid, s.result(paid.Token).Status)

	cancelled := s.MustOrder(paidSale, testenv.UniqueUser(), "req-rec-cancel")
	s.waitStatus(cancelled.Token, domain.StatusPendingPayment)
	_, err = s.update(cancelled.Token, domain.UpdateCancel, "rec-cancel", domain.CancelRequest{Reason: "record"})
	require.NoError(t, err)
	require.Equal(t, domain.StatusCancelled, s.result(cancelled.Token).Status)

	expSale := s.MustWarmSale(t, 1, time.Second, 1)
	expired := s.MustOrder(expSale, testenv.UniqueUser(), "req-rec-expired")
	require.Equal(t, domain.StatusExpired, s.result(expired.Token).Status)

	failSale := s.MustWarmSale(t, 1, 10*time.Minute, 1)
	require.NoError(t, s.st.AdjustStock(ctxT(t, 10*time.Second), failSale.ID, -1, fmt.Sprintf("rec-withdraw-%d", failSale.ID)))
	failed := s.MustOrder(failSale, testenv.UniqueUser(), "req-rec-failed")
	require.Equal(t, domain.StatusFailed, s.result(failed.Token).Status)

	for name, in := range map[string]domain.OrderInput{"paid": paid, "cancelled": cancelled, "expired": expired, "failed": failed} {
		path := filepath.Join(dir, orderHistoryPrefix+name+".json")
		s.saveHistory(path, domain.OrderWorkflowID(in.Token))
		r := worker.NewWorkflowReplayer()
		r.RegisterWorkflowWithOptions(OrderWorkflow, workflow.RegisterOptions{Name: domain.OrderWorkflowName})
		require.NoError(t, r.ReplayWorkflowHistoryFromJSONFile(nil, path), "replay of the %s history just recorded", name)
	}
}

func (s *stack) saveHistory(path, workflowID string) {
	s.t.Helper()
	ctx := ctxT(s.t, 30*time.Second)
	iter := s.c.GetWorkflowHistory(ctx, workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	hist := &historypb.History{}
	for iter.HasNext() {
		ev, err := iter.Next()
		require.NoError(s.t, err)
		require.NotEqual(s.t, enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED, ev.GetEventType(), "history of %s has a failed workflow task", workflowID)
		hist.Events = append(hist.Events, ev)
	}
	body, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(hist)
	require.NoError(s.t, err)
	require.NoError(s.t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(s.t, os.WriteFile(path, append(body, '\n'), 0o644))
	s.t.Logf("recorded %s (%d events)", path, len(hist.Events))
}
