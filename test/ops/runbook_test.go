package ops

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testkit/testenv"
)

// The runbook's commands, run as written against the real API, worker and
// Temporal server.
func TestRunbookCommands(t *testing.T) {
	s := MustStack(t, "runbook", nil)
	r := &runbookRun{t: t, s: s, rb: MustRunbook(t, s.api.URL)}
	r.saleID = s.MustLiveSale(t, 5, 600, time.Hour)
	r.sid = fmt.Sprint(r.saleID)
	u1, t1 := s.MustPending(t, r.saleID)
	u2, t2 := s.MustPending(t, r.saleID)
	_, t3 := s.MustPending(t, r.saleID)
	r.v1 = r.vars(u1, t1)
	r.findOrders(t1, t2, t3)
	r.inspect(t1, t2, t3)
	again := r.cancelByOperator(u1, t1)
	r.expireAndPause(u1, u2, t2, again)
	r.paidNotCancellable(u1, again)
	r.futureReportAndAttributes()
	r.reconcileAndStop()
	// Every tested command of the runbook ran here.
	for name := range r.rb.cmds {
		require.True(t, r.rb.used[name], "runbook command %s is not tested", name)
	}
	require.Contains(t, r.rb.cmds, "terminate")
	require.True(t, strings.HasPrefix(r.rb.cmds["terminate"], "temporal workflow terminate"))
}

// runbookRun runs the runbook's commands against one stack and sale.
type runbookRun struct {
	t      *testing.T
	s      *stack
	rb     *runbook
	saleID int64
	sid    string
	v1     map[string]string
}

func (r *runbookRun) vars(user int64, token string) map[string]string {
	return map[string]string{"SALE_ID": r.sid, "USER_ID": fmt.Sprint(user), "TOKEN": token}
}

// findOrders: the listing and counting commands, a terminated workflow
// and its repair.
func (r *runbookRun) findOrders(t1, t2, t3 string) {
	// Finding orders: the search attributes reach visibility shortly after
	// each upsert.
	require.EventuallyWithT(r.t, func(c *assert.CollectT) {
		out, err := r.rb.try("list-pending", r.v1)
		assert.NoError(c, err, out)
		for _, tok := range []string{t1, t2, t3} {
			assert.Contains(c, out, "order:"+tok)
		}
	}, 60*time.Second, 500*time.Millisecond)
	require.EventuallyWithT(r.t, func(c *assert.CollectT) {
		out, err := r.rb.try("count-pending", r.v1)
		assert.NoError(c, err, out)
		assert.Contains(c, out, "Total: 3")
	}, 30*time.Second, 500*time.Millisecond)
	// A terminated workflow is no longer counted as pending (its
	// OrderStatus stays PENDING_PAYMENT); the repair gives it a new run,
	// counted again.
	r.rb.run("terminate", r.vars(0, t3))
	require.EventuallyWithT(r.t, func(c *assert.CollectT) {
		out, err := r.rb.try("count-pending", r.v1)
		assert.NoError(c, err, out)
		assert.Contains(c, out, "Total: 2")
		out, err = r.rb.try("list-pending", r.v1)
		assert.NoError(c, err, out)
		assert.NotContains(c, out, "order:"+t3)
	}, 30*time.Second, 500*time.Millisecond)
	out := r.rb.run("reconcile-repair", r.v1)
	require.NotContains(r.t, out, `"repaired":false`, out)
	require.EventuallyWithT(r.t, func(c *assert.CollectT) {
		out, err := r.rb.try("count-pending", r.v1)
		assert.NoError(c, err, out)
		assert.Contains(c, out, "Total: 3")
	}, 30*time.Second, 500*time.Millisecond)
}

// inspect: the fleet view, the listings and one order's description.
func (r *runbookRun) inspect(t1, t2, t3 string) {
	// The fleet's view of Redis: this stack's API and worker, both up.
	out := r.rb.run("fleet-view", r.v1)
	require.Regexp(r.t, `(?m)^api/\S+\s+api\s+1\s`, out)
	require.Regexp(r.t, `(?m)^worker/\S+\s+worker\s+1\s`, out)

	out = r.rb.run("list-sale", r.v1)
	for _, tok := range []string{t1, t2, t3} {
		require.Contains(r.t, out, "order:"+tok)
	}
	out = r.rb.run("list-user", r.v1)
	require.Contains(r.t, out, "order:"+t1)
	require.NotContains(r.t, out, "order:"+t2)
	out = r.rb.run("describe", r.v1)
	require.Contains(r.t, out, "order:"+t1)
	require.Contains(r.t, out, "OrderWorkflow")
	require.Contains(r.t, out, "SaleId") // the search attributes the start set
	out = r.rb.run("show", r.v1)
	require.Contains(r.t, out, "WorkflowExecutionStarted")
}

