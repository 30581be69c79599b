package cluster_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/test/cluster"
)

var do = testenv.Do

var call = testenv.MustDo

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
	apis, _ := mustFleet(tb, overrides)
	return apis[0], apis[1]
}

// mustFleet is mustStack that also returns the workers.
func mustFleet(tb testing.TB, overrides map[string]string) (apis [2]*testenv.API, workers [2]*testenv.Worker) {
	tb.Helper()
	env := testenv.ProcEnv(tb, fmt.Sprintf("cluster-%d", time.Now().UnixNano()), overrides)
	apis[0] = testenv.MustAPI(tb, "api-a", env)
	apis[1] = testenv.MustAPI(tb, "api-b", env)
	workers[0] = testenv.MustWorker(tb, "worker-1", env)
	workers[1] = testenv.MustWorker(tb, "worker-2", env)
	return apis, workers
}
