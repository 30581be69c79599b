package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/internal/paysig"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

// providerPays posts a signed payment confirmation, as the provider does.
func providerPays(t *testing.T, base, token, ref string, amount int64) (int, map[string]any) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"token": token, "payment_ref": ref, "amount_cents": amount})
	require.NoError(t, err)
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req, err := http.NewRequest("POST", base+"/webhooks/payments", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Timestamp", ts)
	req.Header.Set("X-Signature", paysig.Sign([]byte(config.DevPaymentSecret), ts, body))
	resp, err := httpClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var out map[string]any
	require.NoError(t, json.Unmarshal(raw, &out), "body %s", raw)
	return resp.StatusCode, out
}

// reserveAndWait reserves for a fresh user and waits until the reservation
// reaches one of the statuses.
func reserveAndWait(t *testing.T, base string, saleID int64, statuses ...string) (string, int64) {
	t.Helper()
	user := testenv.UniqueUser()
	code, body := call(t, "POST", fmt.Sprintf("%s/api/v1/sales/%d/reservations", base, saleID), user, map[string]any{"request_id": "webhook-e2e-1"})
	require.Equal(t, http.StatusAccepted, code, "%v", body)
	token := body["token"].(string)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, body := call(t, "GET", base+"/api/v1/reservations/"+token, user, nil)
		assert.Equal(c, http.StatusOK, code)
		assert.Contains(c, statuses, body["status"])
	}, 3*time.Minute, 300*time.Millisecond)
	return token, user
}

// TestPaymentWebhookThroughRealProcesses: the provider's confirmation pays a
// pending reservation through the order workflow; one that arrives after the
// payment window closed is recorded for a refund and never becomes a sale.
func TestPaymentWebhookThroughRealProcesses(t *testing.T) {
	env := testenv.ProcEnv(t, "webhook-"+strconv.FormatInt(time.Now().UnixNano(), 10), nil)
	proc := testenv.MustAPI(t, "api", env)
	testenv.MustWorker(t, "worker", env)

	live := mustLiveSale(t, proc.URL, "webhook live", 1500, 2, 900)
	token, user := reserveAndWait(t, proc.URL, live, "PENDING_PAYMENT")
	code, body := providerPays(t, proc.URL, token, "prov-live-1", 1499)
	require.Equal(t, http.StatusConflict, code, "%v", body)
	require.Equal(t, "amount_mismatch", body["error"].(map[string]any)["code"])
	code, body = providerPays(t, proc.URL, token, "prov-live-1", 1500)
	require.Equal(t, http.StatusOK, code, "%v", body)
	require.Equal(t, "PAID", body["status"])
	code, body = providerPays(t, proc.URL, token, "prov-live-1", 1500)
	require.Equal(t, http.StatusOK, code, "the provider's retry: %v", body)
	require.Equal(t, "PAID", body["status"])
	code, body = call(t, "GET", proc.URL+"/api/v1/reservations/"+token, user, nil)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "PAID", body["status"])

	// A free sale (price 0) settles through the webhook like any other.
	free := mustLiveSale(t, proc.URL, "webhook free", 0, 2, 900)
	freeToken, freeUser := reserveAndWait(t, proc.URL, free, "PENDING_PAYMENT")
	code, body = providerPays(t, proc.URL, freeToken, "prov-free-1", 0)
	require.Equal(t, http.StatusOK, code, "%v", body)
	require.Equal(t, "PAID", body["status"])
	code, body = call(t, "GET", proc.URL+"/api/v1/reservations/"+freeToken, freeUser, nil)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "PAID", body["status"])

	// A one-second payment window: the order expires before the provider calls.
	short := mustLiveSale(t, proc.URL, "webhook late", 2500, 2, 1)
	late, lateUser := reserveAndWait(t, proc.URL, short, "EXPIRED")
	for range 2 {
		code, body = providerPays(t, proc.URL, late, "prov-late-1", 2500)
		require.Equal(t, http.StatusOK, code, "%v", body)
		require.Equal(t, "REFUND_REQUIRED", body["status"])
		require.Equal(t, "reservation_expired", body["reason"])
		require.Equal(t, "EXPIRED", body["reservation_status"])
		require.EqualValues(t, 2500, body["amount_cents"])
	}
	code, body = call(t, "GET", proc.URL+"/api/v1/reservations/"+late, lateUser, nil)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "EXPIRED", body["status"], "a late payment never becomes a sale")

	code, body = call(t, "GET", fmt.Sprintf("%s/admin/v1/refunds?sale_id=%d", proc.URL, short), -1, nil)
	require.Equal(t, http.StatusOK, code, "%v", body)
	require.Len(t, body["refunds"], 1, "the provider's retry is recorded once")
	code, body = call(t, "GET", fmt.Sprintf("%s/admin/v1/sales/%d/reconciliation", proc.URL, short), -1, nil)
	require.Equal(t, http.StatusOK, code, "%v", body)
	require.EqualValues(t, 1, body["refunds"])
}
