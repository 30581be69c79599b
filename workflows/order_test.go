package workflows

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/temporalgateway"
)

// Unit tests of OrderWorkflow: time-skipping test environment, activities
// mocked. The real activities run in integration_test.go.

var (
	t0       = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	window   = 15 * time.Minute
	payBy    = t0.Add(window)
	testIn   = domain.OrderInput{Token: "7-0123456789abcdef0123456789abcdef", SaleID: 7, UserID: 42, RequestID: "req-00001", Path: domain.PathRedis}
	anything = mock.Anything
)

func stateWith(s domain.ReservationStatus) domain.OrderState {
	st := domain.OrderState{Token: testIn.Token, SaleID: testIn.SaleID, UserID: testIn.UserID, Status: s}
	if s != domain.StatusQueued && s != domain.StatusFailed {
		pb := payBy
		st.OrderNo, st.AmountCents, st.PayBy = "01HZZZZZZZZZZZZZZZZZZZZZZZ", 1999, &pb
	}
	return st
}

func paidWith(ref string) domain.OrderState {
	st := stateWith(domain.StatusPaid)
	st.PaymentRef = ref
	return st
}

// orderEnv is a test environment with the order workflow and activities
// registered and the search attribute upserts recorded.
type orderEnv struct {
	*testsuite.TestWorkflowEnvironment
	t *testing.T
	// wf is the workflow run: OrderWorkflow, or OrderWorkflowV2 as new
	// orders start.
	wf any

	mu       sync.Mutex
	statuses []string
}

// MustOrderEnv runs the workflow's DefaultVersion branches (the commands
// of histories recorded before redisFromStateChange); MustOrderEnvV1 those
// of histories recorded before stepsFoldedChange; MustOrderEnvFolded the
// current ones (folded_test.go).
func MustOrderEnv(tb testing.TB) *orderEnv {
	tb.Helper()
	env := MustOrderEnvV1(tb)
	env.OnGetVersion(redisFromStateChange, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	return env
}

// MustOrderEnvV1 runs the workflow at redisFromStateChange, before
// stepsFoldedChange.
func MustOrderEnvV1(tb testing.TB) *orderEnv {
	tb.Helper()
	env := newOrderEnv(tb)
	env.OnGetVersion(stepsFoldedChange, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	return env
}

func newOrderEnv(tb testing.TB) *orderEnv {
	tb.Helper()
	t, ok := tb.(*testing.T)
	if !ok {
		tb.Fatal("MustOrderEnv needs a *testing.T")
	}
	var s testsuite.WorkflowTestSuite
	env := &orderEnv{TestWorkflowEnvironment: s.NewTestWorkflowEnvironment(), t: t, wf: OrderWorkflow}
	env.SetStartTime(t0)
	RegisterOrderTypes(env)
	env.RegisterActivity(&activities.Activities{})
	env.OnUpsertTypedSearchAttributes(anything).Run(func(args mock.Arguments) {
		sa := args.Get(0).(temporal.SearchAttributes)
		v, _ := sa.GetKeyword(temporalgateway.OrderStatusKey)
		env.mu.Lock()
		env.statuses = append(env.statuses, v)
		env.mu.Unlock()
	}).Return(nil).Maybe()
	return env
}

// happyPath mocks recording and placing the order.
func (e *orderEnv) happyPath() {
	e.OnActivity(a.RecordReservation, anything, testIn).Return(stateWith(domain.StatusQueued), nil).Once()
	e.OnActivity(a.PlaceOrder, anything, testIn.Token).Return(stateWith(domain.StatusPendingPayment), nil).Once()
	e.OnActivity(a.RedisAdvance, anything, testIn.SaleID, testIn.Token, domain.TokenOrdered, []string{domain.TokenHeld}).Return(true, nil).Once()
}

func (e *orderEnv) payMocks(ref string) {
	e.OnActivity(a.MarkPaid, anything, testIn.Token, ref).Return(paidWith(ref), nil).Once()
	e.OnActivity(a.RedisAdvance, anything, testIn.SaleID, testIn.Token, domain.TokenPaid, []string{domain.TokenOrdered, domain.TokenHeld}).Return(true, nil).Once()
}

func (e *orderEnv) releaseMocks(to domain.ReservationStatus) {
	e.OnActivity(a.ReleaseOrder, anything, testIn.Token, to).Return(stateWith(to), nil).Once()
	e.OnActivity(a.RedisRelease, anything, testIn.SaleID, testIn.UserID, testIn.Token, true).Return(true, nil).Once()
}

// updateResult collects one update's outcome.
type updateResult struct {
	accepted bool
	rejected error
	state    domain.OrderState
	err      error
	done     bool
}

func (e *orderEnv) update(at time.Duration, name, id string, arg any) *updateResult {
	r := &updateResult{}
	e.RegisterDelayedCallback(func() {
		e.UpdateWorkflow(name, id, &testsuite.TestUpdateCallback{
			OnAccept: func() { r.accepted = true },
			OnReject: func(err error) { r.rejected = err },
			OnComplete: func(v any, err error) {
				r.done, r.err = true, err
				if st, ok := v.(domain.OrderState); ok {
					r.state = st
				}
			},
		}, arg)
	}, at)
	return r
}

func (e *orderEnv) run(in domain.OrderInput) domain.OrderState {
	e.t.Helper()
	e.ExecuteWorkflow(e.wf, in)
	require.True(e.t, e.IsWorkflowCompleted())
	require.NoError(e.t, e.GetWorkflowError())
	var st domain.OrderState
	require.NoError(e.t, e.GetWorkflowResult(&st))
	e.AssertExpectations(e.t)
	return st
}

func (e *orderEnv) upserted() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.statuses...)
}

