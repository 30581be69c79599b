package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/store"
	"github.com/seckill/seckill/temporalgateway"
	"github.com/seckill/seckill/test/testsale"
)

var testKey = []byte("worker-test-token-key")

func testCtx(tb testing.TB) context.Context {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	tb.Cleanup(cancel)
	return ctx
}

func testLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// warmSale is a fresh sale loaded into Redis the way the sale workflow's
// warm-up does it, its inbox and consumer group created.
type warmSale struct {
	*domain.Sale
	rdb     redis.UniversalClient
	st      *store.Store
	scripts *redisgateway.Scripts
	keys    redisgateway.Keys
}

// MustWarmSale creates a live sale with stock units and warms it in Redis.
func MustWarmSale(tb testing.TB, stock int64) *warmSale {
	tb.Helper()
	rdb := testenv.MustRedis(tb)
	st := testenv.MustStore(tb)
	sale := testenv.MustSale(tb, st, stock)
	testsale.MustWarm(tb, st, rdb, sale)
	return &warmSale{Sale: sale, rdb: rdb, st: st, scripts: redisgateway.New(), keys: redisgateway.SaleKeys(sale.ID)}
}

// MustReserve reserves a unit for a new user through the real reserve
// script, which appends the inbox entry, and answers the token.
func (w *warmSale) MustReserve(tb testing.TB) (token string, userID int64) {
	tb.Helper()
	userID = testenv.UniqueUser()
	reqID := "req-" + strconv.FormatInt(userID, 10)
	token = domain.DeriveToken(testKey, w.ID, userID, reqID)
	res, err := w.scripts.Reserve(testCtx(tb), w.rdb, redisgateway.ReserveArgs{
		SaleID: w.ID, UserID: userID, RequestID: reqID, Token: token, Epoch: 1,
	})
	require.NoError(tb, err)
	require.Equal(tb, redisgateway.OutcomeOK, res.Outcome)
	return token, userID
}

// pending answers how many inbox entries are delivered but not acknowledged.
func (w *warmSale) pending(tb testing.TB) int64 {
	tb.Helper()
	p, err := w.rdb.XPending(testCtx(tb), w.keys.Inbox, redisgateway.InboxGroup).Result()
	require.NoError(tb, err)
	return p.Count
}

// recorder is an injected Starter that counts the starts of each token and
// fails them while fail says so.
type recorder struct {
	mu    sync.Mutex
	calls map[string]int
	ins   map[string]domain.OrderInput
	fail  func(token string, call int) bool
	// failWith is the error of a failed start (a plain error when nil).
	failWith error
	// started lists the tokens of successful starts in their order.
	started []string
}

func newRecorder(fail func(token string, call int) bool) *recorder {
	return &recorder{calls: map[string]int{}, ins: map[string]domain.OrderInput{}, fail: fail}
}

func (r *recorder) start(_ context.Context, in domain.OrderInput) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls[in.Token]++
	r.ins[in.Token] = in
	if r.fail != nil && r.fail(in.Token, r.calls[in.Token]) {
		if r.failWith != nil {
			return r.failWith
		}
		return errors.New("injected start failure")
	}
	r.started = append(r.started, in.Token)
	return nil
}

func (r *recorder) count(token string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[token]
}

func (r *recorder) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.calls {
		n += c
	}
	return n
}

// MustRelay builds a relay with a short idle time and its own metrics.
func MustRelay(tb testing.TB, w *warmSale, starter Starter) *Relay {
	tb.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	require.NoError(tb, err)
	return &Relay{
		Redis:        redisgateway.NewClient(w.rdb),
		Store:        w.st,
		Starter:      starter,
		Consumer:     fmt.Sprintf("test-%d", testenv.UniqueUser()),
		MinIdle:      50 * time.Millisecond,
		MaxDelivery:  3,
		Logger:       testLogger(),
		Metrics:      m,
		Block:        100 * time.Millisecond,
		ReclaimEvery: 100 * time.Millisecond,
	}
}

