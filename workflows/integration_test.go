package workflows

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/netproxy"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/sales"
	"github.com/seckill/seckill/store"
	"github.com/seckill/seckill/temporalgateway"
)

// Integration tests of OrderWorkflow on the real stack: Temporal dev
// server, MariaDB and Redis, with an in-process worker on a task queue of
// the test's own.

var tokenKey = []byte("workflows-test-token-key")

// stack is one test's services and worker.
type stack struct {
	t       *testing.T
	st      *store.Store
	rdb     redis.UniversalClient
	c       client.Client
	scripts *redisgateway.Scripts
	queue   string
}

// MustStack connects to the test services and starts an order worker on a
// task queue no other package polls.
func MustStack(tb testing.TB) *stack {
	tb.Helper()
	return mustStackWorkerRedis(tb, nil)
}

// mustStackWorkerRedis is MustStack with the worker's activities on their
// own Redis client (nil: the stack's).
func mustStackWorkerRedis(tb testing.TB, workerRedis redis.UniversalClient) *stack {
	tb.Helper()
	return mustStackWith(tb, workerRedis)
}

// mustStackWith is mustStackWorkerRedis with the stack's client (the
// worker's and the starts') adjusted by opts.
func mustStackWith(tb testing.TB, workerRedis redis.UniversalClient, opts ...func(*client.Options)) *stack {
	tb.Helper()
	t, ok := tb.(*testing.T)
	if !ok {
		tb.Fatal("MustStack needs a *testing.T")
	}
	s := &stack{
		t:       t,
		st:      testenv.MustStore(tb),
		rdb:     testenv.MustRedis(tb),
		c:       testenv.MustTemporal(tb, opts...),
		scripts: redisgateway.New(),
		queue:   fmt.Sprintf("seckill-test-orders-%d", time.Now().UnixNano()),
	}
	if workerRedis == nil {
		workerRedis = s.rdb
	}
	w := worker.New(s.c, s.queue, worker.Options{})
	Register(w, &activities.Activities{Store: s.st, Redis: redisgateway.NewClient(workerRedis)})
	require.NoError(tb, w.Start())
	tb.Cleanup(w.Stop)
	return s
}

func ctxT(tb testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}

// MustWarmSale creates a sale, loads it into Redis with redisStock units
// (normally its stock) and removes its keys at the end.
func (s *stack) MustWarmSale(tb testing.TB, stock int64, window time.Duration, redisStock int64) *domain.Sale {
	tb.Helper()
	sale := testenv.MustSale(tb, s.st, stock, func(x *domain.Sale) {
		x.PaymentWindowSeconds = int(window / time.Second)
	})
	ctx := ctxT(tb, 10*time.Second)
	outcome, _, err := s.scripts.Warmup(ctx, s.rdb, redisgateway.WarmupArgs{
		SaleID:   sale.ID,
		StartsMS: sale.StartsAt.UnixMilli(),
		EndsMS:   sale.EndsAt.UnixMilli(),
		Control:  string(domain.ControlActive),
		Epoch:    1,
		Mode:     string(domain.ModeRedis),
		Stock:    redisStock,
	})
	require.NoError(tb, err)
	require.Equal(tb, redisgateway.WarmupOK, outcome)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.rdb.Del(ctx, redisgateway.SaleKeys(sale.ID).All()...).Err(); err != nil {
			tb.Logf("clean up sale %d keys: %v", sale.ID, err)
		}
	})
	return sale
}

// reserve runs the reservation script as the API would and returns the
// outcome and the token.
func (s *stack) reserve(sale *domain.Sale, user int64, requestID string) (string, string) {
	s.t.Helper()
	token := domain.DeriveToken(tokenKey, sale.ID, user, requestID)
	res, err := s.scripts.Reserve(ctxT(s.t, 5*time.Second), s.rdb, redisgateway.ReserveArgs{
		SaleID: sale.ID, UserID: user, RequestID: requestID, Token: token, Epoch: 1,
	})
	require.NoError(s.t, err)
	return res.Outcome, token
}

// MustOrder reserves a unit for user and starts its workflow.
func (s *stack) MustOrder(sale *domain.Sale, user int64, requestID string) domain.OrderInput {
	s.t.Helper()
	outcome, token := s.reserve(sale, user, requestID)
	require.Equal(s.t, redisgateway.OutcomeOK, outcome, "reserve for user %d", user)
	in := domain.OrderInput{Token: token, SaleID: sale.ID, UserID: user, RequestID: requestID, Path: domain.PathRedis}
	require.NoError(s.t, temporalgateway.Start(ctxT(s.t, 10*time.Second), s.c, s.queue, in))
	return in
}

