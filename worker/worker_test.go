package worker

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/store"
)

// isolatedDB is a database of its own for the tests that run the worker's
// loops over "every open sale": in the shared test database those loops
// would relay and record the sales of other packages' tests.
const isolatedDB = "seckill_test_worker"

// isolatedSaleIDs starts the isolated sale ids far above the shared
// database's, so the sales' Redis keys never collide.
const isolatedSaleIDs = 9_000_000_000_000_000

// MustIsolatedStore creates (once) and migrates the worker's own test
// database and answers its DSN and store.
func MustIsolatedStore(tb testing.TB) (string, *store.Store) {
	tb.Helper()
	shared := testenv.MustStore(tb)
	ctx := testCtx(tb)
	_, err := shared.DB.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+isolatedDB)
	require.NoError(tb, err)
	dsnCfg, err := mysql.ParseDSN(testenv.MySQLDSN())
	require.NoError(tb, err)
	dsnCfg.DBName = isolatedDB
	dsn := dsnCfg.FormatDSN()
	st, err := store.Open(ctx, dsn)
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = st.Close() })
	require.NoError(tb, st.Migrate(ctx))
	// Raises the counter the first time; a lower value is ignored after.
	_, err = st.DB.ExecContext(ctx, fmt.Sprintf("ALTER TABLE sales AUTO_INCREMENT = %d", isolatedSaleIDs))
	require.NoError(tb, err)
	return dsn, st
}

// MustWorkerConfig is a configuration of the test services with the
// isolated database, a free metrics port and a short shutdown budget.
func MustWorkerConfig(tb testing.TB) *config.Config {
	tb.Helper()
	cfg := testenv.Config(tb)
	cfg.MySQLDSN, _ = MustIsolatedStore(tb)
	cfg.WorkerMetricsAddr = testenv.FreeAddr(tb)
	cfg.ShutdownTimeout = 5 * time.Second
	cfg.RelayConsumer = fmt.Sprintf("worker-test-%d", testenv.UniqueUser())
	return cfg
}

// signalHandler passes records on and closes running when the worker logs
// that it runs.
type signalHandler struct {
	slog.Handler
	once    *sync.Once
	running chan struct{}
}

func (h signalHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "worker: running" {
		h.once.Do(func() { close(h.running) })
	}
	if !h.Handler.Enabled(ctx, r.Level) {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

// Enabled lets info records through to Handle, which watches for the
// running line and prints warnings only.
func (h signalHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (h signalHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return signalHandler{Handler: h.Handler.WithAttrs(as), once: h.once, running: h.running}
}

func (h signalHandler) WithGroup(name string) slog.Handler {
	return signalHandler{Handler: h.Handler.WithGroup(name), once: h.once, running: h.running}
}

func TestRunServesMetricsAndShutsDownWithinTimeout(t *testing.T) {
	cfg := MustWorkerConfig(t)
	running := make(chan struct{})
	logger := slog.New(signalHandler{
		Handler: slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}),
		once:    new(sync.Once), running: running,
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, logger) }()

	select {
	case <-running:
	case err := <-done:
		t.Fatalf("Run returned before running: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the worker did not start")
	}
	client := &http.Client{Timeout: 5 * time.Second}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		resp, err := client.Get("http://" + cfg.WorkerMetricsAddr + "/metrics")
		if !assert.NoError(c, err) {
			return
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		assert.NoError(c, err)
		assert.Equal(c, http.StatusOK, resp.StatusCode)
		for _, name := range []string{"seckill_inbox_started_total", "seckill_inbox_acked_total", "seckill_inbox_start_errors_total", "go_goroutines"} {
			assert.True(c, strings.Contains(string(body), name), "metric %s served", name)
		}
	}, 10*time.Second, 100*time.Millisecond)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(cfg.ShutdownTimeout + 3*time.Second):
		t.Fatal("Run did not return within the shutdown timeout")
	}
	_, err := client.Get("http://" + cfg.WorkerMetricsAddr + "/metrics")
	assert.Error(t, err, "the metrics listener is closed after Run returns")
}

func TestRunWithCancelledContextReturns(t *testing.T) {
	cfg := MustWorkerConfig(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, testLogger()) }()
	select {
	case err := <-done:
		require.NoError(t, err, "a cancelled start is a clean stop")
	case <-time.After(cfg.ShutdownTimeout + 3*time.Second):
		t.Fatal("Run with a cancelled context did not return within the shutdown timeout")
	}
}

func TestRunRefusesTakenMetricsAddr(t *testing.T) {
	cfg := MustWorkerConfig(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = ln.Close() }()
	cfg.WorkerMetricsAddr = ln.Addr().String()
	err = Run(testCtx(t), cfg, testLogger())
	require.ErrorContains(t, err, "listen for metrics")
}

func TestStockRecorderRecordsRedisStock(t *testing.T) {
	_, st := MustIsolatedStore(t)
	rdb := testenv.MustRedis(t)
	warmed := testenv.MustSale(t, st, 10)
	cold := testenv.MustSale(t, st, 10)
	require.Greater(t, warmed.ID, int64(isolatedSaleIDs-1))
	k := redisgateway.SaleKeys(warmed.ID)
	require.NoError(t, rdb.Set(testCtx(t), k.Stock, 7, time.Hour).Err())
	t.Cleanup(func() { _ = rdb.Del(context.Background(), k.Stock).Err() })

	rec := &StockRecorder{Redis: redisgateway.NewClient(rdb), Store: st, Logger: testLogger()}
	n, err := rec.RecordOnce(testCtx(t))
	require.NoError(t, err)
	assert.Positive(t, n)

	seen := func(id int64) sql.NullInt64 {
		var v sql.NullInt64
		require.NoError(t, st.DB.QueryRowContext(testCtx(t), "SELECT redis_stock_seen FROM sales WHERE id = ?", id).Scan(&v))
		return v
	}
	assert.Equal(t, sql.NullInt64{Int64: 7, Valid: true}, seen(warmed.ID))
	assert.False(t, seen(cold.ID).Valid, "a sale without a Redis stock key is not recorded")

	// On the database path the sale row is left alone (no write each
	// second for that path's transactions to wait for).
	_, err = st.SwitchToDatabase(testCtx(t), warmed.ID, 0)
	require.NoError(t, err)
	require.NoError(t, rdb.Set(testCtx(t), k.Stock, 5, time.Hour).Err())
	_, err = rec.RecordOnce(testCtx(t))
	require.NoError(t, err)
	assert.Equal(t, sql.NullInt64{Int64: 7, Valid: true}, seen(warmed.ID), "a sale in database mode is not sampled")
}