func TestRelayStartsEachEntryOnceAndAcks(t *testing.T) {
	w := MustWarmSale(t, 10)
	rec := newRecorder(nil)
	r := MustRelay(t, w, rec.start)
	users := map[string]int64{}
	for range 5 {
		tok, u := w.MustReserve(t)
		users[tok] = u
	}

	n, err := r.ReadOnce(testCtx(t), w.ID)
	require.NoError(t, err)
	assert.Equal(t, 5, n)
	for tok, u := range users {
		assert.Equal(t, 1, rec.count(tok), "starts of %s", tok)
		in := rec.ins[tok]
		assert.Equal(t, domain.OrderInput{Token: tok, SaleID: w.ID, UserID: u, RequestID: "req-" + strconv.FormatInt(u, 10), Path: domain.PathRedis}, in)
	}
	assert.Zero(t, w.pending(t), "every started entry is acknowledged")
	assert.Equal(t, 5.0, testutil.ToFloat64(r.Metrics.Started))
	assert.Equal(t, 5.0, testutil.ToFloat64(r.Metrics.Acked))
	started, err := w.rdb.SMembers(testCtx(t), w.keys.Started).Result()
	require.NoError(t, err)
	assert.Len(t, started, 5, "the relay records the tokens it started")

	// Nothing new and nothing pending: no start happens again.
	n, err = r.ReadOnce(testCtx(t), w.ID)
	require.NoError(t, err)
	assert.Zero(t, n)
	n, err = r.Reclaim(testCtx(t), w.ID)
	require.NoError(t, err)
	assert.Zero(t, n)
	assert.Equal(t, 5, rec.total())
}

func TestRelayAcksStartedTokensWithoutStarting(t *testing.T) {
	w := MustWarmSale(t, 10)
	rec := newRecorder(nil)
	r := MustRelay(t, w, rec.start)
	known, _ := w.MustReserve(t)
	fresh, _ := w.MustReserve(t)
	// The API started this one's workflow itself.
	require.NoError(t, w.rdb.SAdd(testCtx(t), w.keys.Started, known).Err())

	n, err := r.ReadOnce(testCtx(t), w.ID)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.Zero(t, rec.count(known), "a token in the started set is not started again")
	assert.Equal(t, 1, rec.count(fresh))
	assert.Zero(t, w.pending(t))
	assert.Equal(t, 2.0, testutil.ToFloat64(r.Metrics.Acked))
	assert.Equal(t, 1.0, testutil.ToFloat64(r.Metrics.Started))
}

// A batch whose started-before entries follow new ones: the new ones'
// starts run while the batch's loop acknowledges the started-before ones,
// on the same list. Under -race this failed while the loop appended
// without the lock the starts take.
func TestRelayAcksStartedTokensBesideStarts(t *testing.T) {
	w := MustWarmSale(t, 20)
	rec := newRecorder(nil)
	r := MustRelay(t, w, rec.start)
	var fresh, known []string
	for i := range 10 {
		tok, _ := w.MustReserve(t)
		if i%2 == 0 {
			fresh = append(fresh, tok)
			continue
		}
		known = append(known, tok)
		require.NoError(t, w.rdb.SAdd(testCtx(t), w.keys.Started, tok).Err())
	}
	n, err := r.ReadOnce(testCtx(t), w.ID)
	require.NoError(t, err)
	assert.Equal(t, 10, n)
	for _, tok := range fresh {
		assert.Equal(t, 1, rec.count(tok))
	}
	for _, tok := range known {
		assert.Zero(t, rec.count(tok), "a token in the started set is not started again")
	}
	assert.Zero(t, w.pending(t), "every entry acknowledged")
	assert.Equal(t, 10.0, testutil.ToFloat64(r.Metrics.Acked))
}

// A batch's starts run Concurrency at a time, each entry started once and
// acknowledged.
func TestRelayStartsABatchConcurrencyAtATime(t *testing.T) {
	w := MustWarmSale(t, 20)
	rec := newRecorder(nil)
	var inFlight, most atomic.Int64
	r := MustRelay(t, w, func(ctx context.Context, in domain.OrderInput) error {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(20 * time.Millisecond)
		return rec.start(ctx, in)
	})
	r.Concurrency = 3
	var toks []string
	for range 12 {
		tok, _ := w.MustReserve(t)
		toks = append(toks, tok)
	}
	n, err := r.ReadOnce(testCtx(t), w.ID)
	require.NoError(t, err)
	assert.Equal(t, 12, n)
	for _, tok := range toks {
		assert.Equal(t, 1, rec.count(tok), "starts of %s", tok)
	}
	assert.Equal(t, int64(3), most.Load(), "starts in flight at most")
	assert.Zero(t, w.pending(t), "every entry acknowledged")
	assert.Equal(t, 12.0, testutil.ToFloat64(r.Metrics.Acked))
}

