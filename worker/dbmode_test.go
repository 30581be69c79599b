package worker

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/degraded"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/store"
	"github.com/seckill/seckill/test/testsale"
)

// mustDatabaseModeSale creates a sale in the worker's own database, warms
// it and switches it to database mode with one database-path reservation.
func mustDatabaseModeSale(t *testing.T, st *store.Store) (*domain.Sale, domain.OrderInput) {
	t.Helper()
	rdb := testenv.MustRedis(t)
	sale := testenv.MustSale(t, st, 5)
	testsale.MustWarm(t, st, rdb, sale)
	require.NoError(t, st.RecordRedisStock(testCtx(t), sale.ID, 5, time.Now()))
	_, err := st.SwitchToDatabase(testCtx(t), sale.ID, 0)
	require.NoError(t, err)
	user := testenv.UniqueUser()
	in := domain.OrderInput{Token: domain.DeriveToken([]byte("k"), sale.ID, user, "outbox-01"), SaleID: sale.ID, UserID: user, RequestID: "outbox-01", Path: domain.PathDatabase, Deducted: true}
	_, _, err = st.ReserveInDB(testCtx(t), in)
	require.NoError(t, err)
	return sale, in
}

func TestOutboxRelayStartsWhatTheAPIDidNot(t *testing.T) {
	_, st := MustIsolatedStore(t)
	_, in := mustDatabaseModeSale(t, st)
	var mu sync.Mutex
	var started []domain.OrderInput
	o := &OutboxRelay{Store: st, MinAge: 0, Every: time.Second, Logger: slog.Default(),
		Starter: func(_ context.Context, got domain.OrderInput) error {
			mu.Lock()
			defer mu.Unlock()
			started = append(started, got)
			return nil
		}}
	_, err := o.Once(testCtx(t))
	require.NoError(t, err)
	require.Contains(t, started, in, "started with the database path's input")
	n := len(started)
	_, err = o.Once(testCtx(t))
	require.NoError(t, err)
	require.Len(t, started, n, "a dispatched row is not started again")

	// A failing start leaves the row for the next round.
	_, in2 := mustDatabaseModeSale(t, st)
	o.Starter = func(context.Context, domain.OrderInput) error { return fmt.Errorf("temporal down") }
	_, err = o.Once(testCtx(t))
	require.Error(t, err)
	pending, err := st.PendingOutbox(testCtx(t), 0, 1000)
	require.NoError(t, err)
	var tokens []string
	for _, e := range pending {
		tokens = append(tokens, e.Token)
	}
	require.Contains(t, tokens, in2.Token)
}

// A Redis hold the API cancelled while QUEUED is enqueued for a start
// (its workflow may never have started); the relay starts it with a Redis
// hold's input, not as a database-path reservation.
func TestOutboxRelayStartsACancelledRedisHoldAsOne(t *testing.T) {
	_, st := MustIsolatedStore(t)
	sale := testenv.MustSale(t, st, 3)
	user := testenv.UniqueUser()
	in := domain.RedisHoldInput(domain.DeriveToken([]byte("k"), sale.ID, user, "outbox-02"), sale.ID, user, "outbox-02")
	_, err := st.RecordReservation(testCtx(t), in)
	require.NoError(t, err)
	_, err = st.EndQueued(testCtx(t), in.Token, domain.StatusCancelled, "user")
	require.NoError(t, err)
	require.NoError(t, st.EnqueueStart(testCtx(t), in.Token, sale.ID))
	require.NoError(t, st.EnqueueStart(testCtx(t), in.Token, sale.ID), "a second enqueue changes nothing")
	var started []domain.OrderInput
	o := &OutboxRelay{Store: st, MinAge: 0, Every: time.Second, Logger: slog.Default(),
		Starter: func(_ context.Context, got domain.OrderInput) error {
			started = append(started, got)
			return nil
		}}
	_, err = o.Once(testCtx(t))
	require.NoError(t, err)
	require.Contains(t, started, in, "started with a Redis hold's input")
}