func requireRejected(t *testing.T, r *updateResult, code string) {
	t.Helper()
	require.False(t, r.accepted, "update was accepted")
	require.Error(t, r.rejected)
	require.True(t, strings.HasPrefix(rootMessage(r.rejected), code+":"), "rejection %q does not start with %s", r.rejected, code)
}

func requireDone(t *testing.T, r *updateResult, want domain.ReservationStatus) {
	t.Helper()
	require.True(t, r.accepted, "update rejected: %v", r.rejected)
	require.True(t, r.done)
	require.NoError(t, r.err)
	require.Equal(t, want, r.state.Status)
}

func rootMessage(err error) string {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return ae.Message()
	}
	return err.Error()
}

func TestOrderPaidInTime(t *testing.T) {
	env := MustOrderEnv(t)
	env.happyPath()
	env.payMocks("pay-1")
	pay := env.update(5*time.Minute, domain.UpdatePay, "pay-1", domain.PayRequest{PaymentRef: "pay-1"})

	st := env.run(testIn)
	require.Equal(t, domain.StatusPaid, st.Status)
	require.Equal(t, "pay-1", st.PaymentRef)
	requireDone(t, pay, domain.StatusPaid)
	require.Equal(t, []string{"PENDING_PAYMENT", "PAID"}, env.upserted())
	env.AssertNotCalled(t, "ReleaseOrder", anything, anything, anything)
}

func TestOrderExpired(t *testing.T) {
	env := MustOrderEnv(t)
	env.happyPath()
	env.releaseMocks(domain.StatusExpired)

	st := env.run(testIn)
	require.Equal(t, domain.StatusExpired, st.Status)
	require.Equal(t, []string{"PENDING_PAYMENT", "EXPIRED"}, env.upserted())
}

func TestOrderCancelledWhileQueued(t *testing.T) {
	env := MustOrderEnv(t)
	// Recording takes a while, so the cancel arrives while QUEUED.
	env.OnActivity(a.RecordReservation, anything, testIn).After(2*time.Second).Return(stateWith(domain.StatusQueued), nil).Once()
	env.OnActivity(a.EndQueued, anything, testIn.Token, domain.StatusCancelled, "changed my mind").Return(stateWith(domain.StatusCancelled), nil).Once()
	env.OnActivity(a.RedisRelease, anything, testIn.SaleID, testIn.UserID, testIn.Token, true).Return(true, nil).Once()
	cancel := env.update(time.Second, domain.UpdateCancel, "c1", domain.CancelRequest{Reason: "changed my mind"})

	st := env.run(testIn)
	require.Equal(t, domain.StatusCancelled, st.Status)
	requireDone(t, cancel, domain.StatusCancelled)
	env.AssertNotCalled(t, "PlaceOrder", anything, anything)
	require.Equal(t, []string{"CANCELLED"}, env.upserted())
}

