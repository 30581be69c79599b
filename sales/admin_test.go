package sales_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/dbfault"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/sales"
	"github.com/seckill/seckill/store"
)

// deadRedis is a client of an address nothing listens on: every call
// fails at once, as with Redis down.
func deadRedis(t *testing.T) *redisgateway.Client {
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{"127.0.0.1:1"}, DialTimeout: time.Second, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	return redisgateway.NewClient(rdb)
}

func (f *fixture) stocks() (redisStock, dbStock int64) {
	f.t.Helper()
	redisStock = mustInt(f.t, f.rdb.Get(f.ctx, f.keys.Stock))
	dbStock, err := f.st.DBStock(f.ctx, f.sale.ID)
	require.NoError(f.t, err)
	return redisStock, dbStock
}

// Pause, resume and stop reach the database and the warmed sale's Redis
// metadata, where the reserve script enforces them; a sale not in Redis
// gets no half-made metadata; with Redis down the database holds the
// decision and the caller learns Redis is behind.
func TestSetControlReachesBothStores(t *testing.T) {
	f := mustFixture(t, 5)
	sale, err := sales.SetControl(f.ctx, f.st, f.client, f.sale.ID, domain.ControlPaused)
	require.NoError(t, err)
	require.Equal(t, domain.ControlPaused, sale.Control)
	require.Equal(t, "paused", f.rdb.HGet(f.ctx, f.keys.Meta, "control").Val())
	user := testenv.UniqueUser()
	res, err := f.client.Reserve(f.ctx, redisgateway.ReserveArgs{SaleID: f.sale.ID, UserID: user, RequestID: "paused-1",
		Token: domain.DeriveToken(tokenKey, f.sale.ID, user, "paused-1"), Epoch: f.epoch()})
	require.NoError(t, err)
	require.Equal(t, redisgateway.OutcomePaused, res.Outcome)

	sale, err = sales.SetControl(f.ctx, f.st, f.client, f.sale.ID, domain.ControlActive)
	require.NoError(t, err)
	require.Equal(t, domain.ControlActive, sale.Control)
	require.Equal(t, "active", f.rdb.HGet(f.ctx, f.keys.Meta, "control").Val())

	cold := testenv.MustSale(t, f.st, 3)
	_, err = sales.SetControl(f.ctx, f.st, f.client, cold.ID, domain.ControlStopped)
	require.NoError(t, err)
	require.Zero(t, f.rdb.Exists(f.ctx, redisgateway.SaleKeys(cold.ID).Meta).Val(), "no metadata for a sale not in Redis")

	_, err = sales.SetControl(f.ctx, f.st, f.client, 1<<40, domain.ControlPaused)
	require.ErrorIs(t, err, store.ErrNotFound)

	sale, err = sales.SetControl(f.ctx, f.st, deadRedis(t), f.sale.ID, domain.ControlStopped)
	require.ErrorIs(t, err, sales.ErrRedisBehind)
	require.Equal(t, domain.ControlStopped, sale.Control, "committed: the sale comes with the error")
	got, err := f.st.GetSale(f.ctx, f.sale.ID)
	require.NoError(t, err)
	require.Equal(t, domain.ControlStopped, got.Control, "the database holds the decision")
}

// Stock additions and withdrawals change both stores; a withdrawal of more
// than Redis has unsold changes neither.
func TestAdjustStockChangesBothStores(t *testing.T) {
	f := mustFixture(t, 5)
	require.NoError(t, sales.AdjustStock(f.ctx, f.st, f.client, f.sale.ID, 3, ""))
	r, d := f.stocks()
	require.EqualValues(t, [2]int64{8, 8}, [2]int64{r, d})
	ref := fmt.Sprintf("withdraw-%d", f.sale.ID)
	for range 2 { // the repeat under the same ref changes nothing
		require.NoError(t, sales.AdjustStock(f.ctx, f.st, f.client, f.sale.ID, -4, ref))
		r, d = f.stocks()
		require.EqualValues(t, [2]int64{4, 4}, [2]int64{r, d})
	}

	err := sales.AdjustStock(f.ctx, f.st, f.client, f.sale.ID, -5, "")
	require.ErrorIs(t, err, domain.ErrInsufficient)
	r, d = f.stocks()
	require.EqualValues(t, [2]int64{4, 4}, [2]int64{r, d}, "nothing withdrawn")
	got, err := f.st.GetSale(f.ctx, f.sale.ID)
	require.NoError(t, err)
	require.EqualValues(t, 4, got.StockTotal)
}

