// Package idle holds the fleet's idle cost: with live sales nobody buys,
// what an API and a worker ask of Redis does not grow with the number of
// sales beyond the goal (docs/architecture.md, how instances learn about
// sales).
package idle

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/redisnode"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/store"
	"github.com/seckill/seckill/test/testsale"
)

// mustOwnRedis starts a redis-server of the test's own, so its command
// counts are the test's processes' alone.
func mustOwnRedis(t *testing.T) (redis.UniversalClient, string) {
	t.Helper()
	addr := testenv.FreeAddr(t)
	_, port, _ := strings.Cut(addr, ":")
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	srv := testenv.StartCommand(t, "redis", "redis-server", nil, redisnode.Args(redisnode.Options{Port: p, Dir: t.TempDir()})...)
	srv.WaitReady(t, 30*time.Second, func(ctx context.Context) error { return rdb.Ping(ctx).Err() })
	return rdb, addr
}

// commandCalls reads INFO commandstats: calls by command.
func commandCalls(t *testing.T, ctx context.Context, rdb redis.UniversalClient) map[string]int64 {
	t.Helper()
	info, err := rdb.Info(ctx, "commandstats").Result()
	require.NoError(t, err)
	calls := map[string]int64{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		for _, f := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				require.NoError(t, err)
				calls[strings.TrimPrefix(name, "cmdstat_")] = n
			}
		}
	}
	return calls
}

// countCommands is the commands Redis served over d, by command, less the
// test's own INFO.
func countCommands(t *testing.T, ctx context.Context, rdb redis.UniversalClient, d time.Duration) (map[string]int64, int64) {
	t.Helper()
	before := commandCalls(t, ctx, rdb)
	time.Sleep(d)
	after := commandCalls(t, ctx, rdb)
	diff := map[string]int64{}
	var total int64
	for cmd, n := range after {
		if cmd == "info" {
			continue
		}
		if d := n - before[cmd]; d > 0 {
			diff[cmd] = d
			total += d
		}
	}
	return diff, total
}

func describe(diff map[string]int64) string {
	cmds := make([]string, 0, len(diff))
	for c := range diff {
		cmds = append(cmds, c)
	}
	sort.Slice(cmds, func(i, j int) bool { return diff[cmds[i]] > diff[cmds[j]] })
	var b strings.Builder
	for _, c := range cmds {
		fmt.Fprintf(&b, " %s=%d", c, diff[c])
	}
	return b.String()
}

func mustLiveSales(t *testing.T, st *store.Store, rdb redis.UniversalClient, n int) []*domain.Sale {
	t.Helper()
	out := make([]*domain.Sale, n)
	for i := range out {
		out[i] = testenv.MustSale(t, st, 50)
		testsale.MustWarm(t, st, rdb, out[i])
	}
	return out
}

// The goal: at idle, an instance costs Redis at most this many commands a
// second per live sale.
const perSalePerInstance = 0.05

const (
	fewSales  = 10
	manySales = 200
	// window is how long a count runs: long enough for a fair share of
	// every loop's full pass, which is spread evenly over its period.
	window = 30 * time.Second
	// othersWindow is how long the other sales' commands are counted, idle
	// and beside a burst: a whole period of the API's sale cache pass (a
	// minute), its largest share, so both counts take all of it and differ
	// only by the shares of the longer passes.
	othersWindow = time.Minute
	// settle is how long after the last warm-up the loops take to read
	// the new sales once, as new or named by the change feed.
	settle = 15 * time.Second
)

