package activities

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/dbfault"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/store"
)

// The order steps need no read-back of their own: a step whose database
// answer was lost fails retryable, Temporal runs it again, and the rerun
// finds what the first attempt committed (the reservation's status guards
// every transition, the payment_ref the payment). Each case loses one
// answer after the server committed it and runs the step again, as
// Temporal does: one order, one deduction, one payment, one release.

// lostActivities are activities on a store whose answers layer loses.
func lostActivities(t *testing.T) (*Activities, *dbfault.Layer) {
	t.Helper()
	layer := &dbfault.Layer{}
	st := testenv.MustStore(t, store.WithConnectorLayer(layer.Wrap))
	return &Activities{Store: st, Redis: redisgateway.NewClient(testenv.MustRedis(t))}, layer
}

// requireRetryable checks err is one Temporal retries.
func requireRetryable(t *testing.T, err error) {
	t.Helper()
	require.Error(t, err)
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		require.False(t, ae.NonRetryable(), "%v", err)
	}
	require.NotEqual(t, store.FaultNone, store.Classify(err), "%v", err)
}

func countRows(t *testing.T, a *Activities, table, where string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, a.Store.DB.QueryRowContext(testCtx(t), "SELECT COUNT(*) FROM "+table+" WHERE "+where, args...).Scan(&n))
	return n
}

func TestStepsRetriedAfterALostAnswerApplyOnce(t *testing.T) {
	a, layer := lostActivities(t)
	ctx := testCtx(t)
	in := mustHeldOrder(t, a, 2)

	layer.Lose(dbfault.Containing("INSERT INTO orders", in.Token), dbfault.AfterApply, 1)
	_, err := a.BeginOrder(ctx, BeginRequest{Input: in, Sync: true})
	requireRetryable(t, err)
	begun, err := a.BeginOrder(ctx, BeginRequest{Input: in, Sync: true})
	require.NoError(t, err)
	require.Equal(t, domain.StatusPendingPayment, begun.State.Status)
	require.Equal(t, 1, countRows(t, a, "orders", "token = ?", in.Token), "one order")
	require.Equal(t, 1, countRows(t, a, "stock_ledger", "token = ? AND operation = 'deduct'", in.Token), "one deduction")
	left, err := a.Store.DBStock(ctx, in.SaleID)
	require.NoError(t, err)
	require.EqualValues(t, 1, left)

	layer.Lose(dbfault.Containing(dbfault.CommitQuery), dbfault.AfterApply, 1)
	_, err = a.MarkPaidAndSync(ctx, in.Token, "pay-lost-1", true)
	requireRetryable(t, err)
	paid, err := a.MarkPaidAndSync(ctx, in.Token, "pay-lost-1", true)
	require.NoError(t, err)
	require.Equal(t, domain.StatusPaid, paid.State.Status)
	require.Equal(t, 1, countRows(t, a, "orders", "token = ? AND status = ? AND payment_ref = ?", in.Token, string(domain.StatusPaid), "pay-lost-1"))
	require.Equal(t, 2, layer.Lost())
}

func TestReleaseRetriedAfterALostAnswerAppliesOnce(t *testing.T) {
	a, layer := lostActivities(t)
	ctx := testCtx(t)
	for _, c := range []struct {
		name   string
		cancel bool // ended while queued (EndQueued), else expired with an order (ReleaseOrder)
		want   domain.ReservationStatus
	}{
		{"expired order", false, domain.StatusExpired},
		{"cancelled while queued", true, domain.StatusCancelled},
	} {
		in := mustHeldOrder(t, a, 1)
		var end func() (Step, error)
		if c.cancel {
			end = func() (Step, error) {
				return a.BeginOrder(ctx, BeginRequest{Input: in, Cancel: true, CancelReason: "user", Sync: true})
			}
			_, err := a.RecordReservation(ctx, in)
			require.NoError(t, err, c.name)
		} else {
			_, err := a.BeginOrder(ctx, BeginRequest{Input: in, Sync: true})
			require.NoError(t, err, c.name)
			end = func() (Step, error) { return a.ReleaseAndSync(ctx, in.Token, domain.StatusExpired, true) }
		}
		layer.Lose(dbfault.Containing(dbfault.CommitQuery), dbfault.AfterApply, 1)
		_, err := end()
		requireRetryable(t, err)
		ended, err := end()
		require.NoError(t, err, c.name)
		require.Equal(t, c.want, ended.State.Status, c.name)
		require.Equal(t, 1, countRows(t, a, "stock_ledger", "token = ? AND operation = 'restore'", in.Token), "%s: one release", c.name)
		left, err := a.Store.DBStock(ctx, in.SaleID)
		require.NoError(t, err)
		require.EqualValues(t, 1, left, "%s: the unit back once", c.name)
	}
	require.Equal(t, 2, layer.Lost())
}
