package ops

import (
	"encoding/json"
	"fmt"
	"net/http"
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
	out := rb.run("list-sale", v1)
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
		assert.EqualValues(c, 3, rep.Orders["PENDING_PAYMENT"], out)
		assert.EqualValues(c, 1, rep.Orders["CANCELLED"], out)
		assert.EqualValues(c, 1, rep.Orders["EXPIRED"], out)
		assert.EqualValues(c, 2, rep.RedisStock, out)
		assert.EqualValues(c, 2, rep.DBStock, out)
	}, 60*time.Second, time.Second)
	out = rb.run("reconcile-repair", v1)
	require.Contains(t, out, `"consistent":true`)

	// Every tested command of the runbook ran here, but terminate, which
	// TestLeakedHoldAndDroppedReleaseAreRepaired runs.
	for name := range rb.cmds {
		if name != "terminate" {
			require.True(t, rb.used[name], "runbook command %s is not tested", name)
		}
	}
	require.Contains(t, rb.cmds, "terminate")
	require.True(t, strings.HasPrefix(rb.cmds["terminate"], "temporal workflow terminate"))
}
