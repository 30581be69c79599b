package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
)

var httpClient = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}

var mint = testenv.MustToken

// call sends a JSON request as user. It never fails the test itself, so
// goroutines may use it: a transport error is logged and answers status 0.
func call(tb testing.TB, method, url string, user int64, body any) (int, map[string]any) {
	tb.Helper()
	code, out, err := testenv.Do(method, url, user, body)
	if err != nil {
		tb.Logf("%v", err)
	}
	return code, out
}

func errCode(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

// stack is an API and a worker on a task queue of their own.
type stack struct {
	api    *testenv.API
	worker *testenv.Worker
	queue  string
}

// MustStack starts the real API and worker processes.
func MustStack(tb testing.TB, name string, overrides map[string]string) *stack {
	tb.Helper()
	return MustStackOn(tb, newQueue(name), overrides)
}

// newQueue names a task queue no other test uses.
func newQueue(name string) string { return fmt.Sprintf("ops-%s-%d", name, time.Now().UnixNano()) }

// MustStackOn starts the real processes on the given task queue.
func MustStackOn(tb testing.TB, queue string, overrides map[string]string) *stack {
	tb.Helper()
	o := map[string]string{
		// Every request of a test comes from 127.0.0.1.
		"SECKILL_PER_ADDR_RPS":   "100000",
		"SECKILL_PER_ADDR_BURST": "100000",
	}
	for k, v := range overrides {
		o[k] = v
	}
	env := testenv.ProcEnv(tb, queue, o)
	s := &stack{queue: queue}
	s.api = testenv.MustAPI(tb, "api", env)
	s.worker = testenv.MustWorker(tb, "worker", env)
	return s
}

// MustLiveSale creates a live sale through the admin API and warms it.
func (s *stack) MustLiveSale(tb testing.TB, stock int64, paymentWindow int, endsIn time.Duration) int64 {
	tb.Helper()
	adminToken := testenv.MustToken(tb, testenv.AdminUser)
	now := time.Now().UTC()
	code, sale, err := testenv.DoWithToken("POST", s.api.URL+"/admin/v1/sales", adminToken, map[string]any{
		"goods_id": 1, "title": tb.Name(), "price_cents": 500, "stock": stock, "buckets": 4,
		"starts_at": now.Add(-time.Minute).Format(time.RFC3339), "ends_at": now.Add(endsIn).Format(time.RFC3339),
		"payment_window_seconds": paymentWindow,
	})
	require.NoError(tb, err)
	require.Equal(tb, http.StatusCreated, code, "%v", sale)
	id := int64(sale["sale_id"].(float64))
	MustCleanWorkflows(tb, id)
	code, body, err := testenv.DoWithToken("POST", fmt.Sprintf("%s/admin/v1/sales/%d/warmup", s.api.URL, id), adminToken, nil)
	require.NoError(tb, err)
	// The sale workflow may have warmed it first and taken... nothing yet:
	// warm-up is repeatable until the first reservation.
	require.Equal(tb, http.StatusOK, code, "%v", body)
	return id
}

func (s *stack) reserve(tb testing.TB, saleID, user int64, requestID string) (int, map[string]any) {
	tb.Helper()
	return call(tb, "POST", fmt.Sprintf("%s/api/v1/sales/%d/reservations", s.api.URL, saleID), user, map[string]any{"request_id": requestID})
}

// MustPending reserves for a new user and waits for PENDING_PAYMENT.
func (s *stack) MustPending(tb testing.TB, saleID int64) (user int64, token string) {
	tb.Helper()
	user = testenv.UniqueUser()
	code, body := s.reserve(tb, saleID, user, fmt.Sprintf("ops-%d", user))
	require.Equal(tb, http.StatusAccepted, code, "%v", body)
	token = body["token"].(string)
	s.waitStatus(tb, user, token, "PENDING_PAYMENT")
	// The worker may start the order before its relay reads the inbox (at
	// its first look, it starts recent holds itself); the relay then
	// starts the token's workflow too, which is a new run if a test has
	// terminated the first. Pending means the relay handed the entry on.
	rdb := redisgateway.NewClient(testenv.MustRedis(tb))
	require.EventuallyWithT(tb, func(c *assert.CollectT) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		g, err := rdb.InboxGroupState(ctx, saleID)
		if assert.NoError(c, err) {
			assert.Zero(c, g.Pending, "entries delivered, not acknowledged")
			assert.Zero(c, g.Lag, "entries not delivered")
		}
	}, 60*time.Second, 100*time.Millisecond, "the relay hands the inbox's entries on")
	return user, token
}