// cancelByOperator cancels u1's order, checks the repeat is refused, and
// returns the token of u1's reservation made again.
func (r *runbookRun) cancelByOperator(u1 int64, t1 string) string {
	// Operator cancel: CANCELLED, and the unit is back at once (the user
	// may reserve again).
	out := r.rb.run("cancel", r.v1)
	require.Contains(r.t, out, "CANCELLED")
	r.s.waitStatus(r.t, u1, t1, "CANCELLED")
	// Repeated once the workflow completed: exit 1, as the runbook says,
	// and nothing changes.
	require.EventuallyWithT(r.t, func(c *assert.CollectT) {
		out, err := r.rb.try("cancel", r.v1)
		assert.Error(c, err, out)
		assert.Contains(c, out, "workflow execution already completed")
	}, 30*time.Second, 500*time.Millisecond)
	r.s.waitStatus(r.t, u1, t1, "CANCELLED")
	out = r.rb.run("describe", r.v1)
	require.Contains(r.t, out, "CANCELLED")
	code, body := r.s.reserve(r.t, r.saleID, u1, fmt.Sprintf("ops-again-%d", u1))
	require.Equal(r.t, http.StatusAccepted, code, "%v", body)
	again := body["token"].(string)
	return again
}

// expireAndPause: operator expiry, the sale workflow's queries, pause and
// resume.
func (r *runbookRun) expireAndPause(u1, u2 int64, t2, again string) {
	// Operator expiry.
	out := r.rb.run("expire", r.vars(u2, t2))
	require.Contains(r.t, out, "EXPIRED")
	r.s.waitStatus(r.t, u2, t2, "EXPIRED")

	// The sale workflow answers its queries.
	out = r.rb.run("query-phase", r.v1)
	require.Contains(r.t, out, "live")
	r.rb.run("query-report", r.v1)

	// Pause answers 403 sale_paused at once; resume restores.
	out = r.rb.run("pause", r.v1)
	require.Contains(r.t, out, `"sale_id":`+r.sid)
	code, body := r.s.reserve(r.t, r.saleID, testenv.UniqueUser(), "ops-paused-1")
	require.Equal(r.t, http.StatusForbidden, code)
	require.Equal(r.t, "sale_paused", errCode(body))
	r.rb.run("resume", r.v1)
	u4 := testenv.UniqueUser()
	code, body = r.s.reserve(r.t, r.saleID, u4, "ops-resumed-1")
	require.Equal(r.t, http.StatusAccepted, code, "%v", body)
	r.s.waitStatus(r.t, u1, again, "PENDING_PAYMENT")
	r.s.waitStatus(r.t, u4, body["token"].(string), "PENDING_PAYMENT")
}

// paidNotCancellable: cancelling a PAID order is refused, as the runbook
// says; it stays PAID.
func (r *runbookRun) paidNotCancellable(u1 int64, again string) {
	code, body := call(r.t, "POST", r.s.api.URL+"/api/v1/reservations/"+again+"/payment", u1, map[string]any{"payment_ref": "ops-paid-1"})
	require.Equal(r.t, http.StatusOK, code, "%v", body)
	out, err := r.rb.try("cancel", r.vars(u1, again))
	require.Error(r.t, err, out)
	require.True(r.t, strings.Contains(out, "workflow execution already completed") || strings.Contains(out, "not_cancellable"), out)
	r.s.waitStatus(r.t, u1, again, "PAID")
}

