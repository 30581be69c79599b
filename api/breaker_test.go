package api

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/sony/gobreaker/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/degraded"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/authtoken"
	"github.com/seckill/seckill/internal/testkit/netproxy"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/reservation"
	"github.com/seckill/seckill/sales"
)

// The breaker issue's story in one process: Redis dies mid-sale, the
// breaker opens, the sale moves to the database path at the fallback rate,
// Redis comes back, the sale is resynchronised, and units sold by both paths
// together never exceed the stock.
func TestRedisOutageFallsBackToTheDatabaseAndReturns(t *testing.T) {
	proxy, err := netproxy.Start(testenv.RedisAddr(), 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{proxy.Addr()}, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	h := MustHarnessWithRedis(t, rdb, func(c *config.Config) {
		c.FallbackRPS = 20
		c.RedisTimeout = 200 * time.Millisecond
	})
	const stock = 12
	sale := h.MustWarmSale(stock)
	o := &outageBuyers{h: h, saleID: sale.ID, base: testenv.UniqueUser() * 1000, tokens: map[int64]string{}}

	// Four units through Redis.
	for i := int64(0); i < 4; i++ {
		r := o.reserveAs(o.base+i, "outage-req-1")
		require.Equal(t, 202, r.Status, string(r.Body))
		o.tokens[o.base+i] = r.json(t)["token"].(string)
	}
	ctx := context.Background()
	require.NoError(t, h.st.RecordRedisStock(ctx, sale.ID, stock-4, time.Now()))

	// Redis dies: the first requests fail with 503 (outcome unknown) until
	// the breaker opens; then the database path takes over once every
	// Redis reservation sent before the switch has passed its deadline
	// (503 meanwhile).
	o.fallBack(t, proxy)
	got, err := h.st.GetSale(ctx, sale.ID)
	require.NoError(t, err)
	require.Equal(t, domain.ModeDatabase, got.Mode)
	require.EqualValues(t, 2, got.ModeEpoch)
	o.replayAndRateLimit(t)
	o.comeBack(t, proxy, rdb)
	o.checkNeverOversold(t, stock)
}

// outageBuyers reserve one sale as distinct users from base on.
type outageBuyers struct {
	h      *harness
	saleID int64
	base   int64
	tokens map[int64]string // user -> token of their 202
}

func (o *outageBuyers) reserveAs(user int64, req string) response {
	return o.h.reserve(o.saleID, o.h.MustToken(user, authtoken.RoleUser), req)
}

// patiently waits out the fallback rate limit.
func (o *outageBuyers) patiently(user int64, req string) response {
	for {
		r := o.reserveAs(user, req)
		if r.Status != 429 {
			return r
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// fallBack cuts Redis and reserves until the database path sold three
// units, requiring the breaker to have tripped on the way.
func (o *outageBuyers) fallBack(t *testing.T, proxy *netproxy.Proxy) {
	proxy.SetCut(true)
	var unavailable, accepted int
	cut := time.Now()
	for i := int64(4); time.Since(cut) < 20*time.Second && accepted < 3; i++ {
		r := o.reserveAs(o.base+i, "outage-req-1")
		switch r.Status {
		case 503:
			unavailable++
			time.Sleep(50 * time.Millisecond)
		case 202:
			accepted++
			o.tokens[o.base+i] = r.json(t)["token"].(string)
		case 429: // the fallback rate: wait for the bucket
			time.Sleep(100 * time.Millisecond)
		default:
			t.Fatalf("unexpected %d %s", r.Status, r.Body)
		}
	}
	require.Equal(t, 3, accepted, "the database path sells while Redis is down")
	require.GreaterOrEqual(t, unavailable, degraded.BreakerTrip)
}

// replayAndRateLimit: on the database path a replay gets its token, a
// holder gets 409, and a burst beyond SECKILL_FALLBACK_RPS gets 429.
func (o *outageBuyers) replayAndRateLimit(t *testing.T) {
	// A replay on the database path gets the same token; a holder gets 409.
	var someone int64
	for u := range o.tokens {
		if u >= o.base+4 {
			someone = u
			break
		}
	}
	r := o.patiently(someone, "outage-req-1")
	require.Equal(t, 202, r.Status)
	require.Equal(t, o.tokens[someone], r.json(t)["token"])
	require.Equal(t, 409, o.patiently(someone, "outage-req-2").Status)

	// The lowered rate: a burst beyond SECKILL_FALLBACK_RPS gets 429.
	limited := 0
	for i := int64(100); i < 160; i++ {
		r := o.reserveAs(o.base+i, "outage-req-1")
		if r.Status == 429 {
			limited++
			require.NotEmpty(t, r.Header.Get("Retry-After"))
		} else if r.Status == 202 {
			o.tokens[o.base+i] = r.json(t)["token"].(string)
		}
	}
	require.Positive(t, limited, "the database path is rate limited")
}

// comeBack heals Redis, resynchronises the sale and sells out the rest
// through Redis.
func (o *outageBuyers) comeBack(t *testing.T, proxy *netproxy.Proxy, rdb redis.UniversalClient) {
	ctx := context.Background()
	// Redis comes back; one instance resynchronises the sale (the worker's
	// Resyncer does this in production).
	proxy.SetCut(false)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ok, err := sales.Resync(ctx, o.h.st, redisgateway.NewClient(rdb), nil, o.saleID)
		assert.NoError(c, err)
		assert.True(c, ok)
	}, 10*time.Second, 200*time.Millisecond)
	// Within a second the instance sees Redis mode and the breaker closed.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		r := o.reserveAs(o.base+500, "after-outage-1")
		assert.Contains(c, []int{202, 410}, r.Status, string(r.Body))
	}, 10*time.Second, 200*time.Millisecond)
	// Sell out the rest through Redis.
	for i := int64(501); i < 530; i++ {
		o.reserveAs(o.base+i, "after-outage-1")
	}
}