func TestOrderCancelledWhilePending(t *testing.T) {
	env := MustOrderEnv(t)
	env.happyPath()
	// The release takes a while: a repeated cancel during it is accepted
	// and answers once the unit is back.
	env.OnActivity(a.ReleaseOrder, anything, testIn.Token, domain.StatusCancelled).After(3*time.Second).Return(stateWith(domain.StatusCancelled), nil).Once()
	env.OnActivity(a.RedisRelease, anything, testIn.SaleID, testIn.UserID, testIn.Token, true).Return(true, nil).Once()
	first := env.update(time.Minute, domain.UpdateCancel, "c1", domain.CancelRequest{})
	again := env.update(time.Minute+time.Second, domain.UpdateCancel, "c2", domain.CancelRequest{})
	expire := env.update(time.Minute+time.Second, domain.UpdateExpire, "e1", domain.CancelRequest{})
	pay := env.update(time.Minute+time.Second, domain.UpdatePay, "p1", domain.PayRequest{PaymentRef: "p1"})

	st := env.run(testIn)
	require.Equal(t, domain.StatusCancelled, st.Status)
	requireDone(t, first, domain.StatusCancelled)
	requireDone(t, again, domain.StatusCancelled)
	requireRejected(t, expire, domain.ENotCancellable)
	requireRejected(t, pay, domain.ENotPayable)
	require.Equal(t, []string{"PENDING_PAYMENT", "CANCELLED"}, env.upserted())
}

func TestOrderOperatorExpire(t *testing.T) {
	env := MustOrderEnv(t)
	env.happyPath()
	env.releaseMocks(domain.StatusExpired)
	expire := env.update(time.Minute, domain.UpdateExpire, "e1", domain.CancelRequest{Reason: "operator"})

	st := env.run(testIn)
	require.Equal(t, domain.StatusExpired, st.Status)
	requireDone(t, expire, domain.StatusExpired)
}

// A pay accepted just before the window closes wins, even though the timer
// fires while the payment is being recorded.
func TestOrderPayAcceptedBeforeTimerWins(t *testing.T) {
	env := MustOrderEnv(t)
	env.happyPath()
	env.OnActivity(a.MarkPaid, anything, testIn.Token, "late-but-ok").After(5*time.Second).Return(paidWith("late-but-ok"), nil).Once()
	env.OnActivity(a.RedisAdvance, anything, testIn.SaleID, testIn.Token, domain.TokenPaid, []string{domain.TokenOrdered, domain.TokenHeld}).Return(true, nil).Once()
	pay := env.update(window-time.Second, domain.UpdatePay, "late-but-ok", domain.PayRequest{PaymentRef: "late-but-ok"})
	// A cancel while the payment is being recorded is refused.
	cancel := env.update(window-500*time.Millisecond, domain.UpdateCancel, "c1", domain.CancelRequest{})

	st := env.run(testIn)
	require.Equal(t, domain.StatusPaid, st.Status)
	requireDone(t, pay, domain.StatusPaid)
	requireRejected(t, cancel, domain.ENotCancellable)
	env.AssertNotCalled(t, "ReleaseOrder", anything, anything, anything)
	env.AssertNotCalled(t, "RedisRelease", anything, anything, anything, anything, anything)
}

// A pay that arrives after the timer fired is refused and the order expires.
func TestOrderPayAfterTimerRejected(t *testing.T) {
	env := MustOrderEnv(t)
	env.happyPath()
	// The release is slow, so the workflow still runs when the pay arrives.
	env.OnActivity(a.ReleaseOrder, anything, testIn.Token, domain.StatusExpired).After(10*time.Second).Return(stateWith(domain.StatusExpired), nil).Once()
	env.OnActivity(a.RedisRelease, anything, testIn.SaleID, testIn.UserID, testIn.Token, true).Return(true, nil).Once()
	pay := env.update(window+time.Second, domain.UpdatePay, "too-late", domain.PayRequest{PaymentRef: "too-late"})

	st := env.run(testIn)
	require.Equal(t, domain.StatusExpired, st.Status)
	requireRejected(t, pay, domain.ENotPayable)
	env.AssertNotCalled(t, "MarkPaid", anything, anything, anything)
}

// A payment the API received before pay_by but delivered just after the
// window closed (a slow instance, a worker catching up) is taken in the
// grace; one received after pay_by is refused, and the order expires once
// the grace is over.
func TestOrderPayReceivedInTheWindowIsTakenInTheGrace(t *testing.T) {
	env := MustOrderEnv(t)
	env.happyPath()
	env.payMocks("in-window")
	pay := env.update(window+payGrace/2, domain.UpdatePay, "p1", domain.PayRequest{PaymentRef: "in-window", ReceivedAt: payBy.Add(-time.Second)})
	st := env.run(testIn)
	require.Equal(t, domain.StatusPaid, st.Status)
	requireDone(t, pay, domain.StatusPaid)
	env.AssertNotCalled(t, "ReleaseOrder", anything, anything, anything)
}

