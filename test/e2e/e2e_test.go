// Package e2e runs the real API and worker processes against the test
// services and checks the whole pipeline as a client sees it.
package e2e

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testkit/testenv"
)

var httpClient = &http.Client{Timeout: 15 * time.Second}

// call sends a JSON request as user (0: no token; testenv.AdminUser: admin).
func call(t *testing.T, method, url string, user int64, body any) (int, map[string]any) {
	t.Helper()
	return testenv.MustDo(t, method, url, user, body)
}

func TestReserveOrderPayThroughRealProcesses(t *testing.T) {
	env := testenv.ProcEnv(t, "e2e-"+fmt.Sprint(time.Now().UnixNano()), nil)
	api := testenv.MustAPI(t, "api", env)
	testenv.MustWorker(t, "worker", env)

	user, token := reservePending(t, api, "e2e", time.Hour, 600)

	code, body := call(t, "POST", api.URL+"/api/v1/reservations/"+token+"/payment", user, map[string]any{"payment_ref": "e2e-pay-1"})
	require.Equal(t, http.StatusOK, code, "%v", body)
	require.Equal(t, "PAID", body["status"])
	code, body = call(t, "POST", api.URL+"/api/v1/reservations/"+token+"/payment", user, map[string]any{"payment_ref": "e2e-pay-1"})
	require.Equal(t, http.StatusOK, code, "the same payment again: %v", body)
	code, body = call(t, "POST", api.URL+"/api/v1/reservations/"+token+"/cancel", user, nil)
	require.Equal(t, http.StatusConflict, code)
	require.Equal(t, "not_cancellable", body["error"].(map[string]any)["code"])
}

// reservePending creates and warms a sale of three units through api
// (open now until ends from now, payment window in seconds) and makes one
// reservation that reaches PENDING_PAYMENT; it returns its user and token.
func reservePending(t *testing.T, api *testenv.API, title string, ends time.Duration, window int) (int64, string) {
	now := time.Now().UTC()
	code, sale := call(t, "POST", api.URL+"/admin/v1/sales", -1, map[string]any{
		"goods_id": 1, "title": title, "price_cents": 500, "stock": 3, "buckets": 2,
		"starts_at": now.Add(-time.Minute).Format(time.RFC3339), "ends_at": now.Add(ends).Format(time.RFC3339),
		"payment_window_seconds": window,
	})
	require.Equal(t, http.StatusCreated, code, "%v", sale)
	saleID := int64(sale["sale_id"].(float64))
	code, body := call(t, "POST", fmt.Sprintf("%s/admin/v1/sales/%d/warmup", api.URL, saleID), -1, nil)
	require.Equal(t, http.StatusOK, code, "%v", body)
	user := testenv.UniqueUser()
	code, body = call(t, "POST", fmt.Sprintf("%s/api/v1/sales/%d/reservations", api.URL, saleID), user, map[string]any{"request_id": title + "-request-1"})
	require.Equal(t, http.StatusAccepted, code, "%v", body)
	token := body["token"].(string)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, body := call(t, "GET", api.URL+"/api/v1/reservations/"+token, user, nil)
		assert.Equal(c, http.StatusOK, code)
		assert.Equal(c, "PENDING_PAYMENT", body["status"])
	}, 60*time.Second, 250*time.Millisecond)
	return user, token
}