// comeback is the way back to Redis after Redis answered for healthy,
// rolling back resyncs older than stale, the fleet not consulted.
func comeback(st *store.Store, healthy, stale time.Duration) *degraded.Comeback {
	c := degraded.NewComeback(config.Degraded{RedisHealthyFor: healthy}, st, nil, slog.Default())
	c.StaleAfter = stale
	return c
}

func TestResyncerReturnsASaleToRedis(t *testing.T) {
	_, st := MustIsolatedStore(t)
	sale, in := mustDatabaseModeSale(t, st)
	rdb := testenv.MustRedis(t)
	r := &Resyncer{Store: st, Redis: redisgateway.NewClient(rdb), Comeback: comeback(st, 0, time.Minute), Logger: slog.Default()}
	r.Once(testCtx(t)) // first sight of a healthy Redis
	r.Once(testCtx(t))
	got, err := st.GetSale(testCtx(t), sale.ID)
	require.NoError(t, err)
	require.Equal(t, domain.ModeRedis, got.Mode)
	keys := redisgateway.SaleKeys(sale.ID)
	require.Equal(t, fmt.Sprint(got.ModeEpoch), rdb.HGet(testCtx(t), keys.Meta, "epoch").Val())
	require.Equal(t, "4", rdb.Get(testCtx(t), keys.Stock).Val(), "5 units - 1 sold on the database path")
	require.Equal(t, fmt.Sprintf("ordered:%d", in.UserID), rdb.HGet(testCtx(t), keys.Tokens, in.Token).Val())

	// The Redis path works again with the new epoch and knows the buyer.
	res, err := redisgateway.New().Reserve(testCtx(t), rdb, redisgateway.ReserveArgs{SaleID: sale.ID, UserID: in.UserID, RequestID: "after-01", Token: "x", Epoch: got.ModeEpoch})
	require.NoError(t, err)
	require.Equal(t, redisgateway.OutcomeAlready, res.Outcome)
}

func TestResyncerRollsBackAStalledResync(t *testing.T) {
	_, st := MustIsolatedStore(t)
	sale, _ := mustDatabaseModeSale(t, st)
	_, err := st.BeginResync(testCtx(t), sale.ID) // its instance "dies" here
	require.NoError(t, err)
	r := &Resyncer{Store: st, Redis: redisgateway.NewClient(testenv.MustRedis(t)), Comeback: comeback(st, time.Hour, time.Millisecond), Logger: slog.Default()}
	time.Sleep(5 * time.Millisecond)
	r.Once(testCtx(t))
	got, err := st.GetSale(testCtx(t), sale.ID)
	require.NoError(t, err)
	require.Equal(t, domain.ModeDatabase, got.Mode, "back to database mode, where a later resync starts over")
}

// A live sale whose keys vanish from a healthy Redis is detected by the
// resyncer (the reserve script's not_ready is no breaker failure) and
// rebuilt from the database, without an operator.
func TestResyncerRebuildsALiveSaleWhoseKeysVanished(t *testing.T) {
	_, st := MustIsolatedStore(t)
	rdb := testenv.MustRedis(t)
	sale := testenv.MustSale(t, st, 5)
	testsale.MustWarm(t, st, rdb, sale)
	k := redisgateway.SaleKeys(sale.ID)
	require.NoError(t, rdb.Del(testCtx(t), k.All()...).Err())

	r := &Resyncer{Store: st, Redis: redisgateway.NewClient(rdb), Comeback: comeback(st, time.Hour, time.Minute), Logger: slog.Default()}
	r.Once(testCtx(t))
	stock, err := rdb.Get(testCtx(t), k.Stock).Int64()
	require.NoError(t, err, "the stock key is back")
	require.EqualValues(t, 5, stock)
	got, err := st.GetSale(testCtx(t), sale.ID)
	require.NoError(t, err)
	require.Equal(t, domain.ModeRedis, got.Mode)
	require.EqualValues(t, sale.ModeEpoch+2, got.ModeEpoch, "through database mode and a resync")
}