// The relay has an entry in hand from its read until its batch is
// acknowledged.
func TestRelayHasEntriesInHandUntilAcknowledged(t *testing.T) {
	w := MustWarmSale(t, 10)
	var r *Relay
	rec := newRecorder(nil)
	var seen atomic.Bool
	r = MustRelay(t, w, func(ctx context.Context, in domain.OrderInput) error {
		seen.Store(r.InHand(in.Token))
		return rec.start(ctx, in)
	})
	tok, _ := w.MustReserve(t)
	require.False(t, r.InHand(tok), "not read yet")
	n, err := r.ReadOnce(testCtx(t), w.ID)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.True(t, seen.Load(), "in hand during its start")
	require.False(t, r.InHand(tok), "acknowledged: no longer in hand")
}

func TestRelayRetriesFailedStartAfterReclaim(t *testing.T) {
	w := MustWarmSale(t, 10)
	ok, _ := w.MustReserve(t)
	flaky, _ := w.MustReserve(t)
	// The flaky token's first start fails; its second succeeds.
	rec := newRecorder(func(token string, call int) bool { return token == flaky && call == 1 })
	r := MustRelay(t, w, rec.start)

	_, err := r.ReadOnce(testCtx(t), w.ID)
	require.NoError(t, err)
	assert.Equal(t, 1, rec.count(ok))
	assert.Equal(t, 1, rec.count(flaky))
	assert.Equal(t, int64(1), w.pending(t), "the failed entry stays pending")
	assert.Equal(t, 1.0, testutil.ToFloat64(r.Metrics.StartErrors))
	isStarted, err := w.rdb.SIsMember(testCtx(t), w.keys.Started, flaky).Result()
	require.NoError(t, err)
	assert.False(t, isStarted)

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, err := r.Reclaim(testCtx(t), w.ID)
		assert.NoError(c, err)
		assert.Zero(c, w.pending(t))
	}, 10*time.Second, 50*time.Millisecond)
	assert.Equal(t, 2, rec.count(flaky), "retried once after the reclaim")
	assert.Equal(t, 1, rec.count(ok), "the acknowledged entry is never redelivered")
}

// A start Temporal refuses for good (an invalid request) is dead-lettered
// after MaxDelivery deliveries.
func TestRelayDeadLettersAfterMaxDelivery(t *testing.T) {
	w := MustWarmSale(t, 10)
	tok, user := w.MustReserve(t)
	rec := newRecorder(func(string, int) bool { return true })
	rec.failWith = serviceerror.NewInvalidArgument("injected refusal")
	r := MustRelay(t, w, rec.start)
	dead := r.Metrics.DeadLetters.WithLabelValues(strconv.FormatInt(w.ID, 10))

	_, err := r.ReadOnce(testCtx(t), w.ID)
	require.NoError(t, err)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, err := r.Reclaim(testCtx(t), w.ID)
		assert.NoError(c, err)
		n, err := w.rdb.XLen(testCtx(t), w.keys.Dead).Result()
		assert.NoError(c, err)
		assert.Equal(c, int64(1), n)
	}, 10*time.Second, 50*time.Millisecond)

	// The refusal is known only from a start: the delivery past
	// MaxDelivery tries once more, then gives up.
	assert.Equal(t, int(r.MaxDelivery)+1, rec.count(tok), "started MaxDelivery+1 times, then given up")
	assert.Zero(t, w.pending(t), "the dead-lettered entry is acknowledged")
	assert.Equal(t, 1.0, testutil.ToFloat64(dead))
	assert.Equal(t, float64(r.MaxDelivery+1), testutil.ToFloat64(r.Metrics.StartErrors))

	msgs, err := w.rdb.XRange(testCtx(t), w.keys.Dead, "-", "+").Result()
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	v := msgs[0].Values
	assert.Equal(t, tok, v["token"])
	assert.Equal(t, strconv.FormatInt(user, 10), v["user"])
	assert.Equal(t, "req-"+strconv.FormatInt(user, 10), v["request"])
	assert.Equal(t, strconv.FormatInt(r.MaxDelivery+1, 10), v["delivered"])
	assert.NotEmpty(t, v["reason"])
	assert.NotEmpty(t, v["entry"])

	// Once dead, the entry is not delivered again.
	n, err := r.Reclaim(testCtx(t), w.ID)
	require.NoError(t, err)
	assert.Zero(t, n)
}

