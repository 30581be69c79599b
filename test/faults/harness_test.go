package faults

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/redisnode"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/reconcile"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/store"
	"github.com/seckill/seckill/temporalgateway"
	"github.com/seckill/seckill/test/finalstate"
)

// The summary table, one row per checked scenario, printed by TestMain.
var (
	rowsMu sync.Mutex
	rows   []Row
)

func TestMain(m *testing.M) {
	code := m.Run()
	dropFaultsDB()
	rowsMu.Lock()
	if len(rows) > 0 {
		table := Table(rows)
		fmt.Printf("\nfault suite summary:\n%s\n", table)
		// go test shows a passing package's output only with -v: the test
		// script prints this file after the run.
		if path := os.Getenv("SECKILL_FAULTS_SUMMARY"); path != "" {
			if err := os.WriteFile(path, []byte(table), 0o644); err != nil {
				fmt.Fprintf(os.Stderr, "write fault summary: %v\n", err)
			}
		}
	}
	rowsMu.Unlock()
	os.Exit(code)
}

var httpClient = &http.Client{Timeout: 15 * time.Second}

// stack is one scenario's processes and the clients the checker reads with.
type stack struct {
	t        *testing.T
	queue    string
	env      map[string]string
	st       *store.Store
	rdb      redis.UniversalClient
	tc       client.Client
	api      *testenv.API
	worker   *testenv.Worker
	saleID   int64
	stock    int64
	mu       sync.Mutex
	tokens   []string // tokens clients got (202)
	requests int      // reservation requests sent
	repair   bool     // reconcile with repair while waiting for idle
	// openWindows: payment windows are still open when the state is
	// checked, so pending reservations are allowed.
	openWindows bool
}

// stackOpts chooses the services of a scenario; empty fields mean the shared
// test services. sentinels, when set, is the Redis of the scenario instead
// of redisAddr: the processes and the checker find its master through its
// sentinels and follow a failover.
type stackOpts struct {
	redisAddr, mysqlDSN, temporalAddr string
	sentinels                         *redisnode.SentinelGroup
	apiEnv, workerEnv                 map[string]string
}

