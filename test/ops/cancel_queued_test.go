package ops

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/netproxy"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/store"
	"github.com/seckill/seckill/temporalgateway"
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
	st, tc := testenv.MustStore(t), testenv.MustTemporal(t)
	q := &queuedCancels{t: t, s: s, sale: sale, rdb: testenv.MustRedis(t), ctx: testCtx(t, 3*time.Minute)}
	t1, t1again := q.withoutWorker()
	u2, t2 := q.withoutWorkflow(tc)
	t3 := q.whileMySQLIsCut(proxy)
	q.workerAdopts(env, st, tc, queue, []string{t1, t2, t3}, u2, t1again)
}

// queuedCancels cancel a sale's reservations before any worker ran them.
type queuedCancels struct {
	t    *testing.T
	s    *stack
	sale int64
	rdb  redis.UniversalClient
	ctx  context.Context
	u1   int64
}

func (q *queuedCancels) redisStock() int64 {
	n, err := q.rdb.Get(q.ctx, redisgateway.SaleKeys(q.sale).Stock).Int64()
	require.NoError(q.t, err)
	return n
}

func (q *queuedCancels) reserve(user int64, req string) string {
	code, body := q.s.reserve(q.t, q.sale, user, req)
	require.Equal(q.t, http.StatusAccepted, code, "%v", body)
	return body["token"].(string)
}

func (q *queuedCancels) cancel(user int64, token string) (int, map[string]any) {
	return call(q.t, "POST", q.s.api.URL+"/api/v1/reservations/"+token+"/cancel", user, nil)
}

// withoutWorker: the workflow was started by the API but no worker has
// run it; returns the cancelled token and the user's new one.
func (q *queuedCancels) withoutWorker() (string, string) {
	// 1. Its workflow was started by the API but no worker has run it.
	u1 := testenv.UniqueUser()
	q.u1 = u1
	t1 := q.reserve(u1, "cancel-q-1")
	require.EqualValues(q.t, 1, q.redisStock())
	code, body := q.cancel(u1, t1)
	require.Equal(q.t, http.StatusOK, code, "%v", body)
	require.Equal(q.t, "CANCELLED", body["status"])
	require.EqualValues(q.t, 2, q.redisStock(), "the unit is back on sale when the 200 is sent")
	code, body = q.cancel(u1, t1)
	require.Equal(q.t, http.StatusOK, code, "cancelling again answers the same: %v", body)
	require.EqualValues(q.t, 2, q.redisStock(), "and releases nothing twice")
	t1again := q.reserve(u1, "cancel-q-1-again") // the user may reserve at once
	return t1, t1again
}

// withoutWorkflow: no workflow at all (terminated before it ever ran).
func (q *queuedCancels) withoutWorkflow(tc client.Client) (int64, string) {
	// 2. No workflow at all (terminated before it ever ran).
	u2 := testenv.UniqueUser()
	t2 := q.reserve(u2, "cancel-q-2")
	require.EventuallyWithT(q.t, func(c *assert.CollectT) {
		_, err := tc.DescribeWorkflow(q.ctx, domain.OrderWorkflowID(t2), "")
		assert.NoError(c, err)
	}, 10*time.Second, 100*time.Millisecond)
	require.NoError(q.t, tc.TerminateWorkflow(q.ctx, domain.OrderWorkflowID(t2), "", "test: no workflow"))
	code, body := q.cancel(u2, t2)
	require.Equal(q.t, http.StatusOK, code, "%v", body)
	require.Equal(q.t, "CANCELLED", body["status"])
	require.EqualValues(q.t, 1, q.redisStock(), "t1again holds one unit; t2's is back")
	// The cancel starts the missing workflow (a new run), which will read
	// CANCELLED: every reservation has its workflow.
	require.EventuallyWithT(q.t, func(c *assert.CollectT) {
		desc, err := tc.DescribeWorkflow(q.ctx, domain.OrderWorkflowID(t2), "")
		if assert.NoError(c, err) {
			assert.Equal(c, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, desc.RawResponse.GetWorkflowExecutionInfo().GetStatus())
		}
	}, 10*time.Second, 100*time.Millisecond)
	return u2, t2
}

// whileMySQLIsCut: 503 and nothing changes; once MySQL answers, 200.
func (q *queuedCancels) whileMySQLIsCut(proxy *netproxy.Proxy) string {
	// 3. MySQL unreachable: 503, nothing changes; once it answers, 200.
	u3 := testenv.UniqueUser()
	t3 := q.reserve(u3, "cancel-q-3")
	proxy.SetCut(true)
	code, body := q.cancel(u3, t3)
	require.Equal(q.t, http.StatusServiceUnavailable, code, "%v", body)
	require.Equal(q.t, "unavailable", errCode(body))
	require.EqualValues(q.t, 0, q.redisStock(), "nothing released without the database")
	proxy.SetCut(false)
	require.EventuallyWithT(q.t, func(c *assert.CollectT) {
		code, body := q.cancel(u3, t3)
		assert.Equal(c, http.StatusOK, code, "%v", body)
	}, 30*time.Second, 500*time.Millisecond)
	require.EqualValues(q.t, 1, q.redisStock())
	return t3
}

// workerAdopts: once the worker starts, the cancelled reservations'
// workflows adopt the end without an order; the live one is placed.
func (q *queuedCancels) workerAdopts(env map[string]string, st *store.Store, tc client.Client, queue string, cancelled []string, u2 int64, t1again string) {
	t1, t2, t3 := cancelled[0], cancelled[1], cancelled[2]
	u1 := q.u1
	// The worker starts: the cancelled reservations' workflows adopt the
	// end without an order; the live one is placed.
	testenv.MustWorker(q.t, "worker", env)
	for _, tok := range []string{t1, t3} {
		var got domain.OrderState
		require.NoError(q.t, tc.GetWorkflow(q.ctx, domain.OrderWorkflowID(tok), "").Get(q.ctx, &got))
		require.Equal(q.t, domain.StatusCancelled, got.Status, tok)
		require.Empty(q.t, got.OrderNo, "no order for a reservation cancelled while queued")
	}
	// A workflow started only now (a late inbox delivery) adopts it too.
	_, err := temporalgateway.Restart(q.ctx, tc, queue, domain.OrderInput{Token: t2, SaleID: q.sale, UserID: u2, RequestID: "cancel-q-2", Path: domain.PathRedis})
	require.NoError(q.t, err)
	var got domain.OrderState
	require.NoError(q.t, tc.GetWorkflow(q.ctx, domain.OrderWorkflowID(t2), "").Get(q.ctx, &got))
	require.Equal(q.t, domain.StatusCancelled, got.Status)
	q.s.waitStatus(q.t, u1, t1again, "PENDING_PAYMENT")
	for _, tok := range []string{t1, t2, t3} {
		r, err := st.GetReservation(q.ctx, tok)
		require.NoError(q.t, err)
		require.Equal(q.t, domain.StatusCancelled, r.Status)
		require.Empty(q.t, r.OrderNo)
	}
	require.EventuallyWithT(q.t, func(c *assert.CollectT) {
		rep, err := q.s.tryReconciliation(q.t, q.sale)
		if assert.NoError(c, err) {
			assert.True(c, rep.Consistent, rep.raw)
			assert.Empty(c, rep.Discrepancies, rep.raw)
			assert.EqualValues(c, 3, rep.Orders["CANCELLED"], rep.raw)
			assert.EqualValues(c, 1, rep.Orders["PENDING_PAYMENT"], rep.raw)
		}
	}, 60*time.Second, time.Second)
}