func TestRelayDeadLettersMalformedEntryAtOnce(t *testing.T) {
	w := MustWarmSale(t, 10)
	rec := newRecorder(nil)
	r := MustRelay(t, w, rec.start)
	require.NoError(t, w.rdb.XAdd(testCtx(t), &redis.XAddArgs{
		Stream: w.keys.Inbox, Values: map[string]any{"token": "x", "user": "not-a-number"},
	}).Err())

	n, err := r.ReadOnce(testCtx(t), w.ID)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Zero(t, rec.total())
	assert.Zero(t, w.pending(t))
	dl, err := w.rdb.XLen(testCtx(t), w.keys.Dead).Result()
	require.NoError(t, err)
	assert.Equal(t, int64(1), dl)
}

func TestRelayLoopRelaysNewEntriesAndStops(t *testing.T) {
	w := MustWarmSale(t, 10)
	rec := newRecorder(func(_ string, call int) bool { return call == 1 })
	r := MustRelay(t, w, rec.start)
	var tokens []string
	for range 3 {
		tok, _ := w.MustReserve(t)
		tokens = append(tokens, tok)
	}

	stop, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.runSale(stop, context.Background(), w.ID)
	}()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, tok := range tokens {
			assert.Equal(c, 2, rec.count(tok), "first start fails, the reclaim retries")
		}
		assert.Zero(c, w.pending(t))
	}, 20*time.Second, 50*time.Millisecond)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		// The gauge exists (the loop observed the group) and reads zero.
		assert.Equal(c, 1, testutil.CollectAndCount(r.Metrics.Pending))
		assert.Zero(c, testutil.ToFloat64(r.Metrics.Pending.WithLabelValues(strconv.FormatInt(w.ID, 10))))
	}, 10*time.Second, 50*time.Millisecond)

	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the sale's relay loop did not stop after cancel")
	}
}

func TestRelayRedeliveryStartsOneWorkflow(t *testing.T) {
	w := MustWarmSale(t, 10)
	tc := testenv.MustTemporal(t)
	tok, user := w.MustReserve(t)
	wfID := domain.OrderWorkflowID(tok)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// Leave no order workflow of a test sale behind; it may already be gone.
		_ = tc.TerminateWorkflow(ctx, wfID, "", "worker test cleanup")
	})

	// A consumer reads the entry, starts the workflow and dies before its ack.
	streams, err := w.rdb.XReadGroup(testCtx(t), &redis.XReadGroupArgs{
		Group: redisgateway.InboxGroup, Consumer: "died-before-ack", Streams: []string{w.keys.Inbox, ">"}, Count: 10,
	}).Result()
	require.NoError(t, err)
	require.Len(t, streams, 1)
	require.Len(t, streams[0].Messages, 1)
	in, err := parseEntry(w.ID, redisgateway.ParseInboxEntry(streams[0].Messages[0]))
	require.NoError(t, err)
	require.NoError(t, temporalgateway.Start(testCtx(t), tc, domain.TaskQueue, in))
	first, err := tc.DescribeWorkflow(testCtx(t), wfID, "")
	require.NoError(t, err)
	runID := first.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	require.NotEmpty(t, runID)

	// The relay reclaims the entry from the dead consumer and starts it again.
	r := MustRelay(t, w, func(ctx context.Context, in domain.OrderInput) error {
		return temporalgateway.Start(ctx, tc, domain.TaskQueue, in)
	})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		n, err := r.Reclaim(testCtx(t), w.ID)
		assert.NoError(c, err)
		assert.Positive(c, n)
	}, 10*time.Second, 50*time.Millisecond)
	assert.Zero(t, w.pending(t), "the reclaimed entry is acknowledged")
	assert.Equal(t, 1.0, testutil.ToFloat64(r.Metrics.Started))

	// Exactly one execution carries the reservation's workflow id.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		resp, err := tc.ListWorkflow(testCtx(t), &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf("WorkflowId = '%s'", wfID),
		})
		if !assert.NoError(c, err) {
			return
		}
		if assert.Len(c, resp.Executions, 1) {
			assert.Equal(c, runID, resp.Executions[0].Execution.RunId)
			assert.Equal(c, user, mustSearchAttrInt(c, resp.Executions[0], domain.SearchAttrUserID))
		}
	}, 10*time.Second, 100*time.Millisecond)
}

func mustSearchAttrInt(c *assert.CollectT, e *workflowpb.WorkflowExecutionInfo, name string) int64 {
	p := e.GetSearchAttributes().GetIndexedFields()[name]
	if !assert.NotNil(c, p, "search attribute %s", name) {
		return 0
	}
	var v int64
	assert.NoError(c, converter.GetDefaultDataConverter().FromPayload(p, &v))
	return v
}

