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

	"github.com/seckill/seckill/internal/testenv"
)

// The runbook's commands, run as written against the real API, worker and
// Temporal server.
func TestRunbookCommands(t *testing.T) {
	s := MustStack(t, "runbook", nil)
	rb := MustRunbook(t, s.api.URL)
	saleID := s.MustLiveSale(t, 5, 600, time.Hour)
	sid := fmt.Sprint(saleID)
	u1, t1 := s.MustPending(t, saleID)
	u2, t2 := s.MustPending(t, saleID)
	_, t3 := s.MustPending(t, saleID)
	vars := func(user int64, token string) map[string]string {
		return map[string]string{"SALE_ID": sid, "USER_ID": fmt.Sprint(user), "TOKEN": token}
	}
	v1 := vars(u1, t1)

	// Finding orders: the search attributes reach visibility shortly after
	// each upsert.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		out, err := rb.try("list-pending", v1)
		assert.NoError(c, err, out)
		for _, tok := range []string{t1, t2, t3} {
			assert.Contains(c, out, "order:"+tok)
		}
	}, 60*time.Second, 500*time.Millisecond)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		out, err := rb.try("count-pending", v1)
		assert.NoError(c, err, out)
		assert.Contains(c, out, "Total: 3")
	}, 30*time.Second, 500*time.Millisecond)
	// A terminated workflow is no longer counted as pending (its
	// OrderStatus stays PENDING_PAYMENT); the repair gives it a new run,
	// counted again.
	rb.run("terminate", vars(0, t3))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		out, err := rb.try("count-pending", v1)
		assert.NoError(c, err, out)
		assert.Contains(c, out, "Total: 2")
		out, err = rb.try("list-pending", v1)
		assert.NoError(c, err, out)
		assert.NotContains(c, out, "order:"+t3)
	}, 30*time.Second, 500*time.Millisecond)
	out := rb.run("reconcile-repair", v1)
	require.NotContains(t, out, `"repaired":false`, out)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		out, err := rb.try("count-pending", v1)
		assert.NoError(c, err, out)
		assert.Contains(c, out, "Total: 3")
	}, 30*time.Second, 500*time.Millisecond)

	// The fleet's view of Redis: this stack's API and worker, both up.
	out = rb.run("fleet-view", v1)
	require.Regexp(t, `(?m)^api/\S+\s+api\s+1\s`, out)
	require.Regexp(t, `(?m)^worker/\S+\s+worker\s+1\s`, out)

	out = rb.run("list-sale", v1)
	for _, tok := range []string{t1, t2, t3} {
		require.Contains(t, out, "order:"+tok)
	}
	out = rb.run("list-user", v1)
	require.Contains(t, out, "order:"+t1)
	require.NotContains(t, out, "order:"+t2)
	out = rb.run("describe", v1)
	require.Contains(t, out, "order:"+t1)
	require.Contains(t, out, "PENDING_PAYMENT") // the OrderStatus search attribute
	out = rb.run("show", v1)
	require.Contains(t, out, "WorkflowExecutionStarted")

	// Operator cancel: CANCELLED, and the unit is back at once (the user
	// may reserve again).
	out = rb.run("cancel", v1)
	require.Contains(t, out, "CANCELLED")
	s.waitStatus(t, u1, t1, "CANCELLED")
	// Repeated once the workflow completed: exit 1, as the runbook says,
	// and nothing changes.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		out, err := rb.try("cancel", v1)
		assert.Error(c, err, out)
		assert.Contains(c, out, "workflow execution already completed")
	}, 30*time.Second, 500*time.Millisecond)
	s.waitStatus(t, u1, t1, "CANCELLED")
	out = rb.run("describe", v1)
	require.Contains(t, out, "CANCELLED")
	code, body := s.reserve(t, saleID, u1, fmt.Sprintf("ops-again-%d", u1))
	require.Equal(t, http.StatusAccepted, code, "%v", body)
	again := body["token"].(string)

	// Operator expiry.
	out = rb.run("expire", vars(u2, t2))
	require.Contains(t, out, "EXPIRED")
	s.waitStatus(t, u2, t2, "EXPIRED")

	// The sale workflow answers its queries.
	out = rb.run("query-phase", v1)
	require.Contains(t, out, "live")
	rb.run("query-report", v1)

	// Pause answers 403 sale_paused at once; resume restores.
	out = rb.run("pause", v1)
	require.Contains(t, out, `"sale_id":`+sid)
	code, body = s.reserve(t, saleID, testenv.UniqueUser(), "ops-paused-1")
	require.Equal(t, http.StatusForbidden, code)
	require.Equal(t, "sale_paused", errCode(body))
	rb.run("resume", v1)
	u4 := testenv.UniqueUser()
	code, body = s.reserve(t, saleID, u4, "ops-resumed-1")
	require.Equal(t, http.StatusAccepted, code, "%v", body)
	s.waitStatus(t, u1, again, "PENDING_PAYMENT")
	s.waitStatus(t, u4, body["token"].(string), "PENDING_PAYMENT")

	// Cancelling a PAID order: refused, as the runbook says; still PAID.
	code, body = call(t, "POST", s.api.URL+"/api/v1/reservations/"+again+"/payment", u1, map[string]any{"payment_ref": "ops-paid-1"})
	require.Equal(t, http.StatusOK, code, "%v", body)
	out, err := rb.try("cancel", vars(u1, again))
	require.Error(t, err, out)
	require.True(t, strings.Contains(out, "workflow execution already completed") || strings.Contains(out, "not_cancellable"), out)
	s.waitStatus(t, u1, again, "PAID")

	// The report query of a sale not yet reconciled says so.
	now := time.Now().UTC()
	code, future := call(t, "POST", s.api.URL+"/admin/v1/sales", -1, map[string]any{
		"goods_id": 1, "title": "later", "price_cents": 500, "stock": 1, "buckets": 1,
		"starts_at": now.Add(time.Hour).Format(time.RFC3339), "ends_at": now.Add(2 * time.Hour).Format(time.RFC3339),
	})
	require.Equal(t, http.StatusCreated, code, "%v", future)
	futureID := fmt.Sprint(int64(future["sale_id"].(float64)))
	MustCleanWorkflows(t, int64(future["sale_id"].(float64)))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		out, err := rb.try("query-report", map[string]string{"SALE_ID": futureID})
		assert.NoError(c, err, out)
		assert.Contains(c, out, "no reconciliation report yet", out)
		assert.Contains(c, out, `"phase":"waiting"`, out)
	}, 30*time.Second, 500*time.Millisecond)

	// Creating the search attributes, as on a real cluster: they exist on
	// the test server, so this is the repeat, which is harmless.
	out = rb.run("create-search-attributes", v1)
	for _, name := range []string{"SaleId", "UserId", "OrderStatus"} {
		require.Contains(t, out, name)
	}

	// Reconciliation through the documented calls: consistent once the
	// holds are orders; t1 and t2 ended, t3, again and u4's are pending.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		out, err := rb.try("reconcile", v1)
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
	out = rb.run("reconcile-repair", v1)
	require.Contains(t, out, `"consistent":true`)

	// Stock: ten more units, committed and then in Redis; the pending
	// query runs (its rows drain as Redis takes them).
	out = rb.run("stock", v1)
	require.Contains(t, out, `"stock_total":15`, out)
	out = rb.run("stock-pending", v1)
	require.NotContains(t, out, "ERROR", out)
	out = rb.run("stop", v1)
	require.Contains(t, out, `"sale_id":`+sid, out)
	code, body = s.reserve(t, saleID, testenv.UniqueUser(), "ops-stopped-1")
	require.Equal(t, http.StatusForbidden, code, "%v", body)
	require.Equal(t, "sale_ended", errCode(body))

	// Every tested command of the runbook ran here.
	for name := range rb.cmds {
		require.True(t, rb.used[name], "runbook command %s is not tested", name)
	}
	require.Contains(t, rb.cmds, "terminate")
	require.True(t, strings.HasPrefix(rb.cmds["terminate"], "temporal workflow terminate"))
}

// TestRunbookBlocksAreMarked checks that every fenced block of
// docs/runbook.md is a tested command or, marked not run, only sets
// variables: no command reaches an operator untested.
func TestRunbookBlocksAreMarked(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "runbook.md"))
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
