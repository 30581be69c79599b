package ops

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/netproxy"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/store"
)

// prevRelease is the commit of the previous release, which the
// mixed-version test runs beside this code. Move it to the release's
// commit (or tag) at each release.
const prevRelease = "34bce81"

var (
	prevOnce sync.Once
	prevBin  string
	prevErr  error
)

// mustPrevBinary builds cmd/seckill of prevRelease from git once, into the
// test binaries' dir, where later runs find it.
func mustPrevBinary(tb testing.TB) string {
	tb.Helper()
	prevOnce.Do(func() { prevBin, prevErr = buildPrev() })
	if prevErr != nil {
		tb.Fatalf("previous release: %v", prevErr)
	}
	return prevBin
}

func buildPrev() (string, error) {
	name := "seckill-" + prevRelease
	path := filepath.Join(testenv.BinDir(), name)
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	src, err := os.MkdirTemp("", "seckill-prev-")
	if err != nil {
		return "", fmt.Errorf("source dir: %w", err)
	}
	defer os.RemoveAll(src)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	archive := exec.CommandContext(ctx, "sh", "-c", `git archive "$1" | tar -x -C "$2"`, "sh", prevRelease, src)
	archive.Dir = testenv.RepoRoot()
	if out, err := archive.CombinedOutput(); err != nil {
		return "", fmt.Errorf("git archive %s (CI needs the full history): %w\n%s", prevRelease, err, out)
	}
	return testenv.BuildSeckill(ctx, src, name)
}

// nonDeterministic matches the SDK's errors when a worker's code cannot run
// a workflow: it cannot replay its history (TMPRL1100) or does not know its
// type. Its workflow task fails and is retried.
var nonDeterministic = regexp.MustCompile(`TMPRL1100|unable to find workflow type`)

// TestMixedVersionDeploy runs the previous release's API and worker beside
// this code's on one database, Redis and task queue, as a rolling deploy
// does: the old release alone; the new worker and API start (migrating the
// schema under the old processes) while the old worker is stopped, and the
// new worker relays inbox entries the old reserve script wrote and replays
// workflows the old worker started; then both workers and both APIs serve
// together; the old worker is drained last. Every 202 reaches
// PENDING_PAYMENT, payments and cancels through either API settle,
// nothing is oversold and the sale reconciles.
func TestMixedVersionDeploy(t *testing.T) {
	prev := mustPrevBinary(t)
	queue := newQueue("mixed")
	dsn := testenv.MustEmptyDatabase(t) // the old release creates its own schema
	// The old API reaches Temporal through a proxy the test can cut, so
	// that its reservations wait in the inbox for the new worker's relay.
	tproxy, err := netproxy.Start(testenv.TemporalAddress(), 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tproxy.Close() })
	env := testenv.ProcEnv(t, queue, map[string]string{
		"MYSQL_DSN":              dsn,
		"SECKILL_PER_ADDR_RPS":   "100000",
		"SECKILL_PER_ADDR_BURST": "100000",
		"SECKILL_RELAY_MIN_IDLE": "1s",
	})
	with := func(k, v string) map[string]string {
		e := map[string]string{k: v}
		for key, val := range env {
			if key != k {
				e[key] = val
			}
		}
		return e
	}
	ctx := testCtx(t, 3*time.Minute)

	// 1. The previous release alone.
	oldAPI := &stack{queue: queue, api: testenv.MustAPIOf(t, prev, "old-api", with("TEMPORAL_ADDRESS", tproxy.Addr()))}
	oldWorker := testenv.MustWorkerOf(t, prev, "old-worker", env)
	st, err := store.Open(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	// Sale ids far from this package's others and from earlier runs' (this
	// database is new each run; Redis keys are per sale id).
	var maxID int64
	require.NoError(t, testenv.MustStore(t).DB.QueryRowContext(ctx, "SELECT COALESCE(MAX(id), 0) FROM sales").Scan(&maxID))
	_, err = st.DB.ExecContext(ctx, fmt.Sprintf("ALTER TABLE sales AUTO_INCREMENT = %d", maxID+100_000_000+time.Now().UnixMilli()%1_000_000_000))
	require.NoError(t, err)
	const stock = 60
	sale := oldAPI.MustLiveSale(t, stock, 600, 30*time.Minute)
	rdb := testenv.MustRedis(t)

	m := &mixedRun{t: t, ctx: ctx, sale: sale, want: map[string]string{}} // want: token -> final status
	old1 := m.reserveVia(oldAPI, "old", 6)
	for _, r := range old1 {
		oldAPI.waitStatus(t, r.user, r.token, "PENDING_PAYMENT")
	}
	m.pay(oldAPI, old1[0])
	m.cancel(oldAPI, old1[1])
	queued, newAPI, newWorker := m.workersFirst(oldAPI, oldWorker, tproxy, st, rdb, env, queue, old1)
	m.sideBySide(oldAPI, newAPI, oldWorker, newWorker, append(old1[4:6:6], queued[0], queued[1]))

	// 4. The old worker drains last.
	oldWorker.Stop(t)
	failures := len(nonDeterministic.FindAllString(oldWorker.Log(), -1))
	t.Logf("old worker: %d nondeterminism log lines in all", failures)
	for _, r := range m.all {
		status, ok := m.want[r.token]
		if !ok {
			status = "PENDING_PAYMENT"
		}
		newAPI.waitStatus(t, r.user, r.token, status)
	}
	m.checkStock(newAPI, rdb, stock)
	m.buyAgain([]*stack{oldAPI, newAPI})
}

