package workflows

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/domain"
)

// Unit tests of the stepsFoldedChange branch, as new executions run it:
// OrderWorkflowV2, which takes it without a version marker.

// MustOrderEnvFolded runs the workflow as new executions do.
func MustOrderEnvFolded(tb testing.TB) *orderEnv {
	tb.Helper()
	env := newOrderEnv(tb)
	env.wf = OrderWorkflowV2
	return env
}

func synced(st domain.OrderState) activities.Step {
	return activities.Step{State: st, Synced: true}
}

func begin(sync bool) activities.BeginRequest {
	return activities.BeginRequest{Input: testIn, Sync: sync}
}

func (e *orderEnv) beginPending() {
	e.OnActivity(a.BeginOrder, anything, begin(true)).Return(synced(stateWith(domain.StatusPendingPayment)), nil).Once()
}

func TestOrderFoldedPaid(t *testing.T) {
	env := MustOrderEnvFolded(t)
	env.beginPending()
	env.OnActivity(a.MarkPaidAndSync, anything, testIn.Token, "pay-1", true).Return(synced(paidWith("pay-1")), nil).Once()
	pay := env.update(5*time.Minute, domain.UpdatePay, "pay-1", domain.PayRequest{PaymentRef: "pay-1"})

	st := env.run(testIn)
	require.Equal(t, domain.StatusPaid, st.Status)
	requireDone(t, pay, domain.StatusPaid)
	require.Empty(t, env.upserted(), "no status upsert: the start set QUEUED, the database has the rest")
}

// The window and its grace are one timer: the order expires payGrace after
// pay_by, not before.
func TestOrderFoldedExpiresAfterTheGrace(t *testing.T) {
	env := MustOrderEnvFolded(t)
	env.beginPending()
	var releasedAt time.Time
	env.OnActivity(a.ReleaseAndSync, anything, testIn.Token, domain.StatusExpired, true).Run(func(mock.Arguments) {
		releasedAt = env.Now().UTC()
	}).Return(synced(stateWith(domain.StatusExpired)), nil).Once()
	// Just after pay_by a cancel is refused, as the window has closed.
	cancel := env.update(window+time.Second, domain.UpdateCancel, "c1", domain.CancelRequest{})

	st := env.run(testIn)
	require.Equal(t, domain.StatusExpired, st.Status)
	require.Equal(t, payBy.Add(payGrace), releasedAt)
	requireRejected(t, cancel, domain.ENotCancellable)
	require.Empty(t, env.upserted())
}

func TestOrderFoldedPayReceivedInTheWindowIsTakenInTheGrace(t *testing.T) {
	env := MustOrderEnvFolded(t)
	env.beginPending()
	env.OnActivity(a.MarkPaidAndSync, anything, testIn.Token, "in-window", true).Return(synced(paidWith("in-window")), nil).Once()
	late := env.update(window+payGrace/3, domain.UpdatePay, "p0", domain.PayRequest{PaymentRef: "after", ReceivedAt: payBy.Add(time.Millisecond)})
	pay := env.update(window+payGrace/2, domain.UpdatePay, "p1", domain.PayRequest{PaymentRef: "in-window", ReceivedAt: payBy.Add(-time.Second)})

	st := env.run(testIn)
	require.Equal(t, domain.StatusPaid, st.Status)
	requireRejected(t, late, domain.ENotPayable)
	requireDone(t, pay, domain.StatusPaid)
	env.AssertNotCalled(t, "ReleaseAndSync", anything, anything, anything, anything)
}

// Once the grace is over a payment, even one received in the window, is
// refused while the release runs.
func TestOrderFoldedPayAfterTheGraceRejected(t *testing.T) {
	env := MustOrderEnvFolded(t)
	env.beginPending()
	env.OnActivity(a.ReleaseAndSync, anything, testIn.Token, domain.StatusExpired, true).After(10*time.Second).Return(synced(stateWith(domain.StatusExpired)), nil).Once()
	pay := env.update(window+payGrace+time.Second, domain.UpdatePay, "p1", domain.PayRequest{PaymentRef: "late", ReceivedAt: payBy.Add(-time.Second)})

	st := env.run(testIn)
	require.Equal(t, domain.StatusExpired, st.Status)
	requireRejected(t, pay, domain.ENotPayable)
}

