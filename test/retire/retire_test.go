// Package retire holds that ended sales leave nothing behind: once retired,
// a sale has no Redis key, no per-sale state in an API instance and no
// per-sale series on a worker, and a new sale of the same goods starts
// clean.
package retire

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/backend"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/sales"
	"github.com/seckill/seckill/store"
	"github.com/seckill/seckill/worker"
)

const endedSales = 1000

// TestEndedSalesLeaveNothingBehind: 1,000 sales of one goods id, warmed and
// cached by a real API, a few with reservations; they end. A sale whose
// reservation is still live is refused retirement until it settles; then
// every one retires: no key of theirs is left in Redis (a late writer's
// key is swept by the worker's retirer), the API's per-sale state drops to
// nothing, the worker's per-sale series go, and a new sale of the same
// goods sells to the same users.
func TestEndedSalesLeaveNothingBehind(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	st, rdb := testenv.MustStore(t), testenv.MustRedis(t)
	rc := redisgateway.NewClient(rdb)
	goods := time.Now().UnixNano() % 1_000_000_000
	ids := mustWarmSales(t, ctx, st, rc, goods, endedSales)
	reg := prometheus.NewRegistry()
	base := mustAPI(t, reg)
	waitState(t, reg, func(s map[string]float64) bool { return s["sale_cache"] >= endedSales }, "the API caches the sales")

	// Reservations on a few sales; one of each is cancelled before the end.
	buyers := []int64{testenv.UniqueUser(), testenv.UniqueUser(), testenv.UniqueUser()}
	tokens := make([]string, len(buyers))
	for i, u := range buyers {
		tokens[i] = mustReserve(t, base, ids[i*7], u, "retire-buy-"+strconv.Itoa(i))
	}
	mustCancel(t, base, buyers[0], tokens[0])

	_, err := st.DB.ExecContext(ctx, "UPDATE sales SET ends_at = ? WHERE goods_id = ?", time.Now().UTC().Add(-5*time.Second), goods)
	require.NoError(t, err)
	now := time.Now()
	for i := 1; i < len(buyers); i++ {
		err := sales.Retire(ctx, st, rc, ids[i*7], now)
		require.ErrorIs(t, err, sales.ErrNotSettled, "a live reservation holds the sale")
		n, err := rdb.Exists(ctx, redisgateway.SaleKeys(ids[i*7]).All()...).Result()
		require.NoError(t, err)
		require.NotZero(t, n, "a refused retirement leaves the keys")
		mustCancel(t, base, buyers[i], tokens[i])
	}
	for _, id := range ids {
		require.NoError(t, sales.Retire(ctx, st, rc, id, now))
	}
	require.Empty(t, keysOf(t, ctx, rdb, ids), "no key of a retired sale is left")

	// A late writer (a repeated release) puts keys back; the retirer sweeps
	// them, and drops the worker's series of the retired sales.
	_, err = sales.SyncToken(ctx, st, rc, tokens[1])
	require.NoError(t, err)
	require.NotEmpty(t, keysOf(t, ctx, rdb, ids), "the repeated release wrote keys of the retired sale")
	wm, am := mustWorkerMetrics(t, ids)
	r := &worker.Retirer{Store: st, Redis: rc, Metrics: wm, ActMetrics: am, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	require.NoError(t, r.Once(ctx, time.Now()))
	require.Empty(t, keysOf(t, ctx, rdb, ids), "the retirer swept the keys put back")
	for _, c := range []prometheus.Collector{wm.DeadLetters, wm.Lag, wm.Pending, wm.OldestAge, am.Consistent, am.Discrepancies, am.WithoutWorkflow} {
		require.Zero(t, countSeries(t, c), "a retired sale's series are gone")
	}

	waitState(t, reg, func(s map[string]float64) bool {
		return s["sale_cache"] == 0 && s["status"] == 0 && s["allowlists"] == 0 && s["lottery"] == 0
	}, "the API keeps nothing of the retired sales")
	require.Zero(t, gatheredSeries(t, reg, "seckill_sale_database_mode"), "the API's per-sale series are gone")

	// A new sale of the same goods sells, to the same buyers too.
	next := mustWarmSales(t, ctx, st, rc, goods, 1)[0]
	for i, u := range buyers {
		mustReserve(t, base, next, u, "retire-buy-"+strconv.Itoa(i))
	}
}

func mustWarmSales(t *testing.T, ctx context.Context, st *store.Store, rc *redisgateway.Client, goods int64, n int) []int64 {
	t.Helper()
	ids := make([]int64, n)
	for i := range ids {
		sale := testenv.MustSale(t, st, 5, func(s *domain.Sale) {
			s.GoodsID = goods
			s.PaymentWindowSeconds = 1
		})
		ids[i] = sale.ID
		outcome, _, err := sales.Warmup(ctx, st, rc, nil, sale.ID)
		require.NoError(t, err)
		require.Equal(t, redisgateway.WarmupOK, outcome)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, id := range ids {
			if err := sales.Teardown(ctx, st, rc, id); err != nil {
				t.Logf("clean up sale %d: %v", id, err)
			}
		}
	})
	return ids
}