// MustLegacyOrder is MustOrder for a hold recorded without its unit
// (testenv.MustLegacyHold) before its workflow starts: its order takes one.
func (s *stack) MustLegacyOrder(sale *domain.Sale, user int64, requestID string) domain.OrderInput {
	s.t.Helper()
	outcome, token := s.reserve(sale, user, requestID)
	require.Equal(s.t, redisgateway.OutcomeOK, outcome, "reserve for user %d", user)
	in := domain.OrderInput{Token: token, SaleID: sale.ID, UserID: user, RequestID: requestID, Path: domain.PathRedis}
	testenv.MustLegacyHold(s.t, s.st, in)
	require.NoError(s.t, temporalgateway.Start(ctxT(s.t, 10*time.Second), s.c, s.queue, in))
	return in
}

// waitStatus polls the database until the reservation has the status.
func (s *stack) waitStatus(token string, want domain.ReservationStatus) {
	s.t.Helper()
	require.EventuallyWithT(s.t, func(c *assert.CollectT) {
		r, err := s.st.GetReservation(ctxT(s.t, 5*time.Second), token)
		if !assert.NoError(c, err) {
			return
		}
		assert.Equal(c, want, r.Status)
	}, 60*time.Second, 100*time.Millisecond, "reservation %s never reached %s", token, want)
}

func (s *stack) update(token, name, id string, arg any) (domain.OrderState, error) {
	s.t.Helper()
	ctx := ctxT(s.t, 30*time.Second)
	h, err := s.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   domain.OrderWorkflowID(token),
		UpdateName:   name,
		UpdateID:     id,
		Args:         []any{arg},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return domain.OrderState{}, err
	}
	var st domain.OrderState
	err = h.Get(ctx, &st)
	return st, err
}

// result waits for the workflow to complete and returns its result.
func (s *stack) result(token string) domain.OrderState {
	s.t.Helper()
	var st domain.OrderState
	require.NoError(s.t, s.c.GetWorkflow(ctxT(s.t, 60*time.Second), domain.OrderWorkflowID(token), "").Get(ctxT(s.t, 60*time.Second), &st))
	return st
}

// books reads the sale's stock everywhere.
type books struct {
	redisStock, dbStock, ledger int64
	counts                      map[domain.ReservationStatus]int64
}

func (s *stack) books(saleID int64) books {
	s.t.Helper()
	ctx := ctxT(s.t, 10*time.Second)
	var b books
	var err error
	b.redisStock, err = s.rdb.Get(ctx, redisgateway.SaleKeys(saleID).Stock).Int64()
	require.NoError(s.t, err)
	b.dbStock, err = s.st.DBStock(ctx, saleID)
	require.NoError(s.t, err)
	b.counts, err = s.st.CountReservations(ctx, saleID)
	require.NoError(s.t, err)
	require.NoError(s.t, s.st.DB.QueryRowContext(ctx,
		"SELECT COALESCE(SUM(delta), 0) FROM stock_ledger WHERE sale_id = ? AND operation IN ('deduct', 'restore')", saleID).Scan(&b.ledger))
	return b
}

// requireConsistent checks that Redis, the buckets and the ledger agree
// with the orders once no workflow is in flight.
func (s *stack) requireConsistent(sale *domain.Sale) books {
	s.t.Helper()
	b := s.books(sale.ID)
	live := domain.LiveCount(b.counts)
	require.Equal(s.t, sale.StockTotal, b.dbStock+live, "db stock + live orders, books %+v", b)
	require.Equal(s.t, sale.StockTotal, b.redisStock+live, "redis stock + live orders, books %+v", b)
	require.Equal(s.t, -live, b.ledger, "ledger deducts - restores, books %+v", b)
	return b
}