// A cancel accepted before the order exists ends the reservation in the
// one step.
func TestOrderFoldedCancelledWhileQueued(t *testing.T) {
	env := MustOrderEnvFolded(t)
	req := activities.BeginRequest{Input: testIn, Cancel: true, CancelReason: "changed my mind", Sync: true}
	env.OnActivity(a.BeginOrder, anything, req).Return(synced(stateWith(domain.StatusCancelled)), nil).Once()
	cancel := env.update(0, domain.UpdateCancel, "c1", domain.CancelRequest{Reason: "changed my mind"})

	st := env.run(testIn)
	require.Equal(t, domain.StatusCancelled, st.Status)
	requireDone(t, cancel, domain.StatusCancelled)
}

func TestOrderFoldedCancelledWhilePending(t *testing.T) {
	env := MustOrderEnvFolded(t)
	env.beginPending()
	env.OnActivity(a.ReleaseAndSync, anything, testIn.Token, domain.StatusCancelled, true).After(3*time.Second).Return(synced(stateWith(domain.StatusCancelled)), nil).Once()
	first := env.update(time.Minute, domain.UpdateCancel, "c1", domain.CancelRequest{})
	pay := env.update(time.Minute+time.Second, domain.UpdatePay, "p1", domain.PayRequest{PaymentRef: "p1"})

	st := env.run(testIn)
	require.Equal(t, domain.StatusCancelled, st.Status)
	requireDone(t, first, domain.StatusCancelled)
	requireRejected(t, pay, domain.ENotPayable)
}

func TestOrderFoldedNotPayableRefused(t *testing.T) {
	env := MustOrderEnvFolded(t)
	env.beginPending()
	env.OnActivity(a.MarkPaidAndSync, anything, testIn.Token, "p1", true).
		Return(activities.Step{}, temporal.NewNonRetryableApplicationError("no", domain.ENotPayable, nil)).Once()
	env.OnActivity(a.ReleaseAndSync, anything, testIn.Token, domain.StatusExpired, true).Return(synced(stateWith(domain.StatusExpired)), nil).Once()
	pay := env.update(time.Minute, domain.UpdatePay, "p1", domain.PayRequest{PaymentRef: "p1"})

	st := env.run(testIn)
	require.Equal(t, domain.StatusExpired, st.Status)
	require.True(t, pay.accepted)
	require.Error(t, pay.err)
}

// Redis away when the order is placed: the step answers without Redis, the
// Redis part retries as an activity beside the payment wait, and the
// payment's step (which finds that one running) writes only the database
// and then waits for it before its own SyncRedis.
func TestOrderFoldedRedisRetriesBesideThePaymentWait(t *testing.T) {
	env := MustOrderEnvFolded(t)
	redisBack := t0.Add(10 * time.Second)
	shortPayBy := t0.Add(5 * time.Second)
	pending := stateWith(domain.StatusPendingPayment)
	pending.PayBy = &shortPayBy
	paid := paidWith("ref-away")
	paid.PayBy = &shortPayBy
	env.OnActivity(a.BeginOrder, anything, begin(true)).Return(activities.Step{State: pending, RedisError: "redis away"}, nil).Once()
	var mu sync.Mutex
	var synced []time.Time
	env.OnActivity(a.MarkPaidAndSync, anything, testIn.Token, "ref-away", false).Return(activities.Step{State: paid}, nil).Once()
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
	require.Len(t, synced, 2, "the placement's Redis step, then the payment's")
	require.Equal(t, synced[0], synced[1], "the payment's Redis step waited for the earlier one")
}

// A rerun finds the reservation ended: the step only syncs Redis.
func TestOrderFoldedRerunFindsEnded(t *testing.T) {
	env := MustOrderEnvFolded(t)
	env.OnActivity(a.BeginOrder, anything, begin(true)).Return(synced(stateWith(domain.StatusFailed)), nil).Once()

	st := env.run(testIn)
	require.Equal(t, domain.StatusFailed, st.Status)
}
