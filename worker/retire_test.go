package worker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
)

// The retirer sweeps a retired sale's keys the first time it sees the
// sale, then only when the change feed names it: a late writer's write
// (noted) is swept at the next tick, and a retired sale nobody writes to
// costs Redis nothing.
func TestRetirerSweepsRetiredSalesTheFeedNames(t *testing.T) {
	st, rdb := testenv.MustStore(t), testenv.MustRedis(t)
	rc := redisgateway.NewClient(rdb)
	sale := testenv.MustSale(t, st, 5)
	k := redisgateway.SaleKeys(sale.ID)
	t.Cleanup(func() { _ = rdb.Del(context.Background(), k.All()...).Err() })
	require.NoError(t, st.MarkFinished(testCtx(t), sale.ID))
	require.NoError(t, rdb.Set(testCtx(t), k.Stock, 1, time.Hour).Err())

	r := &Retirer{Store: st, Redis: rc, Logger: testLogger()}
	require.NoError(t, r.Once(testCtx(t), time.Now()))
	require.Zero(t, rdb.Exists(testCtx(t), k.All()...).Val(), "swept when first seen")

	// The sweep noted the sale; once a tick has read that note and the
	// feed's look-back has passed it, a key put back without a note is
	// not looked at.
	time.Sleep(redisgateway.NoteEvery + feedMargin + 500*time.Millisecond)
	require.NoError(t, r.Once(testCtx(t), time.Now()))
	require.NoError(t, rdb.Set(testCtx(t), k.Stock, 1, time.Hour).Err())
	require.NoError(t, r.Once(testCtx(t), time.Now()))
	require.EqualValues(t, 1, rdb.Exists(testCtx(t), k.Stock).Val(), "a retired sale nobody notes is not read")

	// A late writer through the client notes the sale: swept next tick.
	_, _, err := rc.JoinWaitlist(testCtx(t), sale.ID, testenv.UniqueUser())
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		require.NoError(t, r.Once(testCtx(t), time.Now()))
		return rdb.Exists(testCtx(t), k.All()...).Val() == 0
	}, 10*time.Second, 300*time.Millisecond, "the noted sale is swept")
}