func TestOrderPayReceivedAfterTheWindowIsRefusedInTheGrace(t *testing.T) {
	env := MustOrderEnv(t)
	env.happyPath()
	env.releaseMocks(domain.StatusExpired)
	pay := env.update(window+payGrace/2, domain.UpdatePay, "p1", domain.PayRequest{PaymentRef: "too-late", ReceivedAt: payBy.Add(time.Millisecond)})
	st := env.run(testIn)
	require.Equal(t, domain.StatusExpired, st.Status)
	requireRejected(t, pay, domain.ENotPayable)
	env.AssertNotCalled(t, "MarkPaid", anything, anything, anything)
}

// Histories recorded before the grace expire at pay_by, as they did.
func TestOrderWithoutTheGraceExpiresAtPayBy(t *testing.T) {
	env := MustOrderEnv(t)
	env.OnGetVersion(payGraceChange, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	env.happyPath()
	// The release is slow, so the workflow still runs when the pay arrives.
	env.OnActivity(a.ReleaseOrder, anything, testIn.Token, domain.StatusExpired).After(10*time.Second).Return(stateWith(domain.StatusExpired), nil).Once()
	env.OnActivity(a.RedisRelease, anything, testIn.SaleID, testIn.UserID, testIn.Token, true).Return(true, nil).Once()
	pay := env.update(window+payGrace/2, domain.UpdatePay, "p1", domain.PayRequest{PaymentRef: "in-window", ReceivedAt: payBy.Add(-time.Second)})
	st := env.run(testIn)
	require.Equal(t, domain.StatusExpired, st.Status)
	requireRejected(t, pay, domain.ENotPayable)
}

// The same payment again returns the same state; another ref is refused.
func TestOrderPaymentReplay(t *testing.T) {
	env := MustOrderEnv(t)
	env.happyPath()
	env.OnActivity(a.MarkPaid, anything, testIn.Token, "ref-1").Return(paidWith("ref-1"), nil).Once()
	// Redis is slow to follow, so the workflow is still open for the
	// replays below.
	env.OnActivity(a.RedisAdvance, anything, testIn.SaleID, testIn.Token, domain.TokenPaid, []string{domain.TokenOrdered, domain.TokenHeld}).After(time.Minute).Return(true, nil).Once()
	first := env.update(time.Minute, domain.UpdatePay, "u1", domain.PayRequest{PaymentRef: "ref-1"})
	replay := env.update(time.Minute+time.Second, domain.UpdatePay, "u2", domain.PayRequest{PaymentRef: "ref-1"})
	other := env.update(time.Minute+2*time.Second, domain.UpdatePay, "u3", domain.PayRequest{PaymentRef: "ref-2"})
	cancel := env.update(time.Minute+3*time.Second, domain.UpdateCancel, "c1", domain.CancelRequest{})

	st := env.run(testIn)
	require.Equal(t, domain.StatusPaid, st.Status)
	requireDone(t, first, domain.StatusPaid)
	requireDone(t, replay, domain.StatusPaid)
	require.Equal(t, first.state, replay.state)
	requireRejected(t, other, domain.ENotPayable)
	requireRejected(t, cancel, domain.ENotCancellable)
}

func TestOrderPayBeforeOrderRejected(t *testing.T) {
	env := MustOrderEnv(t)
	env.OnActivity(a.RecordReservation, anything, testIn).After(2*time.Second).Return(stateWith(domain.StatusQueued), nil).Once()
	env.OnActivity(a.PlaceOrder, anything, testIn.Token).Return(stateWith(domain.StatusPendingPayment), nil).Once()
	env.OnActivity(a.RedisAdvance, anything, testIn.SaleID, testIn.Token, domain.TokenOrdered, []string{domain.TokenHeld}).Return(true, nil).Once()
	env.releaseMocks(domain.StatusExpired)
	pay := env.update(time.Second, domain.UpdatePay, "early", domain.PayRequest{PaymentRef: "early"})

	st := env.run(testIn)
	require.Equal(t, domain.StatusExpired, st.Status)
	requireRejected(t, pay, domain.ENotPayable)
}

// The order transaction commits but its answer is lost: the retry finds
// the order and returns it, so there is one order and one Redis advance.
func TestOrderPlaceRetriedAfterCommit(t *testing.T) {
	env := MustOrderEnv(t)
	env.OnActivity(a.RecordReservation, anything, testIn).Return(stateWith(domain.StatusQueued), nil).Once()
	env.OnActivity(a.PlaceOrder, anything, testIn.Token).Return(domain.OrderState{}, errors.New("connection reset after commit")).Once()
	env.OnActivity(a.PlaceOrder, anything, testIn.Token).Return(stateWith(domain.StatusPendingPayment), nil).Once()
	env.OnActivity(a.RedisAdvance, anything, testIn.SaleID, testIn.Token, domain.TokenOrdered, []string{domain.TokenHeld}).Return(true, nil).Once()
	env.payMocks("pay-1")
	env.update(time.Minute, domain.UpdatePay, "pay-1", domain.PayRequest{PaymentRef: "pay-1"})

	st := env.run(testIn)
	require.Equal(t, domain.StatusPaid, st.Status)
	require.Equal(t, stateWith(domain.StatusPendingPayment).OrderNo, st.OrderNo)
	env.AssertNumberOfCalls(t, "PlaceOrder", 2)
	env.AssertNumberOfCalls(t, "RedisAdvance", 2) // ordered once, paid once
}

// Each refusal is read under its domain code and under the type name that
// histories recorded before the codes carry.
func TestOrderNoStockFailsWithoutRestore(t *testing.T) {
	for _, typ := range []string{domain.ESoldOut, "NoStock"} {
		t.Run(typ, func(t *testing.T) {
			env := MustOrderEnv(t)
			env.OnActivity(a.RecordReservation, anything, testIn).Return(stateWith(domain.StatusQueued), nil).Once()
			env.OnActivity(a.PlaceOrder, anything, testIn.Token).
				Return(domain.OrderState{}, temporal.NewNonRetryableApplicationError("no stock", typ, nil)).Once()
			env.OnActivity(a.EndQueued, anything, testIn.Token, domain.StatusFailed, domain.FailReasonNoStock).Return(stateWith(domain.StatusFailed), nil).Once()
			env.OnActivity(a.RedisRelease, anything, testIn.SaleID, testIn.UserID, testIn.Token, false).Return(true, nil).Once()

			st := env.run(testIn)
			require.Equal(t, domain.StatusFailed, st.Status)
			require.Equal(t, domain.FailReasonNoStock, st.FailReason)
			env.AssertNumberOfCalls(t, "PlaceOrder", 1) // non-retryable
			require.Equal(t, []string{"FAILED"}, env.upserted())
		})
	}
}

// Compensation after a failed order: the user's unit is already taken by
// another order, so this hold's unit goes back on sale.
func TestOrderAlreadyPurchasedCompensates(t *testing.T) {
	for _, typ := range []string{domain.EAlreadyPurchased, "AlreadyPurchased"} {
		t.Run(typ, func(t *testing.T) {
			env := MustOrderEnv(t)
			env.OnActivity(a.RecordReservation, anything, testIn).Return(stateWith(domain.StatusQueued), nil).Once()
			env.OnActivity(a.PlaceOrder, anything, testIn.Token).
				Return(domain.OrderState{}, temporal.NewNonRetryableApplicationError("dup", typ, nil)).Once()
			env.OnActivity(a.EndQueued, anything, testIn.Token, domain.StatusFailed, domain.FailReasonAlreadyPurchased).Return(stateWith(domain.StatusFailed), nil).Once()
			env.OnActivity(a.RedisRelease, anything, testIn.SaleID, testIn.UserID, testIn.Token, true).Return(true, nil).Once()

			st := env.run(testIn)
			require.Equal(t, domain.StatusFailed, st.Status)
			require.Equal(t, domain.FailReasonAlreadyPurchased, st.FailReason)
		})
	}
}

// A rerun after terminate finds the order placed and goes straight to the
// wait, with the pay_by decided when the order was placed.
func TestOrderRerunAfterTerminate(t *testing.T) {
	env := MustOrderEnv(t)
	pending := stateWith(domain.StatusPendingPayment)
	pb := t0.Add(2 * time.Minute)
	pending.PayBy = &pb
	env.OnActivity(a.RecordReservation, anything, testIn).Return(pending, nil).Once()
	env.OnActivity(a.RedisAdvance, anything, testIn.SaleID, testIn.Token, domain.TokenOrdered, []string{domain.TokenHeld}).Return(false, nil).Once()
	expired := stateWith(domain.StatusExpired)
	expired.PayBy = &pb
	var releasedAt time.Time
	env.OnActivity(a.ReleaseOrder, anything, testIn.Token, domain.StatusExpired).Run(func(mock.Arguments) {
		releasedAt = env.Now().UTC()
	}).Return(expired, nil).Once()
	env.OnActivity(a.RedisRelease, anything, testIn.SaleID, testIn.UserID, testIn.Token, true).Return(true, nil).Once()
	var before domain.OrderState
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(domain.QueryStatus)
		require.NoError(t, err)
		require.NoError(t, v.Get(&before))
	}, time.Minute)

	st := env.run(testIn)
	require.Equal(t, domain.StatusPendingPayment, before.Status)
	require.Equal(t, domain.StatusExpired, st.Status)
	env.AssertNotCalled(t, "PlaceOrder", anything, anything)
	// Expired at the recorded pay_by, not a full window after the rerun.
	require.False(t, releasedAt.Before(pb))
	require.Less(t, releasedAt.Sub(pb), time.Minute)
	require.Equal(t, []string{"PENDING_PAYMENT", "EXPIRED"}, env.upserted())
}