func (s *stack) waitStatus(tb testing.TB, user int64, token, status string) {
	tb.Helper()
	require.EventuallyWithT(tb, func(c *assert.CollectT) {
		code, body := call(tb, "GET", s.api.URL+"/api/v1/reservations/"+token, user, nil)
		assert.Equal(c, http.StatusOK, code)
		assert.Equal(c, status, body["status"])
	}, 120*time.Second, 250*time.Millisecond)
}

// MustCleanWorkflows terminates, at the end of the test, the sale's
// workflows still running (its sale workflow would otherwise wake every
// minute until ends_at on a queue nobody polls any more), so the shared dev
// server does not pile them up.
func MustCleanWorkflows(tb testing.TB, saleID int64) {
	tb.Helper()
	tc := testenv.MustTemporal(tb)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		ids := []string{domain.SaleWorkflowID(saleID)}
		var next []byte
		for {
			resp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
				Query:         fmt.Sprintf("%s = %d AND ExecutionStatus = 'Running'", domain.SearchAttrSaleID, saleID),
				NextPageToken: next,
			})
			if err != nil {
				tb.Logf("clean up workflows of sale %d: %v", saleID, err)
				break
			}
			for _, e := range resp.GetExecutions() {
				ids = append(ids, e.GetExecution().GetWorkflowId())
			}
			if next = resp.GetNextPageToken(); len(next) == 0 {
				break
			}
		}
		for _, id := range ids {
			var nf *serviceerror.NotFound
			if err := tc.TerminateWorkflow(ctx, id, "", "test over"); err != nil && !errors.As(err, &nf) {
				tb.Logf("terminate %s: %v", id, err)
			}
		}
	})
}

// reconciliation calls the admin endpoint.
func (s *stack) reconciliation(tb testing.TB, saleID int64, repair bool) report {
	tb.Helper()
	url := fmt.Sprintf("%s/admin/v1/sales/%d/reconciliation", s.api.URL, saleID)
	if repair {
		url += "?repair=true"
	}
	req, err := http.NewRequest("GET", url, nil)
	require.NoError(tb, err)
	req.Header.Set("Authorization", "Bearer "+mint(tb, -1))
	resp, err := httpClient.Do(req)
	require.NoError(tb, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(tb, err)
	require.Equal(tb, http.StatusOK, resp.StatusCode, "%s", raw)
	var rep report
	require.NoError(tb, json.Unmarshal(raw, &rep), "%s", raw)
	rep.raw = string(raw)
	return rep
}

type report struct {
	SaleID        int64            `json:"sale_id"`
	StockTotal    int64            `json:"stock_total"`
	RedisStock    int64            `json:"redis_stock"`
	DBStock       int64            `json:"db_stock"`
	Orders        map[string]int64 `json:"orders"`
	InFlight      int64            `json:"in_flight"`
	Consistent    bool             `json:"consistent"`
	Discrepancies []struct {
		UserID   int64  `json:"user_id"`
		Token    string `json:"token"`
		Kind     string `json:"kind"`
		Detail   string `json:"detail"`
		Repaired bool   `json:"repaired"`
	} `json:"discrepancies"`
	raw string
}

// MustTemporalBin is the Temporal CLI the runbook documents: the one
// scripts/test.sh names in SECKILL_TEMPORAL_BIN, else the repository's
// .data/bin/temporal.
func MustTemporalBin(tb testing.TB) string {
	tb.Helper()
	bin := os.Getenv("SECKILL_TEMPORAL_BIN")
	if bin == "" {
		bin = filepath.Join(testenv.RepoRoot(), ".data", "bin", "temporal")
	}
	st, err := os.Stat(bin)
	require.NoError(tb, err, "the Temporal CLI is missing (go tool task temporal:build builds it)")
	require.False(tb, st.IsDir(), bin)
	return bin
}

// runbookCommands are the runbook's tested commands: each fenced block that
// follows a `<!-- cmd: name -->` line.
func runbookCommands(tb testing.TB) map[string]string {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "runbook.md"))
	require.NoError(tb, err)
	re := regexp.MustCompile("(?m)^<!-- cmd: ([a-z-]+) -->\\n```sh\\n((?s:.*?))```")
	out := map[string]string{}
	for _, m := range re.FindAllStringSubmatch(string(raw), -1) {
		require.NotContains(tb, out, m[1], "runbook command %s twice", m[1])
		out[m[1]] = strings.TrimSpace(m[2])
	}
	return out
}