// checkNeverOversold: never more than the stock, by both paths together.
func (o *outageBuyers) checkNeverOversold(t *testing.T, stock int64) {
	ctx := context.Background()
	left := o.h.redisInt(redisgateway.SaleKeys(o.saleID).Stock)
	require.Zero(t, left, "Redis sold out")
	buyers, err := o.h.rdb.SCard(ctx, redisgateway.SaleKeys(o.saleID).Buyers).Result()
	require.NoError(t, err)
	counts, err := o.h.st.CountReservations(ctx, o.saleID)
	require.NoError(t, err)
	dbPath := counts[domain.StatusPendingPayment]
	redisHolds := o.h.xlen(redisgateway.SaleKeys(o.saleID).Inbox)
	require.EqualValues(t, stock, dbPath+redisHolds, "database-path orders %d + Redis holds %d: exactly the stock", dbPath, redisHolds)
	require.EqualValues(t, stock, buyers, "every unit has exactly one buyer")
}

// A fresh instance's first burst stalls its own Redis calls (a cold pool,
// GC assists, a starved CPU) while Redis answers. Here the API's one pooled
// connection is held by a blocking command, so every reservation of a
// burst times out waiting for it, and so does its one retry: each answers
// 503 (outcome unknown), but the breaker stays closed and the sale on
// Redis, because Redis kept answering the heartbeat on its aside
// connection. Five consecutive timeouts opened it before.
func TestClientStallKeepsTheBreakerClosed(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(), PoolSize: 1, MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	h := MustHarnessWithRedis(t, rdb, func(c *config.Config) { c.RedisTimeout = 100 * time.Millisecond })
	sale := h.MustWarmSale(10)
	base := testenv.UniqueUser() * 1000

	held := holdTheConnection(t, rdb, 3*time.Second)
	const calls = 3 * degraded.BreakerTrip
	var wg sync.WaitGroup
	answers := make([]response, calls)
	for i := range calls {
		wg.Go(func() {
			answers[i] = h.reserve(sale.ID, h.MustToken(base+int64(i), authtoken.RoleUser), "stall-req-1")
		})
	}
	wg.Wait()
	for _, r := range answers {
		require.Equal(t, 503, r.Status, string(r.Body))
	}
	require.NoError(t, <-held, "the BLPOP held the connection to its end")

	require.Equal(t, gobreaker.StateClosed, h.services.Guard.BreakerState())
	stalls := testutil.ToFloat64(h.services.Metrics.Filtered(reservation.LayerRedis, "client_stall"))
	require.EqualValues(t, calls, stalls, "every timeout is the client's")
	got, err := h.st.GetSale(context.Background(), sale.ID)
	require.NoError(t, err)
	require.Equal(t, domain.ModeRedis, got.Mode)
	// The same request, retried, goes through Redis.
	r := h.reserve(sale.ID, h.MustToken(base, authtoken.RoleUser), "stall-req-1")
	require.Equal(t, 202, r.Status, string(r.Body))
}

// A call the API stalled past its timeout while Redis answered is asked
// once more in the same request, as the client would: here the one pooled
// connection is busy for one and a half timeouts, the first call times
// out, the second gets the connection and the reservation its 202 at once,
// not a 503 and a retry a second later.
func TestClientStallIsAskedAgainInTheRequest(t *testing.T) {
	const timeout = 200 * time.Millisecond
	rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(), PoolSize: 1, MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	h := MustHarnessWithRedis(t, rdb, func(c *config.Config) { c.RedisTimeout = timeout })
	sale := h.MustWarmSale(10)
	user := testenv.UniqueUser()

	held := holdTheConnection(t, rdb, timeout*3/2)
	began := time.Now()
	r := h.reserve(sale.ID, h.MustToken(user, authtoken.RoleUser), "stalled-req-1")
	require.Equal(t, 202, r.Status, string(r.Body))
	require.Greater(t, time.Since(began), timeout, "the first call timed out")
	require.NoError(t, <-held)
	require.Zero(t, testutil.ToFloat64(h.services.Metrics.Filtered(reservation.LayerRedis, "client_stall")))
	require.Equal(t, gobreaker.StateClosed, h.services.Guard.BreakerState())
	// The replay answers the same token: one reservation.
	again := h.reserve(sale.ID, h.MustToken(user, authtoken.RoleUser), "stalled-req-1")
	require.Equal(t, 202, again.Status, string(again.Body))
	require.Equal(t, r.json(t)["token"], again.json(t)["token"])
}

// holdTheConnection takes rdb's one pooled connection with a BLPOP of d on
// a key nobody writes; the channel gets its error (nil at its timeout).
func holdTheConnection(t *testing.T, rdb *redis.Client, d time.Duration) <-chan error {
	t.Helper()
	held := make(chan error, 1)
	go func() {
		// Do, not BLPop: go-redis rounds a BLPop timeout up to whole seconds.
		key := fmt.Sprintf("seckill:test:hog:%d", testenv.UniqueUser())
		err := rdb.Do(context.Background(), "BLPOP", key, strconv.FormatFloat(d.Seconds(), 'f', 3, 64)).Err()
		if errors.Is(err, redis.Nil) {
			err = nil
		}
		held <- err
	}()
	require.Eventually(t, func() bool { s := rdb.PoolStats(); return s.IdleConns == 0 && s.TotalConns == 1 }, time.Second, time.Millisecond)
	time.Sleep(20 * time.Millisecond) // the BLPOP is on the wire
	return held
}
