package worker

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/lua"
)

// A tick where one sale's sample failed records the others, and the next
// tick samples the failed sale again, not the ones recorded (unless the
// full pass's share names them).
func TestStockRecorderRetriesOnlyTheFailedSales(t *testing.T) {
	_, st := MustIsolatedStore(t)
	rdb := testenv.MustRedis(t)
	good, bad, other := testenv.MustSale(t, st, 10), testenv.MustSale(t, st, 10), testenv.MustSale(t, st, 10)
	set := func(vals map[int64]any) {
		for id, v := range vals {
			require.NoError(t, rdb.Set(testCtx(t), lua.SaleKeys(id).Stock, v, time.Hour).Err())
		}
	}
	t.Cleanup(func() {
		for _, id := range []int64{good.ID, bad.ID, other.ID} {
			_ = rdb.Del(context.Background(), lua.SaleKeys(id).Stock).Err()
		}
	})
	seen := func(id int64) sql.NullInt64 {
		var v sql.NullInt64
		require.NoError(t, st.DB.QueryRowContext(testCtx(t), "SELECT redis_stock_seen FROM sales WHERE id = ?", id).Scan(&v))
		return v
	}
	// Keys set directly, so the change feed names none of the sales.
	set(map[int64]any{good.ID: 7, bad.ID: "not a number", other.ID: 9})
	rec := &StockRecorder{Redis: lua.NewClient(rdb), Store: st, Logger: testLogger(), Every: time.Second, FullEvery: time.Hour}
	_, err := rec.RecordOnce(testCtx(t))
	require.ErrorContains(t, err, "stock of sale", "the first tick samples every sale")
	assert.Equal(t, sql.NullInt64{Int64: 7, Valid: true}, seen(good.ID))
	assert.Equal(t, sql.NullInt64{Int64: 9, Valid: true}, seen(other.ID))
	assert.False(t, seen(bad.ID).Valid)
	assert.Equal(t, map[int64]bool{bad.ID: true}, rec.retry, "only the failed sale is kept")

	set(map[int64]any{good.ID: 5, bad.ID: 3, other.ID: 4})
	_, err = rec.RecordOnce(testCtx(t))
	require.NoError(t, err)
	assert.Equal(t, sql.NullInt64{Int64: 3, Valid: true}, seen(bad.ID), "the failed sale is sampled again")
	shares := int64(time.Hour / time.Second)
	for id, want := range map[int64][2]int64{good.ID: {7, 5}, other.ID: {9, 4}} {
		v := want[0]
		if lua.PassShare(id, shares) == 1 { // the second tick's share
			v = want[1]
		}
		assert.Equal(t, sql.NullInt64{Int64: v, Valid: true}, seen(id), "sale %d sampled only by its share", id)
	}
	assert.Empty(t, rec.retry)
}
