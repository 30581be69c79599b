package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/store"
	"github.com/seckill/seckill/temporalgateway"
	"github.com/seckill/seckill/test/testsale"
)

// A hold the database recorded before its 202, whose inbox entry the Redis
// that went lost (here: it never had one) and whose workflow never
// started, gets its workflow within seconds of the resyncer's seeing Redis
// change identity, not at reconciliation's repair; a QUEUED hold recorded
// long before the change, which no lost write can concern, is left alone.
func TestLostHoldsStartAfterRedisChangedIdentity(t *testing.T) {
	f := newLostHoldsFixture(t)
	f.resyncer.Once(testCtx(t)) // the worker's first look: nothing recorded yet
	require.NoError(t, f.lost.Once(testCtx(t), time.Now().Add(recordsLand)))
	require.False(t, f.lost.open(), "the first look's window closes once its records have landed")

	lost := f.recordHold("lost-01")
	old := f.recordHold("old-01")
	f.age(old, 10*time.Minute)
	go f.lost.Run(f.ctx)
	time.Sleep(2 * time.Second)
	f.requireNoWorkflow(lost, "no change seen yet")

	f.resyncer.identity = "the Redis before the failover"
	changed := time.Now()
	f.resyncer.Once(testCtx(t))
	f.requireWorkflow(lost, 5*time.Second)
	t.Logf("the lost hold's workflow started %s after the resyncer's look", time.Since(changed).Round(time.Millisecond))
	f.requireNoWorkflow(old, "recorded before the window")
}

// A window's holds are those recorded until the change's records have
// landed: a hold recorded later was written to the Redis after the change,
// whose inbox the relay starts it from, so it is not started here (at a
// worker's start during a burst these were the burst's holds, each a
// second start beside the relay's). The bound is on the database's clock.
func TestLostHoldsLeaveHoldsRecordedAfterTheWindowToTheRelay(t *testing.T) {
	f := newLostHoldsFixture(t)
	changed := time.Now().Add(-time.Minute)
	f.lost.Changed(changed.Add(-lostWritesSpan), changed) // the window ends at changed + recordsLand
	inWindow := f.recordHold("in-window-01")
	f.age(inWindow, time.Minute-time.Second)
	after := f.recordHold("after-window-01")
	asked := f.countStarts()
	require.NoError(t, f.lost.Once(testCtx(t), time.Now()))
	f.requireWorkflow(inWindow, time.Second)
	f.requireNoWorkflow(after, "recorded after the window: the relay's")
	require.False(t, f.lost.open(), "the window has passed")
	require.Equal(t, []string{inWindow.Token}, asked(), "one start: the hold recorded in the window")
}

// At a worker's start nothing tells what a Redis change before it lost:
// the holds recorded shortly before its first look get their workflows.
// A start that fails is tried again on the next tick, and the window
// closes once every start succeeded and the records in flight landed.
func TestLostHoldsStartAtTheWorkersFirstLookAndRetry(t *testing.T) {
	f := newLostHoldsFixture(t)
	held := f.recordHold("start-01")
	var mu sync.Mutex
	calls := 0
	start := f.lost.Start
	f.lost.Start = func(ctx context.Context, in domain.OrderInput) (temporalgateway.StartOutcome, error) {
		mu.Lock()
		calls++
		first := calls == 1
		mu.Unlock()
		if first {
			return 0, serviceerror.NewUnavailable("injected: Temporal unavailable")
		}
		return start(ctx, in)
	}
	f.resyncer.Once(testCtx(t))
	now := time.Now()
	require.Error(t, f.lost.Once(testCtx(t), now), "the injected failure")
	f.requireNoWorkflow(held, "its start failed")
	require.True(t, f.lost.open(), "a failed start keeps the window open")

	require.NoError(t, f.lost.Once(testCtx(t), now))
	f.requireWorkflow(held, time.Second)
	require.True(t, f.lost.open(), "records may still land")
	require.NoError(t, f.lost.Once(testCtx(t), now.Add(recordsLand)))
	require.False(t, f.lost.open())
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 2, calls, "a started hold is not started again in its window")
}

