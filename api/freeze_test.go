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
	"github.com/seckill/seckill/degraded"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/authtoken"
	"github.com/seckill/seckill/internal/conn"
	"github.com/seckill/seckill/internal/testkit/testenv"
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

	load := startReserveLoad(h, sale.ID, 16)
	time.Sleep(300 * time.Millisecond) // traffic flows through Redis
	frozen := time.Now()
	srv.Freeze(t)
	thawed := false
	defer func() {
		if !thawed {
			srv.Thaw(t)
		}
	}()
	switched := waitDatabaseMode(t, h, sale.ID, frozen)
	time.Sleep(time.Second)
	load.stop()
	srv.Thaw(t)
	thawed = true
	first, statuses := load.sentWithin(frozen, time.Second)
	require.NotEmpty(t, first)
	sort.Slice(first, func(i, j int) bool { return first[i] < first[j] })
	p99 := first[(len(first)*99+99)/100-1] // nearest rank
	t.Logf("Redis frozen: sale on the database path after %s; %d answers to requests sent in the first second %v, p99 %s, max %s",
		switched, len(first), statuses, p99, first[len(first)-1])
	require.NotZero(t, switched, "the sale never moved to the database path")
	// The breaker opens within a few hundred ms; the sale moves once the
	// fleet (here this one instance) has found Redis down for
	// degraded.DownAfter and looked again (degraded.FleetCheck): about 1.2 s on an
	// idle machine. The bound leaves room for a loaded one; it catches a
	// sale that never moves or waits on something unbounded.
	require.LessOrEqual(t, switched, degraded.DownAfter+4*time.Second, "the sale moves within degraded.DownAfter + 4 s of the freeze")
	// The target is p99 <= timeout + 100 ms (measured: ~250 ms
	// alone); asserted with room for a loaded CI machine, still far below
	// the 2 s ReadTimeout every frozen call waited for before.
	require.Less(t, p99, time.Second, "p99 of the first second's answers")
}

// reserveLoad is clients reserving one sale as new users, each answer
// recorded.
type reserveLoad struct {
	mu      sync.Mutex
	answers []loadAnswer
	done    chan struct{}
	wg      sync.WaitGroup
}

type loadAnswer struct {
	sent    time.Time
	latency time.Duration
	status  int
}

func startReserveLoad(h *harness, saleID int64, clients int) *reserveLoad {
	l := &reserveLoad{done: make(chan struct{})}
	base := testenv.UniqueUser() * 10_000_000
	for c := range clients {
		l.wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-l.done:
					return
				default:
				}
				tok := h.MustToken(base+int64(c*100_000+i), authtoken.RoleUser)
				sent := time.Now()
				r := h.reserve(saleID, tok, "frozen-req-1")
				l.mu.Lock()
				l.answers = append(l.answers, loadAnswer{sent, time.Since(sent), r.Status})
				l.mu.Unlock()
			}
		})
	}
	return l
}

func (l *reserveLoad) stop() {
	close(l.done)
	l.wg.Wait()
}

// sentWithin is the latencies and statuses of the requests sent in [from,
// from+d).
func (l *reserveLoad) sentWithin(from time.Time, d time.Duration) ([]time.Duration, map[int]int) {
	var lat []time.Duration
	statuses := map[int]int{}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, a := range l.answers {
		if a.sent.After(from) && a.sent.Before(from.Add(d)) {
			lat = append(lat, a.latency)
			statuses[a.status]++
		}
	}
	return lat, statuses
}

// waitDatabaseMode is how long after frozen the sale moved to the
// database path, or 0 when it did not within 5 s.
func waitDatabaseMode(t *testing.T, h *harness, saleID int64, frozen time.Time) time.Duration {
	ctx := context.Background()
	for time.Since(frozen) < 5*time.Second {
		got, err := h.st.GetSale(ctx, saleID)
		require.NoError(t, err)
		if got.Mode == domain.ModeDatabase {
			return time.Since(frozen)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return 0
}