// A rerun that finds the reservation ended finishes the Redis side (both
// scripts are no-ops when it was done) and ends.
func TestOrderRerunFindsEnded(t *testing.T) {
	env := MustOrderEnv(t)
	env.OnActivity(a.RecordReservation, anything, testIn).Return(stateWith(domain.StatusCancelled), nil).Once()
	env.OnActivity(a.RedisRelease, anything, testIn.SaleID, testIn.UserID, testIn.Token, true).Return(false, nil).Once()

	st := env.run(testIn)
	require.Equal(t, domain.StatusCancelled, st.Status)
	env.AssertNotCalled(t, "PlaceOrder", anything, anything)
}

// Database-path reservations have no Redis hold: no Redis activity runs.
func TestOrderDatabasePathSkipsRedis(t *testing.T) {
	env := MustOrderEnv(t)
	in := testIn
	in.Path, in.Deducted = domain.PathDatabase, true
	env.OnActivity(a.RecordReservation, anything, in).Return(stateWith(domain.StatusPendingPayment), nil).Once()
	env.OnActivity(a.ReleaseOrder, anything, testIn.Token, domain.StatusCancelled).Return(stateWith(domain.StatusCancelled), nil).Once()
	cancel := env.update(time.Minute, domain.UpdateCancel, "c1", domain.CancelRequest{})

	st := env.run(in)
	require.Equal(t, domain.StatusCancelled, st.Status)
	requireDone(t, cancel, domain.StatusCancelled)
	env.AssertNotCalled(t, "RedisRelease", anything, anything, anything, anything, anything)
	env.AssertNotCalled(t, "RedisAdvance", anything, anything, anything, anything, anything)
}