// A Redis that came back with less than it acknowledged (here: a hold the
// database recorded with number 5 that Redis's counter of holds never
// reached, and a waitlist join it forgot) is found at the resyncer's first
// look at a new Redis (a restart, a promotion) even with no hold to come,
// and the sale is rebuilt from the database: the held unit and the join
// are back, and the counter of holds is past the database's.
func TestResyncerRebuildsASaleWhoseRedisWentBack(t *testing.T) {
	_, st := MustIsolatedStore(t)
	rdb := testenv.MustRedis(t)
	sale := testenv.MustSale(t, st, 5)
	testsale.MustWarm(t, st, rdb, sale)
	k := redisgateway.SaleKeys(sale.ID)
	user := testenv.UniqueUser()
	in := domain.RedisHoldInput(domain.DeriveToken([]byte("k"), sale.ID, user, "lost-hold"), sale.ID, user, "lost-hold")
	rec, err := st.RecordRedisHold(testCtx(t), in, sale.ModeEpoch, 5, true)
	require.NoError(t, err)
	require.True(t, rec.Promised())
	waiter := testenv.UniqueUser()
	require.NoError(t, testsale.ErrOf(st.RecordWaitlistJoin(testCtx(t), sale.ID, store.WaitJoin{UserID: waiter, Joined: time.Now().UnixMicro()})))

	r := &Resyncer{Store: st, Redis: redisgateway.NewClient(rdb), Comeback: comeback(st, time.Hour, time.Minute), Logger: slog.Default()}
	r.Once(testCtx(t))
	got, err := st.GetSale(testCtx(t), sale.ID)
	require.NoError(t, err)
	require.Equal(t, domain.ModeRedis, got.Mode)
	require.EqualValues(t, sale.ModeEpoch+2, got.ModeEpoch, "rebuilt: through database mode and a resync")
	require.False(t, got.RedisWentBack, "the mark is taken")
	require.EqualValues(t, 4, mustGetInt(t, rdb, k.Stock), "the held unit is out of Redis's stock")
	require.GreaterOrEqual(t, mustGetInt(t, rdb, k.Reserved), int64(5))
	require.Equal(t, fmt.Sprintf("held:%d", user), rdb.HGet(testCtx(t), k.Tokens, in.Token).Val())
	pos, err := redisgateway.NewClient(rdb).WaitlistPosition(testCtx(t), sale.ID, waiter)
	require.NoError(t, err)
	require.EqualValues(t, 1, pos, "the forgotten join is back")

	// The same Redis at the next look: nothing is checked or rebuilt.
	r.Once(testCtx(t))
	again, err := st.GetSale(testCtx(t), sale.ID)
	require.NoError(t, err)
	require.Equal(t, got.ModeEpoch, again.ModeEpoch)
}

func mustGetInt(t *testing.T, rdb redis.UniversalClient, key string) int64 {
	t.Helper()
	n, err := rdb.Get(testCtx(t), key).Int64()
	require.NoError(t, err, key)
	return n
}

// A hold taken and recorded while the resyncer compares a sale's counters
// (a crowd as a worker starts) is no lost write: the database is read
// before Redis, whose counter is then at least every number it recorded.
func TestResyncerTakesAHoldDuringItsCheckForNoLoss(t *testing.T) {
	_, st := MustIsolatedStore(t)
	rdb := testenv.MustRedis(t)
	sale := testenv.MustSale(t, st, 5)
	testsale.MustWarm(t, st, rdb, sale)
	k := redisgateway.SaleKeys(sale.ID)
	var once sync.Once
	watched := testenv.MustRedis(t)
	watched.AddHook(afterRead{key: k.Reserved, then: func() {
		once.Do(func() {
			seq, err := rdb.Incr(testCtx(t), k.Reserved).Result()
			require.NoError(t, err)
			user := testenv.UniqueUser()
			in := domain.RedisHoldInput(domain.DeriveToken([]byte("k"), sale.ID, user, "crowd-hold"), sale.ID, user, "crowd-hold")
			rec, err := st.RecordRedisHold(testCtx(t), in, sale.ModeEpoch, seq, true)
			require.NoError(t, err)
			require.True(t, rec.Promised())
		})
	}})

	r := &Resyncer{Store: st, Redis: redisgateway.NewClient(watched), Comeback: comeback(st, time.Hour, time.Minute), Logger: slog.Default()}
	r.Once(testCtx(t)) // the first look: the counters are compared
	got, err := st.GetSale(testCtx(t), sale.ID)
	require.NoError(t, err)
	require.Equal(t, sale.ModeEpoch, got.ModeEpoch, "not rebuilt")
	require.False(t, got.RedisWentBack)
}