func TestOrderIntegrationPayCancelExpire(t *testing.T) {
	s := MustStack(t)
	const stock = 4
	sale := s.MustWarmSale(t, stock, 10*time.Minute, stock)
	users := make([]int64, stock)
	orders := make([]domain.OrderInput, stock)
	for i := range users {
		users[i] = testenv.UniqueUser()
		orders[i] = s.MustOrder(sale, users[i], fmt.Sprintf("req-first-%d", i))
	}
	for _, in := range orders {
		s.waitStatus(in.Token, domain.StatusPendingPayment)
	}
	outcome, _ := s.reserve(sale, testenv.UniqueUser(), "req-soldout")
	require.Equal(t, redisgateway.OutcomeSoldOut, outcome)
	s.requireConsistent(sale)

	paid, cancelled, expired, pending := orders[0], orders[1], orders[2], orders[3]

	payCancelExpire(t, s, paid, cancelled, expired)
	// Paying a cancelled order is refused; the workflow's end is the
	// database's.
	for _, in := range []domain.OrderInput{cancelled, expired} {
		require.Contains(t, []domain.ReservationStatus{domain.StatusCancelled, domain.StatusExpired}, s.result(in.Token).Status)
		r, err := s.st.GetReservation(ctxT(t, 5*time.Second), in.Token)
		require.NoError(t, err)
		require.Contains(t, []domain.ReservationStatus{domain.StatusCancelled, domain.StatusExpired}, r.Status)
	}
	s.waitStatus(paid.Token, domain.StatusPaid)
	s.waitStatus(pending.Token, domain.StatusPendingPayment)

	// Two units are back on sale, in Redis and in the buckets, at once:
	// the cancel answered only after the release.
	b := s.requireConsistent(sale)
	require.Equal(t, int64(2), b.redisStock)
	require.Equal(t, int64(2), b.dbStock)

	// The cancelled user reserves again and gets a new unit; a new user
	// takes the other; then the sale is sold out again, exactly.
	again1 := s.MustOrder(sale, cancelled.UserID, "req-second-1")
	require.NotEqual(t, cancelled.Token, again1.Token)
	newcomer := s.MustOrder(sale, testenv.UniqueUser(), "req-newcomer")
	s.waitStatus(again1.Token, domain.StatusPendingPayment)
	s.waitStatus(newcomer.Token, domain.StatusPendingPayment)
	outcome, _ = s.reserve(sale, testenv.UniqueUser(), "req-soldout-2")
	require.Equal(t, redisgateway.OutcomeSoldOut, outcome)
	// The paid user cannot buy twice.
	outcome, _ = s.reserve(sale, paid.UserID, "req-paid-again")
	require.Equal(t, redisgateway.OutcomeAlready, outcome)
	b = s.requireConsistent(sale)
	require.Zero(t, b.redisStock)
	require.Zero(t, b.dbStock)
	require.Equal(t, int64(1), b.counts[domain.StatusPaid])
	require.Equal(t, int64(3), b.counts[domain.StatusPendingPayment])

	// Leave no workflow waiting 10 minutes behind.
	for _, in := range []domain.OrderInput{pending, again1, newcomer} {
		st, err := s.update(in.Token, domain.UpdateCancel, "cleanup", domain.CancelRequest{})
		require.NoError(t, err)
		require.Equal(t, domain.StatusCancelled, st.Status)
	}
	b = s.requireConsistent(sale)
	require.Equal(t, int64(3), b.redisStock)
}

// payCancelExpire pays, cancels and expires one order each through their
// workflows' updates; paying again with the same reference answers the
// same.
func payCancelExpire(t *testing.T, s *stack, paid, cancelled, expired domain.OrderInput) {
	st, err := s.update(paid.Token, domain.UpdatePay, "ref-"+paid.Token, domain.PayRequest{PaymentRef: "ref-1"})
	require.NoError(t, err)
	require.Equal(t, domain.StatusPaid, st.Status)
	require.Equal(t, "ref-1", st.PaymentRef)
	// The same payment again answers the same; another is refused.
	again, err := s.update(paid.Token, domain.UpdatePay, "ref-again-"+paid.Token, domain.PayRequest{PaymentRef: "ref-1"})
	if err == nil { // the workflow may have completed already
		require.Equal(t, st, again)
	}
	require.Equal(t, domain.StatusPaid, s.result(paid.Token).Status)

	st, err = s.update(cancelled.Token, domain.UpdateCancel, "cancel-1", domain.CancelRequest{Reason: "test"})
	require.NoError(t, err)
	require.Equal(t, domain.StatusCancelled, st.Status)

	st, err = s.update(expired.Token, domain.UpdateExpire, "expire-1", domain.CancelRequest{Reason: "operator"})
	require.NoError(t, err)
	require.Equal(t, domain.StatusExpired, st.Status)
}