// Temporal unavailable for many more deliveries than MaxDelivery, with the
// dead-letter age passed: nothing is dead-lettered, the entries stay
// pending, and once Temporal answers they start oldest first, before the
// entries reserved during the outage.
func TestRelayNeverDeadLettersWhileTemporalIsUnavailable(t *testing.T) {
	w := MustWarmSale(t, 20)
	var down atomic.Bool
	down.Store(true)
	rec := newRecorder(func(string, int) bool { return down.Load() })
	rec.failWith = serviceerror.NewUnavailable("injected: temporal down")
	r := MustRelay(t, w, rec.start)
	r.DeadAfter = 0 // the age guard alone must not save the entries
	var before []string
	for range 5 {
		tok, _ := w.MustReserve(t)
		before = append(before, tok)
	}

	stop, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.runSale(stop, context.Background(), w.ID)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, tok := range before {
			assert.Greater(c, rec.count(tok), int(2*r.MaxDelivery), "retried well past MaxDelivery")
		}
	}, 60*time.Second, 50*time.Millisecond)
	var during []string
	for range 3 {
		tok, _ := w.MustReserve(t)
		during = append(during, tok)
	}
	time.Sleep(500 * time.Millisecond)
	n, err := w.rdb.XLen(testCtx(t), w.keys.Dead).Result()
	require.NoError(t, err)
	require.Zero(t, n, "nothing dead-lettered while Temporal is unavailable")
	require.Zero(t, testutil.ToFloat64(r.Metrics.DeadLetters.WithLabelValues(strconv.FormatInt(w.ID, 10))))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Positive(c, testutil.ToFloat64(r.Metrics.OldestAge.WithLabelValues(strconv.FormatInt(w.ID, 10))), "the lag is visible")
	}, 10*time.Second, 50*time.Millisecond)

	down.Store(false)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Zero(c, w.pending(t))
		rec.mu.Lock()
		assert.Len(c, rec.started, len(before)+len(during))
		rec.mu.Unlock()
	}, 30*time.Second, 50*time.Millisecond)
	rec.mu.Lock()
	started := append([]string(nil), rec.started...)
	rec.mu.Unlock()
	// Starts of one batch run concurrently, so compare sets: the backlog
	// of the outage's start comes before the entries reserved later.
	assert.ElementsMatch(t, before, started[:len(before)], "the oldest entries start first")
	assert.ElementsMatch(t, during, started[len(before):])
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Zero(c, testutil.ToFloat64(r.Metrics.OldestAge.WithLabelValues(strconv.FormatInt(w.ID, 10))))
	}, 10*time.Second, 50*time.Millisecond)
}

// TestRelayTrimsRecordedEntries: the inbox loses an entry only once it is
// acknowledged and its reservation recorded in the database, from the head
// and in order (a recorded entry behind an unrecorded one stays); its token
// leaves the started set with it.
func TestRelayTrimsRecordedEntries(t *testing.T) {
	w := MustWarmSale(t, 10)
	ctx := testCtx(t)
	rec := newRecorder(nil)
	r := MustRelay(t, w, rec.start)
	var tokens []string
	users := map[string]int64{}
	for range 5 {
		tok, u := w.MustReserve(t)
		tokens = append(tokens, tok)
		users[tok] = u
	}
	record := func(tok string) {
		_, err := w.st.RecordReservation(ctx, domain.RedisHoldInput(tok, w.ID, users[tok], "req-"+strconv.FormatInt(users[tok], 10)))
		require.NoError(t, err)
	}
	n, err := r.Trim(ctx, w.ID)
	require.NoError(t, err)
	require.Zero(t, n, "nothing delivered yet")
	_, err = r.ReadOnce(ctx, w.ID)
	require.NoError(t, err)
	late, lateUser := w.MustReserve(t) // not delivered
	users[late] = lateUser
	for _, tok := range []string{tokens[0], tokens[1], tokens[3], late} {
		record(tok)
	}

	n, err = r.Trim(ctx, w.ID)
	require.NoError(t, err)
	require.Equal(t, 2, n, "the head up to the first unrecorded entry")
	length := func() int64 {
		l, err := w.rdb.XLen(ctx, w.keys.Inbox).Result()
		require.NoError(t, err)
		return l
	}
	require.Equal(t, int64(4), length())
	started, err := w.rdb.SMembers(ctx, w.keys.Started).Result()
	require.NoError(t, err)
	require.ElementsMatch(t, tokens[2:], started)

	record(tokens[2])
	record(tokens[4])
	n, err = r.Trim(ctx, w.ID)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.Equal(t, int64(1), length(), "the undelivered entry stays, recorded or not")
	left, err := w.rdb.XRange(ctx, w.keys.Inbox, "-", "+").Result()
	require.NoError(t, err)
	require.Equal(t, late, left[0].Values["token"])
	// The relay still reads what is left.
	got, err := r.ReadOnce(ctx, w.ID)
	require.NoError(t, err)
	require.Equal(t, 1, got)
	require.Equal(t, 1, rec.count(late))
}