// mixedRun is a mixed-version deploy's sale and what its reservations
// must end as.
type mixedRun struct {
	t    *testing.T
	ctx  context.Context
	sale int64
	all  []res
	want map[string]string // token -> final status
}

func (m *mixedRun) reserveVia(s *stack, via string, n int) []res {
	var out []res
	for range n {
		user := testenv.UniqueUser()
		code, body := s.reserve(m.t, m.sale, user, fmt.Sprintf("mixed-%d", user))
		require.Equal(m.t, http.StatusAccepted, code, "%s: %v", via, body)
		out = append(out, res{user: user, token: body["token"].(string), via: via})
	}
	m.all = append(m.all, out...)
	return out
}

func (m *mixedRun) pay(s *stack, r res) {
	code, body := call(m.t, "POST", s.api.URL+"/api/v1/reservations/"+r.token+"/payment", r.user, map[string]any{"payment_ref": "mixed-" + r.token[:8]})
	require.Equal(m.t, http.StatusOK, code, "pay %s (taken by %s): %v", r.token, r.via, body)
	require.Equal(m.t, "PAID", body["status"])
}

func (m *mixedRun) cancel(s *stack, r res) {
	code, body := call(m.t, "POST", s.api.URL+"/api/v1/reservations/"+r.token+"/cancel", r.user, nil)
	require.Equal(m.t, http.StatusOK, code, "cancel %s (taken by %s): %v", r.token, r.via, body)
	require.Equal(m.t, "CANCELLED", body["status"])
}

// workersFirst: the old worker stops and the new release starts; returns
// the reservations that waited in the inbox and the new API and worker.
func (m *mixedRun) workersFirst(oldAPI *stack, oldWorker *testenv.Worker, tproxy *netproxy.Proxy, st *store.Store, rdb redis.UniversalClient,
	env map[string]string, queue string, old1 []res) ([]res, *stack, *testenv.Worker) {
	// 2. Workers first: the old worker stops; reservations the old API
	// takes while it cannot reach Temporal wait in the inbox, written by
	// the old reserve script (the inbox entry's fields are unchanged since).
	oldWorker.Stop(m.t)
	tproxy.SetCut(true)
	queued := m.reserveVia(oldAPI, "old-inbox", 4)
	tc := testenv.MustTemporal(m.t)
	entries, err := rdb.XRange(m.ctx, redisgateway.SaleKeys(m.sale).Inbox, "-", "+").Result()
	require.NoError(m.t, err)
	fields := map[string][]string{}
	for _, e := range entries {
		tok, _ := e.Values["token"].(string)
		fields[tok] = slices.Sorted(maps.Keys(e.Values))
	}
	for _, r := range queued {
		require.Equal(m.t, []string{"request", "rid", "token", "user"}, fields[r.token], "the old script's entry for %s", r.token)
		_, err := tc.DescribeWorkflow(m.ctx, domain.OrderWorkflowID(r.token), "")
		var nf *serviceerror.NotFound
		require.ErrorAs(m.t, err, &nf, "no workflow yet for %s: only a relay can start it", r.token)
	}
	// The new release starts: its worker migrates the schema under the old
	// API (the previous release already applied every migration), relays
	// the old entries and replays the old workflows.
	newWorker := testenv.MustWorker(m.t, "new-worker", env)
	newAPI := &stack{queue: queue, api: testenv.MustAPI(m.t, "new-api", env)}
	var applied int
	require.NoError(m.t, st.DB.QueryRowContext(m.ctx, "SELECT COUNT(*) FROM schema_migrations WHERE version = '0006_bucket_quota'").Scan(&applied))
	require.Equal(m.t, 1, applied, "the shared database has the current schema")
	for _, r := range queued {
		newAPI.waitStatus(m.t, r.user, r.token, "PENDING_PAYMENT")
	}
	tproxy.SetCut(false)
	// The sale workflow the old API started and the old worker ran answers
	// through the new worker, which replays its history and input.
	require.EventuallyWithT(m.t, func(c *assert.CollectT) {
		v, err := tc.QueryWorkflow(m.ctx, domain.SaleWorkflowID(m.sale), "", domain.QueryReport)
		if !assert.NoError(c, err) {
			return
		}
		var rep map[string]any
		assert.NoError(c, v.Get(&rep))
		assert.EqualValues(c, m.sale, rep["sale_id"], "%v", rep)
	}, 30*time.Second, 500*time.Millisecond)
	// Old workflows, their Redis tokens and payloads, read by new code.
	m.pay(newAPI, old1[2])
	m.cancel(newAPI, old1[3])
	m.want[old1[0].token], m.want[old1[1].token] = "PAID", "CANCELLED"
	m.want[old1[2].token], m.want[old1[3].token] = "PAID", "CANCELLED"
	return queued, newAPI, newWorker
}