// futureReportAndAttributes: a sale not yet reconciled says so; creating
// the search attributes again is harmless.
func (r *runbookRun) futureReportAndAttributes() {
	// The report query of a sale not yet reconciled says so.
	now := time.Now().UTC()
	code, future := call(r.t, "POST", r.s.api.URL+"/admin/v1/sales", -1, map[string]any{
		"goods_id": 1, "title": "later", "price_cents": 500, "stock": 1, "buckets": 1,
		"starts_at": now.Add(time.Hour).Format(time.RFC3339), "ends_at": now.Add(2 * time.Hour).Format(time.RFC3339),
	})
	require.Equal(r.t, http.StatusCreated, code, "%v", future)
	futureID := fmt.Sprint(int64(future["sale_id"].(float64)))
	MustCleanWorkflows(r.t, int64(future["sale_id"].(float64)))
	require.EventuallyWithT(r.t, func(c *assert.CollectT) {
		out, err := r.rb.try("query-report", map[string]string{"SALE_ID": futureID})
		assert.NoError(c, err, out)
		assert.Contains(c, out, "no reconciliation report yet", out)
		assert.Contains(c, out, `"phase":"waiting"`, out)
	}, 30*time.Second, 500*time.Millisecond)

	// Creating the search attributes, as on a real cluster: they exist on
	// the test server, so this is the repeat, which is harmless.
	out := r.rb.run("create-search-attributes", r.v1)
	for _, name := range []string{"SaleId", "UserId", "OrderStatus"} {
		require.Contains(r.t, out, name)
	}
}

// reconcileAndStop: reconciliation through the documented calls, more
// stock, and the stop.
func (r *runbookRun) reconcileAndStop() {
	// Reconciliation through the documented calls: consistent once the
	// holds are orders; t1 and t2 ended, t3, again and u4's are pending.
	require.EventuallyWithT(r.t, func(c *assert.CollectT) {
		out, err := r.rb.try("reconcile", r.v1)
		if !assert.NoError(c, err, out) {
			return
		}
		var rep report
		if !assert.NoError(c, json.Unmarshal([]byte(out), &rep), out) {
			return
		}
		assert.True(c, rep.Consistent, out)
		assert.Empty(c, rep.Discrepancies, out)
		assert.EqualValues(c, 2, rep.Orders["PENDING_PAYMENT"], out)
		assert.EqualValues(c, 1, rep.Orders["PAID"], out)
		assert.EqualValues(c, 1, rep.Orders["CANCELLED"], out)
		assert.EqualValues(c, 1, rep.Orders["EXPIRED"], out)
		assert.EqualValues(c, 2, rep.RedisStock, out)
		assert.EqualValues(c, 2, rep.DBStock, out)
	}, 60*time.Second, time.Second)
	out := r.rb.run("reconcile-repair", r.v1)
	require.Contains(r.t, out, `"consistent":true`)

	// Stock: ten more units, committed and then in Redis; the pending
	// query runs (its rows drain as Redis takes them).
	out = r.rb.run("stock", r.v1)
	require.Contains(r.t, out, `"stock_total":15`, out)
	out = r.rb.run("stock-pending", r.v1)
	require.NotContains(r.t, out, "ERROR", out)
	out = r.rb.run("stop", r.v1)
	require.Contains(r.t, out, `"sale_id":`+r.sid, out)
	code, body := r.s.reserve(r.t, r.saleID, testenv.UniqueUser(), "ops-stopped-1")
	require.Equal(r.t, http.StatusForbidden, code, "%v", body)
	require.Equal(r.t, "sale_ended", errCode(body))
}

// TestRunbookBlocksAreMarked checks that every fenced block of
// docs/runbook.md is a tested command or, marked not run, only sets
// variables: no command reaches an operator untested.
func TestRunbookBlocksAreMarked(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "runbook.md"))
	require.NoError(t, err)
	block := regexp.MustCompile("(?m)^(.*)\n```[a-z]*\n((?s:.*?))^```")
	marked := regexp.MustCompile(`^<!-- (cmd: [a-z-]+|not run: [^>]+) -->$`)
	n := 0
	for _, m := range block.FindAllStringSubmatch(string(raw), -1) {
		n++
		require.Regexp(t, marked, m[1], "a runbook block is not marked:\n%s", m[2])
		if strings.HasPrefix(m[1], "<!-- not run:") {
			for _, line := range strings.Split(strings.TrimSpace(m[2]), "\n") {
				require.True(t, strings.HasPrefix(line, "export "), "a block marked not run does more than set variables: %s", line)
			}
		}
	}
	require.Equal(t, strings.Count(string(raw), "\n```")/2, n, "a runbook block was not found by the check")
}