// mustAPI serves a real API on loopback, its metrics on reg.
func mustAPI(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	cfg := testenv.Config(t)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := api.NewServer(api.Deps{Config: cfg, Logger: logger, Services: backend.Build(backend.Deps{Config: cfg, Logger: logger, Store: testenv.MustStore(t), Redis: redisgateway.NewClient(testenv.MustRedis(t)), Registry: reg})})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.App.ShutdownWithTimeout(5 * time.Second) })
	return "http://" + ln.Addr().String()
}

func mustReserve(t *testing.T, base string, saleID, user int64, requestID string) string {
	t.Helper()
	code, body, err := testenv.Do(http.MethodPost, base+"/api/v1/sales/"+strconv.FormatInt(saleID, 10)+"/reservations", user,
		map[string]any{"request_id": requestID})
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, code, "%v", body)
	token, _ := body["token"].(string)
	require.NotEmpty(t, token)
	return token
}

func mustCancel(t *testing.T, base string, user int64, token string) {
	t.Helper()
	code, body, err := testenv.Do(http.MethodPost, base+"/api/v1/reservations/"+token+"/cancel", user, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code, "%v", body)
	require.Equal(t, string(domain.StatusCancelled), body["status"])
}

// keysOf scans Redis once for keys of the given sales.
func keysOf(t *testing.T, ctx context.Context, rdb redis.UniversalClient, ids []int64) []string {
	t.Helper()
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want["{sale:"+strconv.FormatInt(id, 10)+"}"] = true
	}
	var left []string
	iter := rdb.Scan(ctx, 0, "{sale:*", 5000).Iterator()
	for iter.Next(ctx) {
		if i := strings.Index(iter.Val(), "}"); i > 0 && want[iter.Val()[:i+1]] {
			left = append(left, iter.Val())
		}
	}
	require.NoError(t, iter.Err())
	return left
}

// mustWorkerMetrics are a worker's relay and activity metrics holding a
// series of each sale, as a worker that relayed and reconciled them does.
func mustWorkerMetrics(t *testing.T, ids []int64) (*worker.Metrics, *activities.Metrics) {
	t.Helper()
	reg := prometheus.NewRegistry()
	wm, err := worker.NewMetrics(reg)
	require.NoError(t, err)
	am, err := activities.NewMetrics(reg)
	require.NoError(t, err)
	for _, id := range ids {
		l := strconv.FormatInt(id, 10)
		wm.DeadLetters.WithLabelValues(l)
		wm.Lag.WithLabelValues(l).Set(0)
		wm.Pending.WithLabelValues(l).Set(0)
		wm.OldestAge.WithLabelValues(l).Set(0)
		am.Consistent.WithLabelValues(l).Set(1)
		am.Discrepancies.WithLabelValues(l).Set(0)
		am.WithoutWorkflow.WithLabelValues(l).Set(0)
	}
	require.Equal(t, len(ids), countSeries(t, wm.Lag))
	return wm, am
}

func countSeries(t *testing.T, c prometheus.Collector) int {
	t.Helper()
	ch := make(chan prometheus.Metric, 1024)
	go func() { c.Collect(ch); close(ch) }()
	n := 0
	for range ch {
		n++
	}
	return n
}

func gatheredSeries(t *testing.T, reg *prometheus.Registry, name string) int {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			return len(mf.GetMetric())
		}
	}
	return 0
}

// waitState waits until the API's seckill_sale_state_entries satisfy ok.
func waitState(t *testing.T, reg *prometheus.Registry, ok func(map[string]float64) bool, what string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		mfs, err := reg.Gather()
		if !assert.NoError(c, err) {
			return
		}
		state := map[string]float64{}
		for _, mf := range mfs {
			if mf.GetName() != "seckill_sale_state_entries" {
				continue
			}
			for _, m := range mf.GetMetric() {
				state[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
			}
		}
		assert.True(c, ok(state), "%s: %v", what, state)
	}, 20*time.Second, 100*time.Millisecond)
}