// TestRelayRetiresEndedReservationsRecords: once the database has ended a
// reservation released in Redis, the relay moves its Redis records out (redisgateway.Client.Retire); a token Redis released but the database
// did not end keeps its records and leaves the ended set.
func TestRelayRetiresEndedReservationsRecords(t *testing.T) {
	w := MustWarmSale(t, 10)
	ctx := testCtx(t)
	r := MustRelay(t, w, newRecorder(nil).start)
	r.RetireAfter = time.Millisecond
	users := map[string]int64{}
	var tokens []string
	for range 3 {
		tok, u := w.MustReserve(t)
		tokens = append(tokens, tok)
		users[tok] = u
		_, err := w.st.RecordReservation(ctx, domain.RedisHoldInput(tok, w.ID, u, "req-"+strconv.FormatInt(u, 10)))
		require.NoError(t, err)
	}
	_, err := r.ReadOnce(ctx, w.ID)
	require.NoError(t, err)
	for i, tok := range tokens {
		if i < 2 {
			_, err := w.st.EndQueued(ctx, tok, domain.StatusCancelled, "user")
			require.NoError(t, err)
		}
		_, err := redisgateway.NewClient(w.rdb).Release(ctx, w.ID, users[tok], tok, true, false)
		require.NoError(t, err)
	}
	time.Sleep(5 * time.Millisecond)
	n, err := r.Retire(ctx, w.ID)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Equal(t, map[string]string{tokens[2]: "released:" + strconv.FormatInt(users[tokens[2]], 10)}, w.rdb.HGetAll(ctx, w.keys.Tokens).Val())
	require.Zero(t, w.rdb.ZCard(ctx, w.keys.Ended).Val(), "the token the database did not end leaves the ended set")
	require.ElementsMatch(t, []string{strconv.FormatInt(users[tokens[0]], 10), strconv.FormatInt(users[tokens[1]], 10)},
		w.rdb.SMembers(ctx, w.keys.Retired).Val())
}

// A warmed sale with nothing in its inbox starts no loop; a hold starts
// one, which relays it, ends once idle and drops the sale's inbox series,
// so an idle sale keeps neither a loop nor a series on the worker.
func TestRelayLoopEndsIdleAndDropsItsSeries(t *testing.T) {
	w := MustWarmSale(t, 10)
	rec := newRecorder(nil)
	r := MustRelay(t, w, rec.start)
	// A loop ends only soon after a maintenance pass, which a read
	// (Block) must leave time for.
	r.IdleAfter, r.ReclaimEvery = 500*time.Millisecond, time.Second
	busy, err := r.hasWork(testCtx(t), w.ID, true)
	require.NoError(t, err)
	require.False(t, busy, "a warm-up alone is no work")

	tok, _ := w.MustReserve(t)
	busy, err = r.hasWork(testCtx(t), w.ID, true)
	require.NoError(t, err)
	require.True(t, busy, "a hold is")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l := &saleLoops{r: r, stop: ctx, work: ctx, running: map[int64]context.CancelFunc{}}
	l.start(w.ID)
	require.Eventually(t, func() bool { return rec.count(tok) == 1 }, 20*time.Second, 50*time.Millisecond)
	require.Eventually(t, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.running) == 0
	}, 20*time.Second, 50*time.Millisecond, "the loop ends once idle")
	l.wg.Wait()
	for _, c := range []prometheus.Collector{r.Metrics.Lag, r.Metrics.Pending, r.Metrics.OldestAge} {
		require.Zero(t, testutil.CollectAndCount(c), "an idle sale's inbox series are gone")
	}
	busy, err = r.hasWork(testCtx(t), w.ID, false)
	require.NoError(t, err)
	require.False(t, busy, "relayed: no work left")
}