// A withdrawal Redis granted but the database refused gives the units back
// to Redis: none is lost from sale.
func TestAdjustStockRollsBackRedisWhenTheDatabaseRefuses(t *testing.T) {
	f := mustFixture(t, 4)
	// Redis believes in more unsold units than the buckets hold.
	require.NoError(t, f.rdb.Set(f.ctx, f.keys.Stock, 10, 0).Err())
	err := sales.AdjustStock(f.ctx, f.st, f.client, f.sale.ID, -6, "")
	require.Equal(t, domain.ErrInsufficient, err, "a refusal, with the units given back")
	r, d := f.stocks()
	require.EqualValues(t, [2]int64{10, 4}, [2]int64{r, d}, "Redis's units back, the buckets untouched")
}

// A withdrawal whose database write committed but whose answer was lost,
// every retry failing after it, is read back: Redis keeps the units it
// took, as the buckets do, and the caller is answered done.
func TestAdjustStockReadsBackAWithdrawalWhoseAnswerWasLost(t *testing.T) {
	f := mustFixture(t, 8)
	layer := &dbfault.Layer{}
	f.st = testenv.MustStore(t, store.WithConnectorLayer(layer.Wrap))
	layer.Lose(dbfault.Containing(dbfault.CommitQuery), dbfault.AfterApply, 1)
	retry := dbfault.Containing("UPDATE sales SET stock_total")
	layer.Lose(func(q string) bool { return layer.Lost() > 0 && retry(q) }, dbfault.BeforeSend, 10)
	require.NoError(t, sales.AdjustStock(f.ctx, f.st, f.client, f.sale.ID, -3, fmt.Sprintf("withdraw-lost-%d", f.sale.ID)))
	require.GreaterOrEqual(t, layer.Lost(), 2, "the commit's answer lost and a retry broken")
	r, d := f.stocks()
	require.EqualValues(t, [2]int64{5, 5}, [2]int64{r, d}, "withdrawn once from both stores")
}

// With Redis down, a withdrawal changes nothing (ErrRedis) and an
// addition lands in the database only (ErrRedisBehind: the ref lets a
// retry or the reconciliation apply it to Redis once).
func TestAdjustStockWithRedisDown(t *testing.T) {
	f := mustFixture(t, 5)
	dead := deadRedis(t)
	err := sales.AdjustStock(f.ctx, f.st, dead, f.sale.ID, -2, "")
	require.ErrorIs(t, err, sales.ErrRedis)
	require.NotErrorIs(t, err, sales.ErrRedisBehind)
	_, d := f.stocks()
	require.EqualValues(t, 5, d)

	err = sales.AdjustStock(f.ctx, f.st, dead, f.sale.ID, 2, "")
	require.ErrorIs(t, err, sales.ErrRedisBehind)
	r, d := f.stocks()
	require.EqualValues(t, [2]int64{5, 7}, [2]int64{r, d})

	// Redis follows from the pending row, once however often it is followed.
	for _, want := range []int{1, 0} {
		n, err := sales.FollowStock(f.ctx, f.st, f.client, f.sale.ID)
		require.NoError(t, err)
		require.Equal(t, want, n)
		r, d = f.stocks()
		require.EqualValues(t, [2]int64{7, 7}, [2]int64{r, d})
	}
}

// The Redis → database switch the degraded mode makes
// (store.SwitchToDatabaseAfterDwell) bumps the epoch once (a second switch
// is a no-op); a resync whose instance died is rolled back to database
// mode with a new epoch (store.AbortResync, at any epoch) once it is older
// than staleAfter, not before.
func TestSwitchToDatabaseAndAbortStalledResync(t *testing.T) {
	f := mustFixture(t, 5)
	before := f.epoch()
	sale, err := f.st.SwitchToDatabaseAfterDwell(f.ctx, f.sale.ID, time.Hour, 0)
	require.NoError(t, err)
	require.Equal(t, domain.ModeDatabase, sale.Mode)
	require.Equal(t, before+1, sale.ModeEpoch)
	again, err := f.st.SwitchToDatabaseAfterDwell(f.ctx, f.sale.ID, time.Hour, 0)
	require.NoError(t, err)
	require.Equal(t, sale.ModeEpoch, again.ModeEpoch, "one switch")

	epoch, err := f.st.BeginResync(f.ctx, f.sale.ID) // its instance "dies" here
	require.NoError(t, err)
	rolled, err := f.st.AbortResync(f.ctx, f.sale.ID, 0, time.Hour)
	require.NoError(t, err)
	require.False(t, rolled, "a fresh resync is left alone")
	time.Sleep(5 * time.Millisecond)
	rolled, err = f.st.AbortResync(f.ctx, f.sale.ID, 0, time.Millisecond)
	require.NoError(t, err)
	require.True(t, rolled)
	got, err := f.st.GetSale(f.ctx, f.sale.ID)
	require.NoError(t, err)
	require.Equal(t, domain.ModeDatabase, got.Mode, fmt.Sprintf("rolled back from epoch %d", epoch))
	require.Equal(t, epoch+1, got.ModeEpoch)
}
