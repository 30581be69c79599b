package cluster_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/cluster"
	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/internal/authtoken"
	"github.com/seckill/seckill/internal/testenv"
)

var httpClient = &http.Client{Timeout: 15 * time.Second}

// do sends a JSON request as the given user (0: no token; -1: admin). It
// never fails the test, so goroutines and polling conditions may use it.
func do(method, url string, user int64, body any) (int, map[string]any, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, fmt.Errorf("%s %s: %w", method, url, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, url, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if user != 0 {
		role, id := authtoken.RoleUser, user
		if user < 0 {
			role, id = authtoken.RoleAdmin, 1
		}
		tok, err := authtoken.Mint([]byte(config.DevJWTSecret), id, role, time.Hour)
		if err != nil {
			return 0, nil, fmt.Errorf("mint token: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("%s %s: read body: %w", method, url, err)
	}
	var out map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			return resp.StatusCode, nil, fmt.Errorf("%s %s: body %q: %w", method, url, raw, err)
		}
	}
	return resp.StatusCode, out, nil
}

// call is do that fails the test on a transport error.
func call(tb testing.TB, method, url string, user int64, body any) (int, map[string]any) {
	tb.Helper()
	code, out, err := do(method, url, user, body)
	require.NoError(tb, err)
	return code, out
}

// mustLiveSale creates a sale through the API (which starts its sale
// workflow on the test's task queue) and warms it up.
func mustLiveSale(tb testing.TB, apiURL string, stock int) int64 {
	tb.Helper()
	return mustLiveSaleWindow(tb, apiURL, stock, 600)
}

// mustLiveSaleWindow is mustLiveSale with a payment window in seconds.
func mustLiveSaleWindow(tb testing.TB, apiURL string, stock, paymentWindow int) int64 {
	tb.Helper()
	now := time.Now().UTC()
	code, sale := call(tb, "POST", apiURL+"/admin/v1/sales", -1, map[string]any{
		"goods_id": 1, "title": "cluster " + tb.Name(), "price_cents": 500, "stock": stock, "buckets": 4,
		// Ends soon after the test, so the sale does not stay open for
		// long in the shared test database.
		"starts_at": now.Add(-time.Minute).Format(time.RFC3339), "ends_at": now.Add(10 * time.Minute).Format(time.RFC3339),
		"payment_window_seconds": paymentWindow,
	})
	require.Equal(tb, http.StatusCreated, code, "%v", sale)
	saleID := int64(sale["sale_id"].(float64))
	code, body := call(tb, "POST", fmt.Sprintf("%s/admin/v1/sales/%d/warmup", apiURL, saleID), -1, nil)
	require.Equal(tb, http.StatusOK, code, "%v", body)
	require.EqualValues(tb, stock, body["redis_stock"])
	return saleID
}

// mustClusterStack starts the Redis Cluster, two APIs and two workers on it,
// all on a task queue of the test's own.
func mustClusterStack(tb testing.TB, overrides map[string]string) (a, b *testenv.API) {
	tb.Helper()
	rc := cluster.MustRedisCluster(tb)
	o := map[string]string{"REDIS_ADDR": "", "REDIS_ADDRS": rc.AddrList()}
	for k, v := range overrides {
		o[k] = v
	}
	return mustStack(tb, o)
}

// mustStack starts two APIs and two workers with the given environment
// overrides (ProcEnv's test Redis when there are none).
func mustStack(tb testing.TB, overrides map[string]string) (a, b *testenv.API) {
	tb.Helper()
	env := testenv.ProcEnv(tb, fmt.Sprintf("cluster-%d", time.Now().UnixNano()), overrides)
	a = testenv.MustAPI(tb, "api-a", env)
	b = testenv.MustAPI(tb, "api-b", env)
	testenv.MustWorker(tb, "worker-1", env)
	testenv.MustWorker(tb, "worker-2", env)
	return a, b
}