// runbook runs the runbook's commands with bash, as an operator would: the
// `temporal` on PATH is the CLI pointed at the test server, the variables
// are the operator's.
type runbook struct {
	tb   testing.TB
	cmds map[string]string
	env  []string
	used map[string]bool
}

func MustRunbook(tb testing.TB, apiURL string) *runbook {
	tb.Helper()
	dir := tb.TempDir()
	wrapper := fmt.Sprintf("#!/bin/sh\nexec %q \"$@\" --address %q\n", MustTemporalBin(tb), testenv.TemporalAddress())
	require.NoError(tb, os.WriteFile(filepath.Join(dir, "temporal"), []byte(wrapper), 0o755))
	// mysql: the client on the test database, which the runbook calls seckill.
	cfg, err := mysql.ParseDSN(testenv.MySQLDSN())
	require.NoError(tb, err)
	client, err := exec.LookPath("mysql")
	require.NoError(tb, err, "the mysql client is missing")
	host, port, err := net.SplitHostPort(cfg.Addr)
	require.NoError(tb, err)
	wrapper = fmt.Sprintf("#!/bin/sh\nfor a; do shift; [ \"$a\" = seckill ] && a=%q; set -- \"$@\" \"$a\"; done\n"+
		"exec %q --protocol=tcp -h %q -P %q -u %q \"$@\"\n", cfg.DBName, client, host, port, cfg.User)
	require.NoError(tb, os.WriteFile(filepath.Join(dir, "mysql"), []byte(wrapper), 0o755))
	rb := &runbook{tb: tb, cmds: runbookCommands(tb), used: map[string]bool{}}
	rb.env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"API="+apiURL, "ADMIN_JWT="+mint(tb, -1), "TEMPORAL_ADDRESS="+testenv.TemporalAddress())
	return rb
}

// run runs the named command with vars and returns its output; it fails the
// test when the command fails.
func (rb *runbook) run(name string, vars map[string]string) string {
	rb.tb.Helper()
	out, err := rb.try(name, vars)
	require.NoError(rb.tb, err, "runbook command %s:\n%s", name, out)
	return out
}

func (rb *runbook) try(name string, vars map[string]string) (string, error) {
	rb.tb.Helper()
	script, ok := rb.cmds[name]
	require.True(rb.tb, ok, "docs/runbook.md has no command %q", name)
	rb.used[name] = true
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euc", script)
	cmd.Env = append([]string{}, rb.env...)
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// waitHoldsTakeUnits waits until the API's seckill_holds_take_units gauge
// says want: whether it records holds with their unit (no worker of an
// older release runs).
func (s *stack) waitHoldsTakeUnits(tb testing.TB, want bool) {
	tb.Helper()
	line := "seckill_holds_take_units 0"
	if want {
		line = "seckill_holds_take_units 1"
	}
	require.EventuallyWithT(tb, func(c *assert.CollectT) {
		resp, err := http.Get(s.api.URL + "/metrics")
		if !assert.NoError(c, err) {
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		assert.NoError(c, err)
		assert.Contains(c, string(b), line)
	}, 30*time.Second, 100*time.Millisecond)
}
