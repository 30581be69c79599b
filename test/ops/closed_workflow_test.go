package ops

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/paysig"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

// webhookPay confirms a payment as the provider does (dev secret).
func (s *stack) webhookPay(tb testing.TB, token, ref string, amount int64) (int, map[string]any) {
	tb.Helper()
	body, err := json.Marshal(map[string]any{"token": token, "payment_ref": ref, "amount_cents": amount})
	require.NoError(tb, err)
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req, err := http.NewRequest("POST", s.api.URL+"/webhooks/payments", bytes.NewReader(body))
	require.NoError(tb, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Timestamp", ts)
	req.Header.Set("X-Signature", paysig.Sign([]byte("seckill-dev-payment-secret"), ts, body))
	resp, err := httpClient.Do(req)
	require.NoError(tb, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(tb, err)
	var out map[string]any
	require.NoError(tb, json.Unmarshal(raw, &out), "%s", raw)
	return resp.StatusCode, out
}

// closedKinds lists the report's workflow_closed findings by token.
func closedKinds(rep report) map[string]bool {
	out := map[string]bool{}
	for _, d := range rep.Discrepancies {
		if d.Kind == domain.KindWorkflowClosed {
			out[d.Token] = d.Repaired
		}
	}
	return out
}

// An operator terminates PENDING_PAYMENT orders' workflows with the
// runbook's command. Reconciliation reports each as workflow_closed; the
// repairing round gives it a new run (before pay_by), the next round
// confirms it gone, and the user's payment settles PAID. A provider payment
// for a terminated order settles without waiting for reconciliation: PAID
// before pay_by, REFUND_REQUIRED after it (the reservation is released and
// the user may buy again).
func TestTerminatedOrderIsRepairedAndPaymentsSettle(t *testing.T) {
	s := MustStack(t, "closed", nil)
	rb := MustRunbook(t, s.api.URL)
	long := s.MustLiveSale(t, 5, 300, 30*time.Minute)
	short := s.MustLiveSale(t, 5, 3, 30*time.Minute)
	// Only this test's reconciliation rounds repair: the sales' own
	// workflows (which reconcile every minute) are stopped.
	tc := testenv.MustTemporal(t)
	for _, sale := range []int64{long, short} {
		// The API starts a sale's workflow in the background after its 201.
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.NoError(c, tc.TerminateWorkflow(testCtx(t, 10*time.Second), domain.SaleWorkflowID(sale), "", "test drives reconciliation"))
		}, 30*time.Second, 200*time.Millisecond)
	}

	// Round by round, through the reconciliation API.
	user, token := s.MustPending(t, long)
	rb.run("terminate", map[string]string{"TOKEN": token})
	rep := s.reconciliation(t, long, false)
	require.Equal(t, map[string]bool{token: false}, closedKinds(rep), rep.raw)
	require.False(t, rep.Consistent, rep.raw)
	rep = s.reconciliation(t, long, true)
	require.Equal(t, map[string]bool{token: true}, closedKinds(rep), rep.raw)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		rep, err := s.tryReconciliation(t, long)
		if assert.NoError(c, err) {
			assert.Empty(c, rep.Discrepancies, rep.raw)
			assert.True(c, rep.Consistent, rep.raw)
		}
	}, 30*time.Second, time.Second, "the next round confirms the repair")
	code, body := call(t, "POST", s.api.URL+"/api/v1/reservations/"+token+"/payment", user, map[string]any{"payment_ref": "closed-user-pay"})
	require.Equal(t, http.StatusOK, code, "%v", body)
	require.Equal(t, "PAID", body["status"])

	// A provider payment finds the workflow terminated, before pay_by.
	_, token2 := s.MustPending(t, long)
	rb.run("terminate", map[string]string{"TOKEN": token2})
	code, body = s.webhookPay(t, token2, "closed-hook-pay", 500)
	require.Equal(t, http.StatusOK, code, "%v", body)
	require.Equal(t, "PAID", body["status"], "%v", body)

	// And after pay_by: released, recorded for a refund.
	user3, token3 := s.MustPending(t, short)
	rb.run("terminate", map[string]string{"TOKEN": token3})
	time.Sleep(4 * time.Second)
	code, body = s.webhookPay(t, token3, "closed-late-pay", 500)
	require.Equal(t, http.StatusOK, code, "%v", body)
	require.Equal(t, "REFUND_REQUIRED", body["status"], "%v", body)
	s.waitStatus(t, user3, token3, "EXPIRED")
	code, body = s.reserve(t, short, user3, "closed-again-"+strconv.FormatInt(testenv.UniqueUser(), 10))
	require.Equal(t, http.StatusAccepted, code, "the user may buy again: %v", body)

	for _, sale := range []int64{long, short} {
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			rep, err := s.tryReconciliation(t, sale)
			if assert.NoError(c, err) {
				assert.Empty(c, rep.Discrepancies, rep.raw)
				assert.True(c, rep.Consistent, rep.raw)
			}
		}, 30*time.Second, time.Second)
	}
}