// sideBySide: both releases on one queue, both APIs taking traffic; then
// what the old code does with a workflow new code has run; then payments
// and cancels through either API (of these and of earlier reservations).
func (m *mixedRun) sideBySide(oldAPI, newAPI *stack, oldWorker, newWorker *testenv.Worker, earlier []res) {
	t := m.t
	tc := testenv.MustTemporal(t)
	// 3. Both releases side by side on one queue: the old worker is back
	// (a rolling restart that has not reached it), both APIs take traffic.
	oldWorker.Restart(m.t)
	oldWorker.WaitHealthy(m.t)
	// The new API records holds with their unit only while no worker of
	// the old release runs (it could not place their orders): it learns
	// of the returning one from the fleet's views within seconds.
	newAPI.waitHoldsTakeUnits(m.t, false)
	var mixed []res
	for range 4 {
		mixed = append(mixed, m.reserveVia(oldAPI, "old", 3)...)
		mixed = append(mixed, m.reserveVia(newAPI, "new", 3)...)
	}
	for _, r := range mixed {
		newAPI.waitStatus(m.t, r.user, r.token, "PENDING_PAYMENT")
	}
	apis := []*stack{oldAPI, newAPI}

	// 3b. What the old code does with a workflow new code has run.
	var marked res
	if len(newVersionChanges) == 0 && len(newWorkflowTypes) == 0 {
		marked = oldWorkerAloneRunsNewWorkflows(m.t, tc, oldAPI, newWorker, oldWorker, mixed)
	} else {
		marked = oldWorkerBlocksOnNewMarkers(m.t, tc, oldAPI, newWorker, oldWorker, mixed)
	}
	m.want[marked.token] = "PAID"
	for i, r := range append(mixed, earlier...) {
		if r.token == marked.token {
			continue
		}
		s := apis[i%2] // the other API half the time
		switch i % 3 {
		case 0:
			m.pay(s, r)
			m.want[r.token] = "PAID"
		case 1:
			m.cancel(s, r)
			m.want[r.token] = "CANCELLED"
		}
	}
}

// checkStock: Redis, MySQL and reconciliation agree on the units on sale.
func (m *mixedRun) checkStock(newAPI *stack, rdb redis.UniversalClient, stock int64) {
	ctx := m.ctx
	var held, paid int64
	for _, s := range m.want {
		if s == "PAID" {
			paid++
		}
	}
	held = int64(len(m.all)) - int64(len(m.want))
	require.EventuallyWithT(m.t, func(c *assert.CollectT) {
		left, err := rdb.Get(ctx, redisgateway.SaleKeys(m.sale).Stock).Int64()
		assert.NoError(c, err)
		assert.Equal(c, int64(stock)-held-paid, left, "Redis: units on sale")
		rep := newAPI.reconciliation(m.t, m.sale, false)
		assert.True(c, rep.Consistent, "%s", rep.raw)
		assert.Empty(c, rep.Discrepancies, "%s", rep.raw)
		assert.Equal(c, int64(stock)-held-paid, rep.DBStock, "MySQL: units on sale")
		assert.Equal(c, paid, rep.Orders["PAID"], "%s", rep.raw)
	}, 60*time.Second, 500*time.Millisecond)
}

// buyAgain: cancelled buyers may buy again, through either release.
func (m *mixedRun) buyAgain(apis []*stack) {
	again := 0
	for _, r := range m.all {
		if m.want[r.token] != "CANCELLED" || again == len(apis) {
			continue
		}
		code, body := apis[again].reserve(m.t, m.sale, r.user, fmt.Sprintf("mixed-again-%d", r.user))
		require.Equal(m.t, http.StatusAccepted, code, "%v", body)
		again++
	}
	require.Equal(m.t, len(apis), again)
}

// res is one reservation of the mixed-version run.
type res struct {
	user  int64
	token string
	via   string // the API that took it
}

// newVersionChanges are the workflow.GetVersion change ids the order
// workflow records on every order since prevRelease (an old worker cannot
// run a workflow that recorded one).
var newVersionChanges = []string{"order-steps-folded"}