// afterRead runs then after each GET of key has its answer.
type afterRead struct {
	key  string
	then func()
}

func (h afterRead) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h afterRead) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if args := cmd.Args(); cmd.Name() == "get" && len(args) == 2 && args[1] == h.key {
			h.then()
		}
		return err
	}
}

func (h afterRead) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A resyncer tick costs Redis the same round trips with 3,000 live sales
// open as with 1,500: the keys of the sales due (the feed's and the
// tick's share of the full pass, which grows with the sales) are checked
// in one pipeline. A sale whose keys were deleted, named by the feed, is
// rebuilt within one tick among the 3,000.
func TestResyncerTickCostsRoundTripsIndependentOfTheLiveSales(t *testing.T) {
	_, st := MustIsolatedStore(t)
	rdb := testenv.MustRedis(t)
	counted := testenv.MustRedis(t)
	trips := &testenv.RedisCounter{}
	counted.AddHook(trips)
	r := &Resyncer{Store: st, Redis: redisgateway.NewClient(counted), Comeback: comeback(st, time.Hour, time.Minute), Logger: testLogger()}
	r.Once(testCtx(t)) // the first look at this Redis, before the sales
	tick := func() int64 {
		time.Sleep(store.DirectoryFresh) // the tick reads the directory afresh
		trips.Reset()
		r.Once(testCtx(t))
		return trips.RoundTrips()
	}
	mustLiveIdleSales(t, st, rdb, 1500)
	tick() // the first tick with the new sales
	at1500 := tick()
	mustLiveIdleSales(t, st, rdb, 1500)
	tick()
	at3000 := tick()
	require.Equal(t, at1500, at3000, "round trips of a tick with 1,500 live sales, then 3,000")
	require.LessOrEqual(t, at3000, int64(6), "ping, identity, waitlist leaves, feed, the keys' pipeline")

	sale := testenv.MustSale(t, st, 5)
	testsale.MustWarm(t, st, rdb, sale)
	tick() // the sale is in the directory
	k := redisgateway.SaleKeys(sale.ID)
	require.NoError(t, rdb.Del(testCtx(t), k.All()...).Err())
	require.NoError(t, redisgateway.NewClient(rdb).WriteChange(testCtx(t), sale.ID, time.Now()))
	tick()
	require.EqualValues(t, 5, mustGetInt(t, rdb, k.Stock), "rebuilt within one tick")
}

// mustLiveIdleSales makes n idle sales warmed, whose keys the resyncer
// checks are in Redis.
func mustLiveIdleSales(t *testing.T, st *store.Store, rdb redis.UniversalClient, n int) {
	t.Helper()
	ids := testenv.MustIdleSales(t, st, n)
	_, err := st.DB.NewUpdate().Table("sales").Set("warmed_at = NOW(3)").Where("id IN (?)", bun.List(ids)).Exec(testCtx(t))
	require.NoError(t, err)
	pipe := rdb.Pipeline()
	for _, id := range ids {
		k := redisgateway.SaleKeys(id)
		pipe.Set(testCtx(t), k.Meta, "idle", time.Hour)
		pipe.Set(testCtx(t), k.Stock, 1, time.Hour)
	}
	_, err = pipe.Exec(testCtx(t))
	require.NoError(t, err)
	t.Cleanup(func() {
		pipe := rdb.Pipeline()
		for _, id := range ids {
			k := redisgateway.SaleKeys(id)
			pipe.Del(context.Background(), k.Meta, k.Stock)
		}
		_, _ = pipe.Exec(context.Background())
	})
}