// At redisFromStateChange every Redis step is one SyncRedis, which reads
// the token's state then: a database-path order released after a resync
// (Redis then holds its token and buyer mark) releases Redis too.
func TestOrderV1DatabasePathReleaseSyncsRedis(t *testing.T) {
	env := MustOrderEnvV1(t)
	in := testIn
	in.Path, in.Deducted = domain.PathDatabase, true
	env.OnActivity(a.RecordReservation, anything, in).Return(stateWith(domain.StatusPendingPayment), nil).Once()
	env.OnActivity(a.SyncRedis, anything, testIn.Token).Return(false, nil).Once() // rerun-style advance to ordered
	env.OnActivity(a.ReleaseOrder, anything, testIn.Token, domain.StatusCancelled).Return(stateWith(domain.StatusCancelled), nil).Once()
	env.OnActivity(a.SyncRedis, anything, testIn.Token).Return(true, nil).Once() // the release
	cancel := env.update(time.Minute, domain.UpdateCancel, "c1", domain.CancelRequest{})

	st := env.run(in)
	require.Equal(t, domain.StatusCancelled, st.Status)
	requireDone(t, cancel, domain.StatusCancelled)
	env.AssertNumberOfCalls(t, "SyncRedis", 2)
	env.AssertNotCalled(t, "RedisRelease", anything, anything, anything, anything, anything)
}