func TestOrderIntegrationExpiresAndSellsAgain(t *testing.T) {
	s := MustStack(t)
	const stock = 2
	sale := s.MustWarmSale(t, stock, 2*time.Second, stock)
	var orders []domain.OrderInput
	for i := 0; i < stock; i++ {
		orders = append(orders, s.MustOrder(sale, testenv.UniqueUser(), fmt.Sprintf("req-exp-%d", i)))
	}
	for _, in := range orders {
		st := s.result(in.Token)
		require.Equal(t, domain.StatusExpired, st.Status)
		require.NotEmpty(t, st.OrderNo)
		s.waitStatus(in.Token, domain.StatusExpired)
	}
	// A payment after the window is refused.
	_, err := s.update(orders[0].Token, domain.UpdatePay, "late", domain.PayRequest{PaymentRef: "late"})
	require.Error(t, err)

	b := s.requireConsistent(sale)
	require.Equal(t, int64(stock), b.redisStock)
	require.Equal(t, int64(stock), b.counts[domain.StatusExpired])

	// The first user buys again and gets a new unit (and order), which
	// expires in turn. (Paying in time is covered above, with a window a
	// loaded machine cannot miss.)
	again := s.MustOrder(sale, orders[0].UserID, "req-exp-again")
	require.NotEqual(t, orders[0].Token, again.Token)
	st := s.result(again.Token)
	require.Equal(t, domain.StatusExpired, st.Status)
	require.NotEmpty(t, st.OrderNo)
	require.NotEqual(t, s.result(orders[0].Token).OrderNo, st.OrderNo)
	b = s.requireConsistent(sale)
	require.Equal(t, int64(stock), b.redisStock)
	require.Equal(t, int64(stock+1), b.counts[domain.StatusExpired])
}

// Redis held a unit the database does not have: the order fails and Redis
// does not get the unit back.
func TestOrderIntegrationNoStockFails(t *testing.T) {
	s := MustStack(t)
	sale := s.MustWarmSale(t, 1, 10*time.Minute, 1)
	// Withdraw the unit from the buckets only: the database has none left
	// while Redis still offers one.
	require.NoError(t, s.st.AdjustStock(ctxT(t, 10*time.Second), sale.ID, -1, fmt.Sprintf("test-withdraw-%d", sale.ID)))
	in := s.MustOrder(sale, testenv.UniqueUser(), "req-nostock")
	st := s.result(in.Token)
	require.Equal(t, domain.StatusFailed, st.Status)
	require.Equal(t, domain.FailReasonRefusedSoldOut, st.FailReason, "refused when the workflow recorded it")
	s.waitStatus(in.Token, domain.StatusFailed)
	b := s.books(sale.ID)
	require.Zero(t, b.redisStock)
	require.Zero(t, b.dbStock)
	// The user's mark is gone: after FAILED they may reserve again (and
	// find the sale sold out).
	outcome, _ := s.reserve(sale, in.UserID, "req-nostock-2")
	require.Equal(t, redisgateway.OutcomeSoldOut, outcome)
}

// A database-path order, placed while Redis was out, is in Redis after the
// resync (token ordered, buyer marked, unit not in Redis's stock). Its
// release must undo that too: decided by the token's state at release
// time, not by the path the workflow started with.
func TestOrderIntegrationDatabasePathReleasedAfterResync(t *testing.T) {
	s := MustStack(t)
	const stock = 3
	sale := s.MustWarmSale(t, stock, 10*time.Minute, stock)
	ctx := ctxT(t, 60*time.Second)
	require.NoError(t, s.st.RecordRedisStock(ctx, sale.ID, stock, time.Now()))
	_, err := s.st.SwitchToDatabase(ctx, sale.ID, 0)
	require.NoError(t, err)
	user := testenv.UniqueUser()
	in := domain.OrderInput{Token: domain.DeriveToken(tokenKey, sale.ID, user, "req-dbpath"), SaleID: sale.ID, UserID: user,
		RequestID: "req-dbpath", Path: domain.PathDatabase, Deducted: true}
	_, _, err = s.st.ReserveInDB(ctx, in)
	require.NoError(t, err)
	require.NoError(t, s.st.MarkDispatched(ctx, in.Token))
	require.NoError(t, temporalgateway.Start(ctx, s.c, s.queue, in))
	s.waitStatus(in.Token, domain.StatusPendingPayment)

	done, err := sales.Resync(ctx, s.st, redisgateway.NewClient(s.rdb), s.c, sale.ID)
	require.NoError(t, err)
	require.True(t, done)
	k := redisgateway.SaleKeys(sale.ID)
	require.Equal(t, "ordered:"+fmt.Sprint(user), s.rdb.HGet(ctx, k.Tokens, in.Token).Val())
	require.True(t, s.rdb.SIsMember(ctx, k.Buyers, user).Val())

	st, err := s.update(in.Token, domain.UpdateCancel, "cancel-after-resync", domain.CancelRequest{Reason: "test"})
	require.NoError(t, err)
	require.Equal(t, domain.StatusCancelled, st.Status)
	require.Equal(t, "released:"+fmt.Sprint(user), s.rdb.HGet(ctx, k.Tokens, in.Token).Val(), "the token's end state")
	require.False(t, s.rdb.SIsMember(ctx, k.Buyers, user).Val(), "the buyer mark")
	b := s.requireConsistent(sale) // the unit, in Redis and in the buckets
	require.EqualValues(t, stock, b.redisStock)
	// The user can buy again, through Redis.
	now, err := s.st.GetSale(ctx, sale.ID)
	require.NoError(t, err)
	res, err := s.scripts.Reserve(ctx, s.rdb, redisgateway.ReserveArgs{SaleID: sale.ID, UserID: user, RequestID: "req-dbpath-again",
		Token: domain.DeriveToken(tokenKey, sale.ID, user, "req-dbpath-again"), Epoch: now.ModeEpoch})
	require.NoError(t, err)
	require.Equal(t, redisgateway.OutcomeOK, res.Outcome)
}

