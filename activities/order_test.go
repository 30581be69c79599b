package activities

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/test/testsale"
)

// The order activities against the real MariaDB and Redis: idempotent on
// rerun, business errors non-retryable.

func MustActivities(tb testing.TB) *Activities {
	tb.Helper()
	return &Activities{Store: testenv.MustStore(tb), Redis: redisgateway.NewClient(testenv.MustRedis(tb))}
}

func testCtx(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	tb.Cleanup(cancel)
	return ctx
}

// mustHeldOrder creates and warms a sale and holds a unit for a new user.
func mustHeldOrder(tb testing.TB, a *Activities, stock int64) domain.OrderInput {
	tb.Helper()
	ctx := testCtx(tb)
	sale := testenv.MustSale(tb, a.Store, stock)
	testsale.MustWarm(tb, a.Store, testenv.MustRedis(tb), sale)
	user := testenv.UniqueUser()
	in := domain.OrderInput{SaleID: sale.ID, UserID: user, RequestID: "req-activities", Path: domain.PathRedis}
	in.Token = domain.DeriveToken([]byte("activities-test"), sale.ID, user, in.RequestID)
	res, err := a.Redis.Reserve(ctx, redisgateway.ReserveArgs{SaleID: sale.ID, UserID: user, RequestID: in.RequestID, Token: in.Token, Epoch: 1})
	require.NoError(tb, err)
	require.Equal(tb, redisgateway.OutcomeOK, res.Outcome)
	return in
}

func requireAppErr(t *testing.T, err error, typ string) {
	t.Helper()
	var ae *temporal.ApplicationError
	require.True(t, errors.As(err, &ae), "not an application error: %v", err)
	require.Equal(t, typ, ae.Type())
	require.True(t, ae.NonRetryable())
}

func TestOrderActivitiesAreIdempotent(t *testing.T) {
	a := MustActivities(t)
	ctx := testCtx(t)
	in := mustHeldOrder(t, a, 1)

	for range 2 {
		st, err := a.RecordReservation(ctx, in)
		require.NoError(t, err)
		require.Equal(t, domain.StatusQueued, st.Status)
	}
	first, err := a.PlaceOrder(ctx, in.Token)
	require.NoError(t, err)
	require.Equal(t, domain.StatusPendingPayment, first.Status)
	require.NotEmpty(t, first.OrderNo)
	require.NotNil(t, first.PayBy)
	again, err := a.PlaceOrder(ctx, in.Token)
	require.NoError(t, err)
	require.Equal(t, first.OrderNo, again.OrderNo)
	dbStock, err := a.Store.DBStock(ctx, in.SaleID)
	require.NoError(t, err)
	require.Zero(t, dbStock, "one order, one unit")

	moved, err := a.RedisAdvance(ctx, in.SaleID, in.Token, domain.TokenOrdered, []string{domain.TokenHeld})
	require.NoError(t, err)
	require.True(t, moved)
	moved, err = a.RedisAdvance(ctx, in.SaleID, in.Token, domain.TokenOrdered, []string{domain.TokenHeld})
	require.NoError(t, err)
	require.False(t, moved)

	for range 2 {
		st, err := a.ReleaseOrder(ctx, in.Token, domain.StatusCancelled)
		require.NoError(t, err)
		require.Equal(t, domain.StatusCancelled, st.Status)
	}
	dbStock, err = a.Store.DBStock(ctx, in.SaleID)
	require.NoError(t, err)
	require.Equal(t, int64(1), dbStock)

	released, err := a.RedisRelease(ctx, in.SaleID, in.UserID, in.Token, true)
	require.NoError(t, err)
	require.True(t, released)
	released, err = a.RedisRelease(ctx, in.SaleID, in.UserID, in.Token, true)
	require.NoError(t, err)
	require.False(t, released)
	redisStock, _, err := a.Redis.Stock(ctx, in.SaleID)
	require.NoError(t, err)
	require.Equal(t, int64(1), redisStock, "restored once")

	// A cancelled order can be neither paid nor released as EXPIRED.
	_, err = a.MarkPaid(ctx, in.Token, "ref-1")
	requireAppErr(t, err, domain.ENotPayable)
	_, err = a.ReleaseOrder(ctx, in.Token, domain.StatusExpired)
	requireAppErr(t, err, domain.ENotCancellable)
}

func TestOrderActivitiesPayOnce(t *testing.T) {
	a := MustActivities(t)
	ctx := testCtx(t)
	in := mustHeldOrder(t, a, 1)
	_, err := a.RecordReservation(ctx, in)
	require.NoError(t, err)
	_, err = a.PlaceOrder(ctx, in.Token)
	require.NoError(t, err)
	paid, err := a.MarkPaid(ctx, in.Token, "ref-1")
	require.NoError(t, err)
	require.Equal(t, domain.StatusPaid, paid.Status)
	require.Equal(t, "ref-1", paid.PaymentRef)
	again, err := a.MarkPaid(ctx, in.Token, "ref-1")
	require.NoError(t, err)
	require.Equal(t, paid, again)
	_, err = a.MarkPaid(ctx, in.Token, "ref-2")
	requireAppErr(t, err, domain.ENotPayable)
	_, err = a.ReleaseOrder(ctx, in.Token, domain.StatusExpired)
	requireAppErr(t, err, domain.ENotCancellable)
}

func TestOrderActivitiesNoStockIsNotRetryable(t *testing.T) {
	a := MustActivities(t)
	ctx := testCtx(t)
	in := mustHeldOrder(t, a, 1)
	require.NoError(t, a.Store.AdjustStock(ctx, in.SaleID, -1, fmt.Sprintf("activities-withdraw-%d", in.SaleID)))
	// A hold recorded without its unit: its order finds none.
	testenv.MustLegacyHold(t, a.Store, in)
	_, err := a.RecordReservation(ctx, in)
	require.NoError(t, err)
	_, err = a.PlaceOrder(ctx, in.Token)
	requireAppErr(t, err, domain.ESoldOut)

	st, err := a.EndQueued(ctx, in.Token, domain.StatusFailed, "no_stock")
	require.NoError(t, err)
	require.Equal(t, domain.StatusFailed, st.Status)
	released, err := a.RedisRelease(ctx, in.SaleID, in.UserID, in.Token, false)
	require.NoError(t, err)
	require.True(t, released)
	redisStock, _, err := a.Redis.Stock(ctx, in.SaleID)
	require.NoError(t, err)
	require.Zero(t, redisStock, "no unit comes back for a hold the database could not fill")
}

func TestClassifyKeepsOtherErrorsRetryable(t *testing.T) {
	err := classify("place order", context.DeadlineExceeded)
	var ae *temporal.ApplicationError
	require.False(t, errors.As(err, &ae))
	require.ErrorIs(t, err, context.DeadlineExceeded)
}