// A rerun that finds its reservation FAILED syncs Redis from the stored
// state (SyncToken restores an already_purchased hold's unit), where the
// DefaultVersion branch released it without its unit.
func TestOrderV1RerunFindsFailedSyncsRedis(t *testing.T) {
	env := MustOrderEnvV1(t)
	env.OnActivity(a.RecordReservation, anything, testIn).Return(stateWith(domain.StatusFailed), nil).Once()
	env.OnActivity(a.SyncRedis, anything, testIn.Token).Return(true, nil).Once()

	st := env.run(testIn)
	require.Equal(t, domain.StatusFailed, st.Status)
	env.AssertNotCalled(t, "RedisRelease", anything, anything, anything, anything, anything)
}

// The whole life of a Redis hold at version 1: ordered, paid, each Redis
// step one SyncRedis.
func TestOrderV1PaidSyncsRedis(t *testing.T) {
	env := MustOrderEnvV1(t)
	env.OnActivity(a.RecordReservation, anything, testIn).Return(stateWith(domain.StatusQueued), nil).Once()
	env.OnActivity(a.PlaceOrder, anything, testIn.Token).Return(stateWith(domain.StatusPendingPayment), nil).Once()
	env.OnActivity(a.MarkPaid, anything, testIn.Token, "ref-1").Return(paidWith("ref-1"), nil).Once()
	env.OnActivity(a.SyncRedis, anything, testIn.Token).Return(true, nil).Twice()
	pay := env.update(time.Minute, domain.UpdatePay, "p1", domain.PayRequest{PaymentRef: "ref-1"})

	st := env.run(testIn)
	require.Equal(t, domain.StatusPaid, st.Status)
	require.True(t, pay.done)
	require.NoError(t, pay.err)
	env.AssertNumberOfCalls(t, "SyncRedis", 2)
	env.AssertNotCalled(t, "RedisAdvance", anything, anything, anything, anything, anything)
}

// At redisStepYieldsChange a Redis step that finds Redis away retries as an
// activity beside the payment wait: a payment in the window is accepted
// and recorded, and its own Redis step runs only after the earlier one
// succeeded (a later step reads a later state and must not be overtaken).
func TestOrderRedisStepRetriesBesideThePaymentWait(t *testing.T) {
	env := MustOrderEnvV1(t)
	redisBack := t0.Add(10 * time.Second)
	pending := stateWith(domain.StatusPendingPayment)
	shortPayBy := t0.Add(5 * time.Second)
	pending.PayBy = &shortPayBy
	paid := paidWith("ref-away")
	paid.PayBy = &shortPayBy
	env.OnActivity(a.RecordReservation, anything, testIn).Return(stateWith(domain.StatusQueued), nil).Once()
	env.OnActivity(a.PlaceOrder, anything, testIn.Token).Return(pending, nil).Once()
	var mu sync.Mutex
	var synced []time.Time // successful Redis steps, by workflow time
	markPaidAt := time.Time{}
	env.OnActivity(a.MarkPaid, anything, testIn.Token, "ref-away").Return(func(_ context.Context, _, _ string) (domain.OrderState, error) {
		mu.Lock()
		defer mu.Unlock()
		markPaidAt = env.Now()
		return paid, nil
	}).Once()
	env.OnActivity(a.SyncRedis, anything, testIn.Token).Return(func(_ context.Context, _ string) (bool, error) {
		now := env.Now()
		if now.Before(redisBack) {
			return false, errors.New("redis away")
		}
		mu.Lock()
		defer mu.Unlock()
		synced = append(synced, now)
		return true, nil
	})
	pay := env.update(3*time.Second, domain.UpdatePay, "p1", domain.PayRequest{PaymentRef: "ref-away"})

	st := env.run(testIn)
	require.Equal(t, domain.StatusPaid, st.Status)
	requireDone(t, pay, domain.StatusPaid)
	require.True(t, markPaidAt.Before(shortPayBy), "the payment was recorded at %s, in its window", markPaidAt.Sub(t0))
	require.Len(t, synced, 2, "the step after placing the order, then the payment's")
	// Beside it, the payment's step would have retried on its own clock
	// and succeeded at another time; behind it, it succeeds at once.
	require.Equal(t, synced[0], synced[1], "the payment's Redis step waited for the earlier one (successes at %s and %s)", synced[0].Sub(t0), synced[1].Sub(t0))
	env.AssertNotCalled(t, "ReleaseOrder", anything, anything, anything)
}