// A hold the relay started since the change (its token in the started
// set), or has in hand, is not started again: at a worker's start during a
// sale the window holds the relay's backlog, which the relay starts
// meanwhile. Any other hold is started.
func TestLostHoldsSkipHoldsTheRelayStarted(t *testing.T) {
	f := newLostHoldsFixture(t)
	relayed := f.recordHold("relayed-01")
	inHand := f.recordHold("in-hand-01")
	lost := f.recordHold("lost-02")
	require.NoError(t, f.lost.Redis.MarkStarted(testCtx(t), f.sale.ID, relayed.Token))
	f.lost.InRelay = func(token string) bool { return token == inHand.Token }
	asked := f.countStarts()
	f.resyncer.Once(testCtx(t))
	require.NoError(t, f.lost.Once(testCtx(t), time.Now().Add(recordsLand)))
	f.requireWorkflow(lost, time.Second)
	f.requireNoWorkflow(relayed, "the relay started it (here: only its started mark)")
	f.requireNoWorkflow(inHand, "the relay has its entry in hand (here: only says so)")
	require.Equal(t, []string{lost.Token}, asked(), "only the hold the relay has not started is started")
}

// A hold whose entry the current inbox has not delivered is the relay's:
// at a worker's start during a burst the window's holds are the relay's
// backlog, in neither its started set nor its hand. A sale's holds wait
// until the relay has delivered the sale's inbox through the window's
// end; then a hold in neither is one the current Redis does not have, and
// only it is started.
func TestLostHoldsWaitForTheRelayToDeliverItsInbox(t *testing.T) {
	f := newLostHoldsFixture(t)
	queued := f.reserveHold("queued-01")
	lost := f.recordHold("lost-03")
	asked := f.countStarts()
	f.resyncer.Once(testCtx(t)) // the worker's first look opens a window
	now := time.Now()
	require.NoError(t, f.lost.Once(testCtx(t), now.Add(recordsLand)))
	require.Empty(t, asked(), "an entry of the sale's inbox is undelivered: its holds wait for the relay")
	require.True(t, f.lost.open(), "holds wait for the relay: the window stays open past its records' landing")

	f.relayTakes(1)
	require.NoError(t, f.lost.Once(testCtx(t), now.Add(recordsLand)))
	f.requireWorkflow(lost, time.Second)
	f.requireNoWorkflow(queued, "the relay started it (here: only marked it started)")
	require.Equal(t, []string{lost.Token}, asked(), "one start: the hold the current inbox did not have")
	require.False(t, f.lost.open())
}

// A relay that does not deliver the inbox within relayCatchUp of the
// change (stuck, or slow) does not hold the window's holds back longer:
// they are started beside it.
func TestLostHoldsStartBesideARelayThatDoesNotCatchUp(t *testing.T) {
	f := newLostHoldsFixture(t)
	changed := time.Now().Add(-relayCatchUp)
	f.lost.Changed(changed.Add(-lostWritesSpan), changed)
	queued := f.reserveHold("stuck-01")
	f.age(queued, relayCatchUp-time.Second) // recorded a second after the change
	asked := f.countStarts()
	require.NoError(t, f.lost.Once(testCtx(t), changed.Add(recordsLand)))
	require.Empty(t, asked(), "within relayCatchUp of the change the holds wait for the relay")
	require.True(t, f.lost.open())
	require.NoError(t, f.lost.Once(testCtx(t), time.Now()))
	f.requireWorkflow(queued, time.Second)
	require.Equal(t, []string{queued.Token}, asked(), "past relayCatchUp the hold is started")
	require.False(t, f.lost.open())
}

// reserveHold reserves a unit in Redis through the real reserve script
// (which appends the inbox entry) and records the hold, as the API does
// before its 202; no workflow starts.
func (f *lostHoldsFixture) reserveHold(req string) domain.OrderInput {
	user := testenv.UniqueUser()
	in := domain.RedisHoldInput(domain.DeriveToken(testKey, f.sale.ID, user, req), f.sale.ID, user, req)
	res, err := f.lost.Redis.Reserve(testCtx(f.t), redisgateway.ReserveArgs{
		SaleID: f.sale.ID, UserID: user, RequestID: req, Token: in.Token, Epoch: f.sale.ModeEpoch})
	require.NoError(f.t, err)
	require.Equal(f.t, redisgateway.OutcomeOK, res.Outcome)
	return f.record(in)
}

// relayTakes does what the relay does with n unread entries of the sale's
// inbox but the start: reads them, marks them started and acknowledges
// them.
func (f *lostHoldsFixture) relayTakes(n int64) {
	entries, err := f.lost.Redis.ReadInbox(testCtx(f.t), f.sale.ID, "lost-holds-test", false, n, -1)
	require.NoError(f.t, err)
	require.Len(f.t, entries, int(n))
	ids, tokens := make([]string, len(entries)), make([]string, len(entries))
	for i, e := range entries {
		ids[i], tokens[i] = e.ID, e.Token
	}
	acked, err := f.lost.Redis.AckInbox(testCtx(f.t), f.sale.ID, ids, tokens)
	require.NoError(f.t, err)
	require.Equal(f.t, n, acked)
}