// MustStack starts an API and a worker on a task queue of their own.
func MustStack(t *testing.T, o stackOpts) *stack {
	t.Helper()
	queue := fmt.Sprintf("faults-%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), time.Now().UnixNano())
	over := map[string]string{"SECKILL_RELAY_MIN_IDLE": "2s"}
	if o.redisAddr != "" {
		over["REDIS_ADDR"] = o.redisAddr
	}
	if o.sentinels != nil {
		// Sentinel mode is refused alongside an address: empty is unset.
		over["REDIS_ADDR"] = ""
		over["REDIS_SENTINELS"] = strings.Join(o.sentinels.SentinelAddrs(), ",")
		over["REDIS_SENTINEL_MASTER"] = redisnode.SentinelMaster
	}
	if o.mysqlDSN == "" {
		o.mysqlDSN = mustFaultsDB(t)
	}
	over["MYSQL_DSN"] = o.mysqlDSN
	if o.temporalAddr != "" {
		over["TEMPORAL_ADDRESS"] = o.temporalAddr
	}
	env := testenv.ProcEnv(t, queue, over)
	s := &stack{t: t, queue: queue, env: env}
	s.st = mustStoreAt(t, env["MYSQL_DSN"])
	if o.sentinels != nil {
		s.rdb = mustFailoverRedis(t, o.sentinels)
	} else {
		s.rdb = mustRedisAt(t, env["REDIS_ADDR"])
	}
	s.tc = mustTemporalAt(t, env["TEMPORAL_ADDRESS"])
	s.api = testenv.MustAPI(t, "api", merge(env, o.apiEnv))
	s.worker = testenv.MustWorker(t, "worker", merge(env, o.workerEnv))
	return s
}

// The suite's own database on the shared MariaDB: a worker serves every
// open sale of its database, and the shared one holds hundreds from other
// packages; its sale ids start far from theirs, so Redis keys and workflow
// ids on the shared Redis and Temporal cannot collide.
var (
	faultsDBOnce sync.Once
	faultsDSN    string
	faultsDBName string
	faultsDBErr  error
)

func mustFaultsDB(tb testing.TB) string {
	tb.Helper()
	faultsDBOnce.Do(func() {
		cfg, err := mysql.ParseDSN(testenv.MySQLDSN())
		if err != nil {
			faultsDBErr = fmt.Errorf("parse %s: %w", testenv.MySQLDSN(), err)
			return
		}
		faultsDBName = fmt.Sprintf("seckill_faults_%d", time.Now().UnixNano())
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if faultsDBErr = execRoot(ctx, cfg, "CREATE DATABASE "+faultsDBName); faultsDBErr != nil {
			return
		}
		cfg.DBName = faultsDBName
		faultsDSN = cfg.FormatDSN()
	})
	require.NoError(tb, faultsDBErr, "the fault suite's database")
	mustIsolatedSaleIDs(tb, faultsDSN)
	return faultsDSN
}

// mustIsolatedSaleIDs migrates a database and moves its next sale id far
// from every other database's.
func mustIsolatedSaleIDs(tb testing.TB, dsn string) {
	tb.Helper()
	st := mustStoreAt(tb, dsn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var next int64
	require.NoError(tb, st.DB.QueryRowContext(ctx, "SELECT COALESCE(MAX(id), 0) FROM sales").Scan(&next))
	if next == 0 {
		_, err := st.DB.ExecContext(ctx, fmt.Sprintf("ALTER TABLE sales AUTO_INCREMENT = %d", 2_000_000_000_000+time.Now().UnixMilli()%1_000_000_000_000))
		require.NoError(tb, err)
	}
}

func execRoot(ctx context.Context, cfg *mysql.Config, stmt string) error {
	c := cfg.Clone()
	c.DBName = ""
	db, err := sql.Open("mysql", c.FormatDSN())
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, stmt); err != nil {
		return fmt.Errorf("%s: %w", stmt, err)
	}
	return nil
}

// dropFaultsDB drops the suite's own database after the run.
func dropFaultsDB() {
	if faultsDBName == "" {
		return
	}
	cfg, err := mysql.ParseDSN(faultsDSN)
	if err != nil {
		fmt.Fprintf(os.Stderr, "faults: drop database: %v\n", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := execRoot(ctx, cfg, "DROP DATABASE "+faultsDBName); err != nil {
		fmt.Fprintf(os.Stderr, "faults: drop database: %v\n", err)
	}
}

func merge(a, b map[string]string) map[string]string {
	out := make(map[string]string, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

func mustStoreAt(tb testing.TB, dsn string) *store.Store {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := store.Open(ctx, dsn)
	require.NoError(tb, err, "open %s", dsn)
	require.NoError(tb, st.Migrate(ctx))
	tb.Cleanup(func() { _ = st.Close() })
	return st
}

func mustRedisAt(tb testing.TB, addr string) redis.UniversalClient {
	tb.Helper()
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{addr}, ReadTimeout: 3 * time.Second, WriteTimeout: 3 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(tb, rdb.Ping(ctx).Err(), "redis at %s", addr)
	tb.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// mustFailoverRedis is a client of the group's master that follows its
// failovers, as the processes' clients do.
func mustFailoverRedis(tb testing.TB, g *redisnode.SentinelGroup) redis.UniversalClient {
	tb.Helper()
	o := g.FailoverOptions()
	o.ReadTimeout, o.WriteTimeout = 3*time.Second, 3*time.Second
	rdb := redis.NewFailoverClient(o)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(tb, rdb.Ping(ctx).Err(), "redis master %s through sentinels %v", o.MasterName, o.SentinelAddrs)
	tb.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

func mustTemporalAt(tb testing.TB, addr string) client.Client {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{HostPort: addr, Logger: testenv.TemporalLogger{}})
	require.NoError(tb, err, "temporal at %s", addr)
	tb.Cleanup(c.Close)
	return c
}

// bearer is an Authorization header for user (testenv.AdminUser: admin).
func bearer(tb testing.TB, user int64) string { return "Bearer " + testenv.MustToken(tb, user) }

// call sends a JSON request as user; a transport error comes back as err.
func call(_ testing.TB, method, url string, user int64, body any) (int, map[string]any, error) {
	return testenv.Do(method, url, user, body)
}

var mustCall = testenv.MustDo

// MustSale creates and warms a live sale through the admin API.
func (s *stack) MustSale(stock int64, windowSeconds int) {
	t := s.t
	t.Helper()
	now := time.Now().UTC()
	code, sale := mustCall(t, "POST", s.api.URL+"/admin/v1/sales", -1, map[string]any{
		"goods_id": 8, "title": "faults " + t.Name(), "price_cents": 100, "stock": stock, "buckets": 4,
		"starts_at": now.Add(-time.Minute).Format(time.RFC3339), "ends_at": now.Add(30 * time.Minute).Format(time.RFC3339),
		"payment_window_seconds": windowSeconds,
	})
	require.Equal(t, http.StatusCreated, code, "%v", sale)
	s.saleID = int64(sale["sale_id"].(float64))
	s.stock = stock
	code, body := mustCall(t, "POST", fmt.Sprintf("%s/admin/v1/sales/%d/warmup", s.api.URL, s.saleID), -1, nil)
	require.Equal(t, http.StatusOK, code, "%v", body)
}

// reserve sends one reservation request; a 202's token is recorded.
func (s *stack) reserve(user int64, requestID string) (int, map[string]any, error) {
	s.mu.Lock()
	s.requests++
	s.mu.Unlock()
	code, body, err := call(s.t, "POST", fmt.Sprintf("%s/api/v1/sales/%d/reservations", s.api.URL, s.saleID), user, map[string]any{"request_id": requestID})
	if err == nil && code == http.StatusAccepted {
		s.addToken(body["token"].(string))
	}
	return code, body, err
}

func (s *stack) addToken(tok string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens = append(s.tokens, tok)
}

// burst reserves for n fresh users at once; it returns the users that got
// a 202 with their tokens. Transport errors and 503s are expected in fault
// scenarios and not retried here.
func (s *stack) burst(n int) map[int64]string {
	var mu sync.Mutex
	got := map[int64]string{}
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		user := testenv.UniqueUser()
		wg.Go(func() {
			code, body, err := s.reserve(user, fmt.Sprintf("burst-%d", user))
			if err == nil && code == http.StatusAccepted {
				mu.Lock()
				got[user] = body["token"].(string)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return got
}

// nextUser is a fresh user id.
func (s *stack) nextUser() int64 { return testenv.UniqueUser() }

// status reads a reservation as its user.
func (s *stack) status(user int64, token string) (string, error) {
	code, body, err := call(s.t, "GET", s.api.URL+"/api/v1/reservations/"+token, user, nil)
	if err != nil {
		return "", err
	}
	if code != http.StatusOK {
		return "", fmt.Errorf("GET reservation: %d %v", code, body)
	}
	st, _ := body["status"].(string)
	return st, nil
}

// payWhenPending waits for PENDING_PAYMENT and pays; it reports whether the
// payment was accepted (a short window may pass first: that is allowed).
func (s *stack) payWhenPending(user int64, token string) bool {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		st, err := s.status(user, token)
		if err == nil && st == string(domain.StatusPendingPayment) {
			code, _, err := call(s.t, "POST", s.api.URL+"/api/v1/reservations/"+token+"/payment", user, map[string]any{"payment_ref": "pay-" + token[:8]})
			return err == nil && code == http.StatusOK
		}
		if err == nil && domain.ReservationStatus(st).Terminal() {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

func (s *stack) reconciler() *reconcile.Reconciler {
	r := &reconcile.Reconciler{Store: s.st, Redis: redisgateway.NewClient(s.rdb), Temporal: s.tc, Gap: 300 * time.Millisecond}
	if s.repair {
		r.Start = func(ctx context.Context, in domain.OrderInput) error {
			return temporalgateway.Start(ctx, s.tc, s.queue, in)
		}
		r.Restart = func(ctx context.Context, in domain.OrderInput) error {
			_, err := temporalgateway.Restart(ctx, s.tc, s.queue, in)
			return err
		}
	}
	return r
}

// collect reads the sale's state for the checker.
func (s *stack) collect(ctx context.Context) (State, error) {
	st := State{WindowsPassed: !s.openWindows}
	s.mu.Lock()
	st.ClientTokens = append([]string(nil), s.tokens...)
	s.mu.Unlock()
	rep, err := s.reconciler().Run(ctx, s.saleID, s.repair)
	if err != nil {
		return st, fmt.Errorf("reconcile: %w", err)
	}
	st.Report = rep
	st.Sale, err = finalstate.Read(ctx, finalstate.Sources{DB: s.st.DB.DB, Redis: s.rdb, Temporal: s.tc}, s.saleID)
	return st, err
}

// checkIdle waits until the sale is idle and every invariant holds (each
// payment window passes, workflows finish, visibility catches up), records
// the scenario's summary row, and fails the test with the violations still
// seen when it gives up.
func (s *stack) checkIdle(scenario string, edit ...func(*Row)) State {
	t := s.t
	t.Helper()
	var last State
	var lastV []Violation
	var lastErr error
	ok := assert.EventuallyWithT(t, func(c *assert.CollectT) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		last, lastErr = s.collect(ctx)
		if !assert.NoError(c, lastErr) {
			return
		}
		lastV = Check(last)
		assert.Empty(c, lastV)
	}, 150*time.Second, 500*time.Millisecond)
	if !ok {
		t.Errorf("%s: invariants still broken: err %v\n%v", scenario, lastErr, lastV)
		if lastErr != nil {
			lastV = append(lastV, Violation{Kind: "collect", Detail: lastErr.Error()})
		}
	}
	s.mu.Lock()
	req := s.requests
	s.mu.Unlock()
	row := Summarize(scenario, req, last, lastV)
	for _, e := range edit {
		e(&row)
	}
	rowsMu.Lock()
	rows = append(rows, row)
	rowsMu.Unlock()
	return last
}
