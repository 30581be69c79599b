package activities

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
)

// The folded steps against the real MariaDB and Redis: each step repeated
// (a retry after an attempt whose commit outcome was never learned) writes
// once, and Redis follows the database.

func redisToken(t *testing.T, in domain.OrderInput) string {
	t.Helper()
	return testenv.MustRedis(t).HGet(testCtx(t), redisgateway.SaleKeys(in.SaleID).Tokens, in.Token).Val()
}

func TestStepsAreIdempotentAndRedisFollows(t *testing.T) {
	a := MustActivities(t)
	ctx := testCtx(t)
	in := mustHeldOrder(t, a, 1)
	user := fmt.Sprint(in.UserID)

	first, err := a.BeginOrder(ctx, BeginRequest{Input: in, Sync: true})
	require.NoError(t, err)
	require.True(t, first.Synced, first.RedisError)
	require.Equal(t, domain.StatusPendingPayment, first.State.Status)
	require.NotEmpty(t, first.State.OrderNo)
	require.NotNil(t, first.State.PayBy)
	require.Equal(t, "ordered:"+user, redisToken(t, in))
	again, err := a.BeginOrder(ctx, BeginRequest{Input: in, Sync: true})
	require.NoError(t, err)
	require.Equal(t, first.State, again.State, "the rerun finds the order it placed")
	dbStock, err := a.Store.DBStock(ctx, in.SaleID)
	require.NoError(t, err)
	require.Zero(t, dbStock, "one order, one unit")

	for range 2 {
		st, err := a.ReleaseAndSync(ctx, in.Token, domain.StatusExpired, true)
		require.NoError(t, err)
		require.True(t, st.Synced, st.RedisError)
		require.Equal(t, domain.StatusExpired, st.State.Status)
	}
	dbStock, err = a.Store.DBStock(ctx, in.SaleID)
	require.NoError(t, err)
	require.Equal(t, int64(1), dbStock, "the unit back in its bucket once")
	redisStock, _, err := a.Redis.Stock(ctx, in.SaleID)
	require.NoError(t, err)
	require.Equal(t, int64(1), redisStock, "the unit back on sale in Redis once")
	require.Equal(t, "released:"+user, redisToken(t, in))

	_, err = a.MarkPaidAndSync(ctx, in.Token, "ref-1", true)
	requireAppErr(t, err, domain.ENotPayable)
}

func TestStepPayOnceAndRedisFollows(t *testing.T) {
	a := MustActivities(t)
	ctx := testCtx(t)
	in := mustHeldOrder(t, a, 1)
	// Without the Redis part (another Redis step was running) Redis is
	// left to the workflow.
	begun, err := a.BeginOrder(ctx, BeginRequest{Input: in})
	require.NoError(t, err)
	require.False(t, begun.Synced)
	require.Empty(t, begun.RedisError)
	require.Equal(t, "held:"+fmt.Sprint(in.UserID), redisToken(t, in))

	paid, err := a.MarkPaidAndSync(ctx, in.Token, "ref-1", true)
	require.NoError(t, err)
	require.True(t, paid.Synced, paid.RedisError)
	require.Equal(t, domain.StatusPaid, paid.State.Status)
	require.Equal(t, "paid:"+fmt.Sprint(in.UserID), redisToken(t, in))
	again, err := a.MarkPaidAndSync(ctx, in.Token, "ref-1", true)
	require.NoError(t, err)
	require.Equal(t, paid.State, again.State)
	_, err = a.MarkPaidAndSync(ctx, in.Token, "ref-2", true)
	requireAppErr(t, err, domain.ENotPayable)
	_, err = a.ReleaseAndSync(ctx, in.Token, domain.StatusExpired, true)
	requireAppErr(t, err, domain.ENotCancellable)
}

// A cancel before the order existed ends the reservation without one, and
// the hold's unit goes back on sale.
func TestStepBeginCancelledWhileQueued(t *testing.T) {
	a := MustActivities(t)
	ctx := testCtx(t)
	in := mustHeldOrder(t, a, 1)
	for range 2 {
		st, err := a.BeginOrder(ctx, BeginRequest{Input: in, Cancel: true, CancelReason: "changed my mind", Sync: true})
		require.NoError(t, err)
		require.True(t, st.Synced, st.RedisError)
		require.Equal(t, domain.StatusCancelled, st.State.Status)
		require.Empty(t, st.State.OrderNo)
	}
	redisStock, _, err := a.Redis.Stock(ctx, in.SaleID)
	require.NoError(t, err)
	require.Equal(t, int64(1), redisStock)
	dbStock, err := a.Store.DBStock(ctx, in.SaleID)
	require.NoError(t, err)
	require.Equal(t, int64(1), dbStock)
}

// A hold whose order finds no unit ends FAILED no_stock, and Redis does not
// get a unit back the database never had.
func TestStepBeginNoStockFails(t *testing.T) {
	a := MustActivities(t)
	ctx := testCtx(t)
	in := mustHeldOrder(t, a, 1)
	require.NoError(t, a.Store.AdjustStock(ctx, in.SaleID, -1, fmt.Sprintf("steps-withdraw-%d", in.SaleID)))
	testenv.MustLegacyHold(t, a.Store, in)
	for range 2 {
		st, err := a.BeginOrder(ctx, BeginRequest{Input: in, Sync: true})
		require.NoError(t, err)
		require.True(t, st.Synced, st.RedisError)
		require.Equal(t, domain.StatusFailed, st.State.Status)
		require.Equal(t, domain.FailReasonNoStock, st.State.FailReason)
	}
	redisStock, _, err := a.Redis.Stock(ctx, in.SaleID)
	require.NoError(t, err)
	require.Zero(t, redisStock, "no unit comes back for a hold the database could not fill")
}

// A hold recorded as the API records it before its 202 (its unit taken)
// gets its order from the row as it stands, repeated or not; its unit is
// not taken twice.
func TestStepBeginPlacesARecordedHold(t *testing.T) {
	a := MustActivities(t)
	ctx := testCtx(t)
	in := mustHeldOrder(t, a, 2)
	sale, err := a.Store.GetSale(ctx, in.SaleID)
	require.NoError(t, err)
	rec, err := a.Store.RecordRedisHold(ctx, in, sale.ModeEpoch, 0, true)
	require.NoError(t, err)
	require.True(t, rec.Promised())
	for range 2 {
		st, err := a.BeginOrder(ctx, BeginRequest{Input: in, Sync: true})
		require.NoError(t, err)
		require.True(t, st.Synced, st.RedisError)
		require.Equal(t, domain.StatusPendingPayment, st.State.Status)
		require.NotEmpty(t, st.State.OrderNo)
	}
	dbStock, err := a.Store.DBStock(ctx, in.SaleID)
	require.NoError(t, err)
	require.Equal(t, int64(1), dbStock, "the hold's one unit, taken when it was recorded")
	require.Equal(t, "ordered:"+fmt.Sprint(in.UserID), redisToken(t, in))
}
