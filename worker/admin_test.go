package worker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
)

// A stock addition and a pause the database committed while Redis missed
// them reach Redis from the follower, the addition once.
func TestFollowerAppliesCommittedAdminWrites(t *testing.T) {
	_, st := MustIsolatedStore(t)
	rdb := testenv.MustRedis(t)
	sale := testenv.MustSale(t, st, 10)
	k := redisgateway.SaleKeys(sale.ID)
	require.NoError(t, rdb.Set(testCtx(t), k.Stock, 10, time.Hour).Err())
	require.NoError(t, rdb.HSet(testCtx(t), k.Meta, "control", string(domain.ControlActive)).Err())
	t.Cleanup(func() { _ = rdb.Del(context.Background(), k.All()...).Err() })

	require.NoError(t, st.AdjustStock(testCtx(t), sale.ID, 5, fmt.Sprintf("follow-%d", sale.ID)))
	_, err := st.SetSaleControl(testCtx(t), sale.ID, domain.ControlPaused)
	require.NoError(t, err)

	f := &Follower{Redis: redisgateway.NewClient(rdb), Store: st, Logger: testLogger()}
	for range 2 {
		require.NoError(t, f.Once(testCtx(t)))
		stock, err := rdb.Get(testCtx(t), k.Stock).Int64()
		require.NoError(t, err)
		require.EqualValues(t, 15, stock, "the addition is applied once")
		control, err := rdb.HGet(testCtx(t), k.Meta, "control").Result()
		require.NoError(t, err)
		require.Equal(t, string(domain.ControlPaused), control)
	}
	pending, err := st.PendingAdditions(testCtx(t), sale.ID, 10)
	require.NoError(t, err)
	require.Empty(t, pending)
}
