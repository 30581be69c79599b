package salecache

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/netproxy"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
)

// An API cut from Redis (the rest of the fleet still selling) must stay
// cheap whatever the number of sales: its refresher asks Redis nothing per
// sale and the database nothing per sale each second, still stores what
// the database changed, and once Redis answers again reads the changes
// noted meanwhile.
func TestACacheCutFromRedisReadsNoSaleFromIt(t *testing.T) {
	const sales = 2_000
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st := testenv.MustStore(t)
	ids := testenv.MustIdleSales(t, st, sales)
	proxy, err := netproxy.Start(testenv.RedisAddr(), 0)
	require.NoError(t, err)
	defer func() { require.NoError(t, proxy.Close()) }()
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), DialTimeout: time.Second})
	defer rdb.Close()
	var sent testenv.RedisCounter
	rdb.AddHook(&sent)
	raw := testenv.MustRedis(t)
	direct := redisgateway.NewClient(raw)
	c := New(st, redisgateway.NewClient(rdb), time.Second, slog.New(slog.DiscardHandler))
	require.NoError(t, c.Refresh(ctx))
	require.GreaterOrEqual(t, c.Len(), sales)
	require.NoError(t, c.Refresh(ctx)) // the feed's mark set

	proxy.SetCut(true)
	statements := testenv.Record(st)
	sent.Reset()
	const refreshes = 5
	for i := range refreshes {
		require.Error(t, c.Refresh(ctx), "refresh %d: Redis does not answer", i)
	}
	require.LessOrEqual(t, sent.Commands(), int64(10*refreshes), "commands tried while cut: a PING (and its retries) each refresh, none per sale")
	require.LessOrEqual(t, len(statements.Take()), 3*refreshes, "statements while cut: none per sale")

	// The database's changes still reach the cache; a change noted in
	// Redis meanwhile is read once Redis answers this instance again.
	paused, changed := ids[0], ids[1]
	_, err = st.SetSaleControl(ctx, paused, domain.ControlPaused)
	require.NoError(t, err)
	require.Error(t, c.Refresh(ctx))
	require.Equal(t, domain.ControlPaused, c.Cached(paused).Sale().Control)
	require.NoError(t, raw.Set(ctx, redisgateway.SaleKeys(changed).Stock, 7, time.Minute).Err())
	require.NoError(t, direct.WriteChange(ctx, changed, time.Now()))

	proxy.SetCut(false)
	require.Eventually(t, func() bool { return c.Refresh(ctx) == nil }, 10*time.Second, 100*time.Millisecond)
	require.Equal(t, int64(7), c.Cached(changed).StockLeft(), "the change noted during the cut was read")
}

// BenchmarkCutRefresh is one refresh of a cache cut from Redis with 10,000
// open sales: what a cut-off instance pays each second.
func BenchmarkCutRefresh(b *testing.B) {
	ctx := context.Background()
	st := testenv.MustStore(b)
	ids := testenv.MustIdleSales(b, st, 10_000)
	// Sales made an hour ago: the directory's reads of what changed since
	// its last find none, as with a market's idle sales.
	_, err := st.DB.NewUpdate().Table("sales").Set("changed_at = NOW(3) - INTERVAL 1 HOUR").Where("id IN (?)", bun.List(ids)).Exec(ctx)
	require.NoError(b, err)
	proxy, err := netproxy.Start(testenv.RedisAddr(), 0)
	require.NoError(b, err)
	defer func() { require.NoError(b, proxy.Close()) }()
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), DialTimeout: time.Second})
	defer rdb.Close()
	var sent testenv.RedisCounter
	rdb.AddHook(&sent)
	c := New(st, redisgateway.NewClient(rdb), time.Second, slog.New(slog.DiscardHandler))
	require.NoError(b, c.Refresh(ctx))
	require.NoError(b, c.Refresh(ctx))
	proxy.SetCut(true)
	sent.Reset()
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Refresh(ctx); err == nil {
			b.Fatal("a refresh cut from Redis reported no error")
		}
	}
	b.ReportMetric(float64(sent.Commands())/float64(b.N), "redis-cmds/op")
}