// mustRedisAwayStack is a stack whose worker reaches Redis through a proxy
// the test can cut.
func mustRedisAwayStack(tb testing.TB) (*stack, *netproxy.Proxy) {
	tb.Helper()
	proxy, err := netproxy.Start(testenv.RedisAddr(), 0)
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = proxy.Close() })
	viaProxy := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{proxy.Addr()},
		DialTimeout: 200 * time.Millisecond, ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond, MaxRetries: -1})
	tb.Cleanup(func() { _ = viaProxy.Close() })
	return mustStackWorkerRedis(tb, viaProxy), proxy
}

// payWhileRedisAway orders a unit with the worker's Redis cut from before
// the workflow starts, pays one second into the 5-second window and heals
// Redis just after pay_by, before the workflow task's heartbeat would let a
// waiting update in. It returns the order and the payment's answer.
func (s *stack) payWhileRedisAway(proxy *netproxy.Proxy) (domain.OrderInput, domain.OrderState, error) {
	t := s.t
	sale := s.MustWarmSale(t, 1, 5*time.Second, 1)
	user := testenv.UniqueUser()
	outcome, token := s.reserve(sale, user, "req-redis-away")
	require.Equal(t, redisgateway.OutcomeOK, outcome)

	proxy.SetCut(true)
	in := domain.OrderInput{Token: token, SaleID: sale.ID, UserID: user, RequestID: "req-redis-away", Path: domain.PathRedis}
	require.NoError(t, temporalgateway.Start(ctxT(t, 10*time.Second), s.c, s.queue, in))
	s.waitStatus(token, domain.StatusPendingPayment)
	r, err := s.st.GetReservation(ctxT(t, 5*time.Second), token)
	require.NoError(t, err)
	require.NotNil(t, r.PayBy)
	left := time.Until(*r.PayBy)
	require.Greater(t, left, 2*time.Second, "the test needs the window open when it pays")

	heal := time.AfterFunc(left+300*time.Millisecond, func() { proxy.SetCut(false) })
	t.Cleanup(func() { heal.Stop() })
	time.Sleep(time.Second)
	before := time.Until(*r.PayBy)
	st, err := s.update(token, domain.UpdatePay, "pay-while-redis-away", domain.PayRequest{PaymentRef: "pay-while-redis-away"})
	if err != nil {
		err = fmt.Errorf("a payment sent %s before pay_by: %w", before, err)
	}
	return in, st, err
}

// Redis dies while the order's first workflow task runs, after the order
// and its pay_by are written: the Redis step must not hold the workflow
// task (and with it every update) while it retries. A payment sent in the
// window is accepted, and Redis follows once it is back (chaos soak seeds
// 8 and 12: the step's local activity retried inside the task until after
// pay_by, and the payment waiting for the task was refused).
func TestOrderIntegrationPaymentAcceptedWhileRedisStepRetries(t *testing.T) {
	s, proxy := mustRedisAwayStack(t)
	in, st, err := s.payWhileRedisAway(proxy)
	require.NoError(t, err)
	require.Equal(t, domain.StatusPaid, st.Status)

	require.Equal(t, domain.StatusPaid, s.result(in.Token).Status)
	s.waitStatus(in.Token, domain.StatusPaid)
	k := redisgateway.SaleKeys(in.SaleID)
	require.Equal(t, "paid:"+fmt.Sprint(in.UserID), s.rdb.HGet(ctxT(t, 5*time.Second), k.Tokens, in.Token).Val(), "the token's Redis state follows once Redis is back")
	sale, err := s.st.GetSale(ctxT(t, 5*time.Second), in.SaleID)
	require.NoError(t, err)
	s.requireConsistent(sale)
}
