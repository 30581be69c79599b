package ops

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/workflows"
)

// A QUEUED reservation is cancelled with or without a running workflow
// (contract 1.1): the API records CANCELLED and puts the unit back on sale
// before it answers 200; a workflow that runs later adopts the end and
// places no order. While MySQL cannot be reached the answer is 503.
func TestCancelQueuedWithOrWithoutWorkflow(t *testing.T) {
	queue := newQueue("cancel-queued")
	// MySQL through a proxy the test can cut.
	proxy, dsn := testenv.MustMySQLProxy(t)
	// The API starts the workflows itself here (by default it leaves that
	// to the worker's inbox relay, and no worker runs yet).
	env := testenv.ProcEnv(t, queue, map[string]string{"MYSQL_DSN": dsn, "SECKILL_PER_ADDR_RPS": "100000", "SECKILL_PER_ADDR_BURST": "100000",
		"SECKILL_API_STARTS_REDIS_ORDERS": "on"})
	// The API alone: no worker runs any workflow yet.
	s := &stack{queue: queue, api: testenv.MustAPI(t, "api", env)}
	sale := s.MustLiveSale(t, 2, 300, 30*time.Minute)
	st, rdb, tc := testenv.MustStore(t), testenv.MustRedis(t), testenv.MustTemporal(t)
	ctx := testCtx(t, 3*time.Minute)
	redisStock := func() int64 {
		n, err := rdb.Get(ctx, lua.SaleKeys(sale).Stock).Int64()
		require.NoError(t, err)
		return n
	}
	reserve := func(user int64, req string) string {
		code, body := s.reserve(t, sale, user, req)
		require.Equal(t, http.StatusAccepted, code, "%v", body)
		return body["token"].(string)
	}
	cancel := func(user int64, token string) (int, map[string]any) {
		return call(t, "POST", s.api.URL+"/api/v1/reservations/"+token+"/cancel", user, nil)
	}

	// 1. Its workflow was started by the API but no worker has run it.
	u1 := testenv.UniqueUser()
	t1 := reserve(u1, "cancel-q-1")
	require.EqualValues(t, 1, redisStock())
	code, body := cancel(u1, t1)
	require.Equal(t, http.StatusOK, code, "%v", body)
	require.Equal(t, "CANCELLED", body["status"])
	require.EqualValues(t, 2, redisStock(), "the unit is back on sale when the 200 is sent")
	code, body = cancel(u1, t1)
	require.Equal(t, http.StatusOK, code, "cancelling again answers the same: %v", body)
	require.EqualValues(t, 2, redisStock(), "and releases nothing twice")
	t1again := reserve(u1, "cancel-q-1-again") // the user may reserve at once

	// 2. No workflow at all (terminated before it ever ran).
	u2 := testenv.UniqueUser()
	t2 := reserve(u2, "cancel-q-2")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, err := tc.DescribeWorkflow(ctx, domain.OrderWorkflowID(t2), "")
		assert.NoError(c, err)
	}, 10*time.Second, 100*time.Millisecond)
	require.NoError(t, tc.TerminateWorkflow(ctx, domain.OrderWorkflowID(t2), "", "test: no workflow"))
	code, body = cancel(u2, t2)
	require.Equal(t, http.StatusOK, code, "%v", body)
	require.Equal(t, "CANCELLED", body["status"])
	require.EqualValues(t, 1, redisStock(), "t1again holds one unit; t2's is back")
	// The cancel starts the missing workflow (a new run), which will read
	// CANCELLED: every reservation has its workflow.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		desc, err := tc.DescribeWorkflow(ctx, domain.OrderWorkflowID(t2), "")
		if assert.NoError(c, err) {
			assert.Equal(c, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, desc.RawResponse.GetWorkflowExecutionInfo().GetStatus())
		}
	}, 10*time.Second, 100*time.Millisecond)

	// 3. MySQL unreachable: 503, nothing changes; once it answers, 200.
	u3 := testenv.UniqueUser()
	t3 := reserve(u3, "cancel-q-3")
	proxy.SetCut(true)
	code, body = cancel(u3, t3)
	require.Equal(t, http.StatusServiceUnavailable, code, "%v", body)
	require.Equal(t, "unavailable", errCode(body))
	require.EqualValues(t, 0, redisStock(), "nothing released without the database")
	proxy.SetCut(false)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, body := cancel(u3, t3)
		assert.Equal(c, http.StatusOK, code, "%v", body)
	}, 30*time.Second, 500*time.Millisecond)
	require.EqualValues(t, 1, redisStock())

	// The worker starts: the cancelled reservations' workflows adopt the
	// end without an order; the live one is placed.
	testenv.MustWorker(t, "worker", env)
	for _, tok := range []string{t1, t3} {
		var got domain.OrderState
		require.NoError(t, tc.GetWorkflow(ctx, domain.OrderWorkflowID(tok), "").Get(ctx, &got))
		require.Equal(t, domain.StatusCancelled, got.Status, tok)
		require.Empty(t, got.OrderNo, "no order for a reservation cancelled while queued")
	}
	// A workflow started only now (a late inbox delivery) adopts it too.
	_, err := workflows.RestartOrder(ctx, tc, queue, domain.OrderInput{Token: t2, SaleID: sale, UserID: u2, RequestID: "cancel-q-2", Path: domain.PathRedis})
	require.NoError(t, err)
	var got domain.OrderState
	require.NoError(t, tc.GetWorkflow(ctx, domain.OrderWorkflowID(t2), "").Get(ctx, &got))
	require.Equal(t, domain.StatusCancelled, got.Status)
	s.waitStatus(t, u1, t1again, "PENDING_PAYMENT")
	for _, tok := range []string{t1, t2, t3} {
		r, err := st.GetReservation(ctx, tok)
		require.NoError(t, err)
		require.Equal(t, domain.StatusCancelled, r.Status)
		require.Empty(t, r.OrderNo)
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		rep, err := s.tryReconciliation(t, sale)
		if assert.NoError(c, err) {
			assert.True(c, rep.Consistent, rep.raw)
			assert.Empty(c, rep.Discrepancies, rep.raw)
			assert.EqualValues(c, 3, rep.Orders["CANCELLED"], rep.raw)
			assert.EqualValues(c, 1, rep.Orders["PENDING_PAYMENT"], rep.raw)
		}
	}, 60*time.Second, time.Second)
}