// newWorkflowTypes are the order workflow types added since prevRelease
// (an old worker cannot run a workflow of one).
var newWorkflowTypes = []string{domain.OrderWorkflowName}

// oldWorkerBlocksOnNewMarkers: with a new worker up, sticky queues keep a
// workflow on it. With none up (all new workers restarting), the old worker
// takes the task, cannot run a new type or replay a new version marker's
// branch, and fails the workflow task (panic policy BlockWorkflow: the
// workflow stays Running, unchanged); Temporal retries it until a new
// worker takes it.
func oldWorkerBlocksOnNewMarkers(t *testing.T, tc client.Client, oldAPI *stack, newWorker, oldWorker *testenv.Worker, mixed []res) res {
	ctx := testCtx(t, 3*time.Minute)
	var marked res
	for _, r := range mixed {
		if needsNewCode(t, tc, r.token) {
			marked = r
			break
		}
	}
	require.NotEmpty(t, marked.token, "some workflow of the mix ran on the new worker")
	newWorker.Stop(t)
	payMarked := func() (int, map[string]any, error) {
		return testenv.Do("POST", oldAPI.api.URL+"/api/v1/reservations/"+marked.token+"/payment", marked.user, map[string]any{"payment_ref": "mixed-" + marked.token[:8]})
	}
	before := len(nonDeterministic.FindAllString(oldWorker.Log(), -1))
	t.Logf("both workers up: the old worker failed %d workflow tasks (sticky queues keep a workflow on the worker that runs it)", before)
	firstPay := make(chan int, 1)
	go func() { // waits out the API's update timeout: only the old worker polls
		code, _, _ := payMarked()
		firstPay <- code
	}()
	var attempts int32
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Regexp(c, nonDeterministic, oldWorker.Log())
		d, err := tc.DescribeWorkflow(ctx, domain.OrderWorkflowID(marked.token), "")
		if !assert.NoError(c, err) {
			return
		}
		assert.Equal(c, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, d.RawResponse.GetWorkflowExecutionInfo().GetStatus())
		attempts = d.RawResponse.GetPendingWorkflowTask().GetAttempt()
		assert.Greater(c, attempts, int32(1), "a failed workflow task, retried")
	}, 30*time.Second, 250*time.Millisecond)
	t.Logf("new-version workflow on the old worker alone: blocked, workflow task attempt %d, still Running", attempts)
	restarted := time.Now()
	newWorker.Restart(t)
	newWorker.WaitHealthy(t)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, body, err := payMarked()
		assert.NoError(c, err)
		assert.Equal(c, http.StatusOK, code, "%v", body)
		assert.Equal(c, "PAID", body["status"])
	}, 60*time.Second, time.Second, "the new worker takes the retried task; the same payment_ref pays")
	t.Logf("paid through the new worker %s after its restart; the payment sent while only the old worker polled answered %d", time.Since(restarted).Round(time.Millisecond), <-firstPay)
	return marked
}

// oldWorkerAloneRunsNewWorkflows: the new release added no version marker,
// so with every new worker down the old worker alone carries a workflow the
// new worker ran, and pays it, with no non-determinism.
func oldWorkerAloneRunsNewWorkflows(t *testing.T, tc client.Client, oldAPI *stack, newWorker, oldWorker *testenv.Worker, mixed []res) res {
	before := len(nonDeterministic.FindAllString(oldWorker.Log(), -1))
	newWorker.Stop(t)
	r := mixed[len(mixed)-1] // taken by the new API, placed while both workers ran
	code, body, err := testenv.Do("POST", oldAPI.api.URL+"/api/v1/reservations/"+r.token+"/payment", r.user, map[string]any{"payment_ref": "mixed-" + r.token[:8]})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code, "%v", body)
	require.Equal(t, "PAID", body["status"])
	require.Len(t, nonDeterministic.FindAllString(oldWorker.Log(), -1), before, "the old worker replayed the new release's workflows")
	newWorker.Restart(t)
	newWorker.WaitHealthy(t)
	return r
}

// needsNewCode tells whether the token's order workflow is of a type the
// previous release does not have, or recorded the GetVersion marker of a
// change it does not have.
func needsNewCode(tb testing.TB, tc client.Client, token string) bool {
	tb.Helper()
	it := tc.GetWorkflowHistory(testCtx(tb, 30*time.Second), domain.OrderWorkflowID(token), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		require.NoError(tb, err)
		if st := e.GetWorkflowExecutionStartedEventAttributes(); st != nil && slices.Contains(newWorkflowTypes, st.GetWorkflowType().GetName()) {
			return true
		}
		if m := e.GetMarkerRecordedEventAttributes(); m != nil && m.GetMarkerName() == "Version" {
			for _, c := range newVersionChanges {
				if strings.Contains(e.String(), c) {
					return true
				}
			}
		}
	}
	return false
}