// TestIdleCostDoesNotGrowWithSales: an API and a worker on a Redis of the
// test's own serve 10 idle live sales, then 200; the commands Redis serves
// a second grow by at most the goal per added sale and instance. Then a
// burst of reservations on one sale costs the other sales' keys no more
// than idle did.
func TestIdleCostDoesNotGrowWithSales(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rdb, addr := mustOwnRedis(t)
	st := testenv.MustStore(t)
	sales := mustLiveSales(t, st, rdb, fewSales)
	// No sale workflows: the sales, made at one instant, would all look at
	// their keys at the same instants (their timers back off alike), a wave
	// that lands in one count window and not the next. A workflow's look
	// costs a sale one command every five minutes at most; scenario 13 of
	// the bench counts it with everything else.
	env := testenv.ProcEnv(t, fmt.Sprintf("idle-%d", time.Now().UnixNano()), map[string]string{"REDIS_ADDR": addr, "SECKILL_SALE_SWEEP": "off"})
	api := testenv.MustAPI(t, "api", env)
	testenv.MustWorker(t, "worker", env)
	const instances = 2

	time.Sleep(settle)
	few, fewTotal := countCommands(t, ctx, rdb, window)
	sales = append(sales, mustLiveSales(t, st, rdb, manySales-fewSales)...)
	time.Sleep(settle)
	many, manyTotal := countCommands(t, ctx, rdb, window)
	secs := window.Seconds()
	perSale := (float64(manyTotal) - float64(fewTotal)) / secs / (manySales - fewSales) / instances
	t.Logf("%d sales: %.1f commands/s:%s", fewSales, float64(fewTotal)/secs, describe(few))
	t.Logf("%d sales: %.1f commands/s:%s", manySales, float64(manyTotal)/secs, describe(many))
	t.Logf("each added idle sale: %.4f commands/s per instance (goal %.2f)", perSale, perSalePerInstance)
	require.LessOrEqual(t, perSale, perSalePerInstance, "an idle sale's cost per instance")

	burst := sales[0]
	others := func() int64 { return otherSalesCommands(t, addr, burst.ID, othersWindow) }
	idleOthers := others()
	stopBurst := startBurst(t, ctx, api.URL, burst.ID)
	burstOthers := others()
	sold := stopBurst()
	t.Logf("commands on the other %d sales' keys over %s: %d idle, %d beside a burst of %d reservations on sale %d",
		len(sales)-1, othersWindow, idleOthers, burstOthers, sold, burst.ID)
	require.Positive(t, sold, "the burst reserved")
	// The longer passes' shares vary between windows (by a quarter seen);
	// a burst that made a loop read the other sales on its ticks would
	// cost them a command a second each, thousands over the window.
	require.LessOrEqual(t, burstOthers, idleOthers+idleOthers/2+50, "a burst on one sale costs the others nothing")
}

var saleKeyRe = regexp.MustCompile(`\{sale:(\d+)\}`)

// otherSalesCommands counts, over d, the commands Redis runs (scripts'
// own included) on keys of a sale other than except, by MONITOR on a
// connection of its own (RESP: "+OK", then a status line per command).
func otherSalesCommands(t *testing.T, addr string, except int64, d time.Duration) int64 {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	require.NoError(t, conn.SetDeadline(time.Now().Add(d)))
	_, err = conn.Write([]byte("MONITOR\r\n"))
	require.NoError(t, err)
	rd := bufio.NewReaderSize(conn, 1<<20)
	first, err := rd.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "+OK\r\n", first)
	skip := strconv.FormatInt(except, 10)
	var n int64
	for {
		line, err := rd.ReadString('\n')
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return n
		}
		require.NoError(t, err)
		for _, m := range saleKeyRe.FindAllStringSubmatch(line, -1) {
			if m[1] != skip {
				n++
				break
			}
		}
	}
}

// startBurst sends reservations of new users to one sale, a few at a
// time, until the returned stop, which answers how many got a 202.
func startBurst(t *testing.T, ctx context.Context, apiURL string, saleID int64) (stop func() int64) {
	t.Helper()
	bctx, cancel := context.WithCancel(ctx)
	var accepted atomic.Int64
	var wg sync.WaitGroup
	url := fmt.Sprintf("%s/api/v1/sales/%d/reservations", apiURL, saleID)
	for w := range 4 {
		wg.Go(func() {
			for i := 0; bctx.Err() == nil; i++ {
				code, _, err := testenv.Do(http.MethodPost, url, testenv.UniqueUser(), map[string]any{"request_id": fmt.Sprintf("idle-burst-%d-%d", w, i)})
				if err == nil && code == http.StatusAccepted {
					accepted.Add(1)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	return func() int64 {
		cancel()
		wg.Wait()
		return accepted.Load()
	}
}
