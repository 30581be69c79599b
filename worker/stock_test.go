package worker

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/store"
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
			require.NoError(t, rdb.Set(testCtx(t), redisgateway.SaleKeys(id).Stock, v, time.Hour).Err())
		}
	}
	t.Cleanup(func() {
		for _, id := range []int64{good.ID, bad.ID, other.ID} {
			_ = rdb.Del(context.Background(), redisgateway.SaleKeys(id).Stock).Err()
		}
	})
	seen := func(id int64) sql.NullInt64 {
		var v sql.NullInt64
		require.NoError(t, st.DB.QueryRowContext(testCtx(t), "SELECT redis_stock_seen FROM sales WHERE id = ?", id).Scan(&v))
		return v
	}
	// Keys set directly, so the change feed names none of the sales.
	set(map[int64]any{good.ID: 7, bad.ID: "not a number", other.ID: 9})
	rec := &StockRecorder{Redis: redisgateway.NewClient(rdb), Store: st, Logger: testLogger(), Every: time.Second, FullEvery: time.Hour}
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
		if domain.PassShare(id, shares) == 1 { // the second tick's share
			v = want[1]
		}
		assert.Equal(t, sql.NullInt64{Int64: v, Valid: true}, seen(id), "sale %d sampled only by its share", id)
	}
	assert.Empty(t, rec.retry)
}

// The recorder's, the control follower's and the sale signaller's ticks
// cost the database the same statements with 1,000 idle sales open as
// with 2,000: the sales directory re-reads only changed rows, and no tick
// lists the open sales.
func TestIdleSalesCostTheLoopsNoStatementsEach(t *testing.T) {
	_, st := MustIsolatedStore(t)
	rec := testenv.Record(st)
	rdb := redisgateway.NewClient(testenv.MustRedis(t))
	recorder := &StockRecorder{Redis: rdb, Store: st, Logger: testLogger()}
	follower := &Follower{Redis: rdb, Store: st, Logger: testLogger()}
	signaller := (&process{st: st, rdb: rdb, logger: testLogger()}).saleSignaller()
	signaller.Signal = func(context.Context, int64) error { return nil }
	ticks := func() []string {
		time.Sleep(store.DirectoryMargin + time.Second) // the inserts are no change any more
		rec.Take()
		for range 3 {
			time.Sleep(store.DirectoryFresh) // each tick refreshes the directory
			_, err := recorder.RecordOnce(testCtx(t))
			require.NoError(t, err)
			require.NoError(t, follower.Once(testCtx(t)))
			require.NoError(t, signaller.Once(testCtx(t), time.Now()))
		}
		return rec.Take()
	}
	testenv.MustIdleSales(t, st, 1000)
	ticks() // the first ticks read everything
	at1000 := ticks()
	testenv.MustIdleSales(t, st, 1000)
	ticks()
	at2000 := ticks()
	t.Logf("three idle ticks, 1,000 sales: %d statements %q", len(at1000), at1000)
	assert.Len(t, at2000, len(at1000), "statements of three ticks: %q", at2000)
	assert.LessOrEqual(t, len(at1000), 3*3, "three ticks: %q", at1000)
	for _, q := range append(at1000, at2000...) {
		assert.NotContains(t, q, "finished_at IS NULL", "no tick lists the open sales")
	}
}

// A tick records its samples in one statement per stockBatch sales, not
// one per sale: 600 sales sampled at once cost the database two writes.
func TestStockRecorderWritesItsSamplesInBatches(t *testing.T) {
	_, st := MustIsolatedStore(t)
	rdb := testenv.MustRedis(t)
	ids := testenv.MustIdleSales(t, st, 600)
	pipe := rdb.Pipeline()
	for i, id := range ids {
		pipe.Set(testCtx(t), redisgateway.SaleKeys(id).Stock, i%7, time.Hour)
	}
	_, err := pipe.Exec(testCtx(t))
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, id := range ids {
			_ = rdb.Del(context.Background(), redisgateway.SaleKeys(id).Stock).Err()
		}
	})
	rec := testenv.Record(st)
	recorder := &StockRecorder{Redis: redisgateway.NewClient(rdb), Store: st, Logger: testLogger(), Every: time.Second, FullEvery: time.Hour}
	n, err := recorder.RecordOnce(testCtx(t)) // the first tick samples every sale
	require.NoError(t, err)
	require.GreaterOrEqual(t, n, len(ids))
	var writes int
	for _, q := range rec.Take() {
		if strings.Contains(q, "redis_stock_seen = CASE") {
			writes++
		}
	}
	require.Equal(t, (n+stockBatch-1)/stockBatch, writes, "one write per %d samples", stockBatch)
	for _, i := range []int{0, 1, 599} {
		var v sql.NullInt64
		require.NoError(t, st.DB.QueryRowContext(testCtx(t), "SELECT redis_stock_seen FROM sales WHERE id = ?", ids[i]).Scan(&v))
		require.Equal(t, sql.NullInt64{Int64: int64(i % 7), Valid: true}, v, "sale %d's sample", ids[i])
	}
}