// countStarts records the tokens the lost holds' starter asks to start;
// the answer lists them so far.
func (f *lostHoldsFixture) countStarts() func() []string {
	var mu sync.Mutex
	var asked []string
	start := f.lost.Start
	f.lost.Start = func(ctx context.Context, in domain.OrderInput) (temporalgateway.StartOutcome, error) {
		mu.Lock()
		asked = append(asked, in.Token)
		mu.Unlock()
		return start(ctx, in)
	}
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), asked...)
	}
}

// lostHoldsFixture is a warmed sale in the worker's own database, a
// resyncer that tells its lost holds' starter of Redis changes, and a
// task queue no worker polls, so a started workflow stays as started.
type lostHoldsFixture struct {
	t        *testing.T
	ctx      context.Context
	st       *store.Store
	tc       client.Client
	sale     *domain.Sale
	lost     *LostHolds
	resyncer *Resyncer
}

func newLostHoldsFixture(t *testing.T) *lostHoldsFixture {
	_, st := MustIsolatedStore(t)
	rdb := testenv.MustRedis(t)
	tc := testenv.MustTemporal(t)
	sale := testenv.MustSale(t, st, 5)
	testsale.MustWarm(t, st, rdb, sale)
	queue := fmt.Sprintf("worker-lost-holds-%d", testenv.UniqueUser())
	lost := &LostHolds{Store: st, Redis: redisgateway.NewClient(rdb), OpenSales: openSaleList(st), Every: 100 * time.Millisecond, Logger: testLogger(),
		Start: func(ctx context.Context, in domain.OrderInput) (temporalgateway.StartOutcome, error) {
			return temporalgateway.StartOutcomeOf(ctx, tc, queue, in)
		}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r := &Resyncer{Store: st, Redis: lost.Redis, Comeback: comeback(st, time.Hour, time.Minute),
		Logger: testLogger(), HoldsLost: lost.Changed}
	return &lostHoldsFixture{t: t, ctx: ctx, st: st, tc: tc, sale: sale, lost: lost, resyncer: r}
}

// recordHold records a Redis hold as the API does before its 202, with no
// inbox entry and no workflow.
func (f *lostHoldsFixture) recordHold(req string) domain.OrderInput {
	user := testenv.UniqueUser()
	return f.record(domain.RedisHoldInput(domain.DeriveToken(testKey, f.sale.ID, user, req), f.sale.ID, user, req))
}

// record records a hold as the API does before its 202.
func (f *lostHoldsFixture) record(in domain.OrderInput) domain.OrderInput {
	rec, err := f.st.RecordRedisHold(testCtx(f.t), in, f.sale.ModeEpoch, 0, true)
	require.NoError(f.t, err)
	require.True(f.t, rec.Promised())
	f.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// Leave no workflow behind; most were never started.
		_ = f.tc.TerminateWorkflow(ctx, domain.OrderWorkflowID(in.Token), "", "worker test cleanup")
	})
	return in
}

// age moves a hold's record back by d.
func (f *lostHoldsFixture) age(in domain.OrderInput, d time.Duration) {
	_, err := f.st.DB.ExecContext(testCtx(f.t), "UPDATE reservations SET created_at = created_at - INTERVAL ? SECOND WHERE token = ?",
		int64(d/time.Second), in.Token)
	require.NoError(f.t, err)
}

func (f *lostHoldsFixture) requireWorkflow(in domain.OrderInput, within time.Duration) {
	f.t.Helper()
	require.EventuallyWithT(f.t, func(c *assert.CollectT) {
		_, err := f.tc.DescribeWorkflow(testCtx(f.t), domain.OrderWorkflowID(in.Token), "")
		assert.NoError(c, err)
	}, within, 50*time.Millisecond, "the workflow of hold %s", in.Token)
}

func (f *lostHoldsFixture) requireNoWorkflow(in domain.OrderInput, why string) {
	f.t.Helper()
	_, err := f.tc.DescribeWorkflow(testCtx(f.t), domain.OrderWorkflowID(in.Token), "")
	var missing *serviceerror.NotFound
	require.True(f.t, errors.As(err, &missing), "no workflow of hold %s (%s): %v", in.Token, why, err)
}
