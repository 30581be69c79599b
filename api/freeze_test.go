package api

import (
	"context"
	"net"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/fleet"
	"github.com/seckill/seckill/internal/authtoken"
	"github.com/seckill/seckill/internal/conn"
	"github.com/seckill/seckill/internal/testenv"
)

// mustOwnRedis starts a redis-server of the test's own, so that freezing it
// touches no other test.
func mustOwnRedis(tb testing.TB) (*testenv.Proc, string) {
	tb.Helper()
	addr := testenv.FreeAddr(tb)
	_, port, err := net.SplitHostPort(addr)
	require.NoError(tb, err)
	srv := testenv.StartCommand(tb, "redis", "redis-server", nil, "--port", port, "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--protected-mode", "no", "--dir", tb.TempDir())
	ping := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	tb.Cleanup(func() { _ = ping.Close() })
	srv.WaitReady(tb, 30*time.Second, func(ctx context.Context) error { return ping.Ping(ctx).Err() })
	return srv, addr
}

// mustHarnessOnOwnRedis starts the API on a redis-server of its own (see
// mustOwnRedis), through the production client of internal/conn.
func mustHarnessOnOwnRedis(tb testing.TB, mutate func(*config.Config)) (*harness, *testenv.Proc) {
	tb.Helper()
	srv, addr := mustOwnRedis(tb)
	setup := func(c *config.Config) {
		c.RedisAddrs = []string{addr}
		mutate(c)
	}
	cfg := testenv.Config(tb)
	setup(cfg)
	rdb, err := conn.Redis(cfg)
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = rdb.Close() })
	return MustHarnessWithRedis(tb, rdb, setup), srv
}

// With redis-server frozen (SIGSTOP) under 16 concurrent clients, every
// hot-path call gives up after SECKILL_REDIS_TIMEOUT (on the production
// client of internal/conn), so the breaker opens and the sale moves to the
// database path within a second. Before ContextTimeoutEnabled each call
// waited for the client's 2 s ReadTimeout.
func TestFrozenRedisIsBoundedByTheHotPathTimeout(t *testing.T) {
	const timeout = 250 * time.Millisecond
	h, srv := mustHarnessOnOwnRedis(t, func(c *config.Config) {
		c.RedisTimeout = timeout
		c.FallbackRPS = 1000
		c.PerAddrRPS = 1e6 // one address sends for everyone
	})
	sale := h.MustWarmSale(1_000_000)
	ctx := context.Background()
	require.NoError(t, h.st.RecordRedisStock(ctx, sale.ID, 1_000_000, time.Now()))

	type answer struct {
		sent    time.Time
		latency time.Duration
		status  int
	}
	var (
		mu      sync.Mutex
		answers []answer
		stop    = make(chan struct{})
		wg      sync.WaitGroup
	)
	base := testenv.UniqueUser() * 10_000_000
	for c := range 16 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				user := base + int64(c*100_000+i)
				tok := h.MustToken(user, authtoken.RoleUser)
				sent := time.Now()
				r := h.reserve(sale.ID, tok, "frozen-req-1")
				mu.Lock()
				answers = append(answers, answer{sent, time.Since(sent), r.Status})
				mu.Unlock()
			}
		})
	}
	time.Sleep(300 * time.Millisecond) // traffic flows through Redis
	frozen := time.Now()
	srv.Freeze(t)
	thawed := false
	defer func() {
		if !thawed {
			srv.Thaw(t)
		}
	}()
	var switched time.Duration
	for time.Since(frozen) < 5*time.Second {
		got, err := h.st.GetSale(ctx, sale.ID)
		require.NoError(t, err)
		if got.Mode == domain.ModeDatabase {
			switched = time.Since(frozen)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	srv.Thaw(t)
	thawed = true

	var first []time.Duration
	statuses := map[int]int{}
	mu.Lock()
	for _, a := range answers {
		if a.sent.After(frozen) && a.sent.Before(frozen.Add(time.Second)) {
			first = append(first, a.latency)
			statuses[a.status]++
		}
	}
	mu.Unlock()
	require.NotEmpty(t, first)
	sort.Slice(first, func(i, j int) bool { return first[i] < first[j] })
	p99 := first[(len(first)*99+99)/100-1] // nearest rank
	t.Logf("Redis frozen: sale on the database path after %s; %d answers to requests sent in the first second %v, p99 %s, max %s",
		switched, len(first), statuses, p99, first[len(first)-1])
	require.NotZero(t, switched, "the sale never moved to the database path")
	// The breaker opens within a few hundred ms; the sale moves once the
	// fleet (here this one instance) has found Redis down for
	// fleet.DownAfter and looked again (fleet.Check): about 1.2 s on an
	// idle machine. The bound leaves room for a loaded one; it catches a
	// sale that never moves or waits on something unbounded.
	require.LessOrEqual(t, switched, fleet.DownAfter+4*time.Second, "the sale moves within fleet.DownAfter + 4 s of the freeze")
	// The target is p99 <= timeout + 100 ms (measured: ~250 ms
	// alone); asserted with room for a loaded CI machine, still far below
	// the 2 s ReadTimeout every frozen call waited for before.
	require.Less(t, p99, time.Second, "p99 of the first second's answers")
}
