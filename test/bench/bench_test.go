package bench

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testkit/testenv"
)

func TestSummaryPercentiles(t *testing.T) {
	r := newRecorder()
	for i := 1; i <= 1000; i++ {
		r.record(time.Duration(i)*time.Millisecond, 202, nil)
	}
	r.record(time.Millisecond, 0, io.EOF)
	res := summarise("x", "closed", 1, 2*time.Second, []*recorder{r})
	require.EqualValues(t, 1001, res.Requests)
	require.EqualValues(t, 1, res.Errors)
	require.EqualValues(t, 1000, res.Count(202))
	require.InDelta(t, 500, res.P50MS, 2)
	require.InDelta(t, 990, res.P99MS, 2)
	require.InDelta(t, 999, res.P999MS, 2)
	require.InDelta(t, 500.5, res.RPS, 0.01)
}

func TestDSNVia(t *testing.T) {
	dsn, err := DSNVia("root@tcp(127.0.0.1:13306)/seckill_test?parseTime=true", "127.0.0.1:4000")
	require.NoError(t, err)
	addr, err := parseDSN(dsn)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:4000", addr)
}

// Settle retries only the requests answered 503, each with its own
// request, until it gets another answer.
func TestUnknownSettlesEach503WithItsOwnRequest(t *testing.T) {
	var mu sync.Mutex
	tries := map[int64]int{}
	// Request i answers 503 on its first i%4 tries, then 202 when even
	// and 410 when odd.
	op := func(_ context.Context, i int64) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		tries[i]++
		if tries[i] <= int(i%4) {
			return http.StatusServiceUnavailable, nil
		}
		if i%2 == 0 {
			return http.StatusAccepted, nil
		}
		return http.StatusGone, nil
	}
	var u Unknown
	res := ClosedLoop(context.Background(), "settle", 4, time.Minute, 8, u.Record(op))
	require.EqualValues(t, 2, res.Count(http.StatusAccepted))
	require.EqualValues(t, 6, res.Count(http.StatusServiceUnavailable))
	require.Equal(t, 6, u.Len())

	final, err := u.Settle(context.Background(), op)
	require.NoError(t, err)
	require.Equal(t, map[int]int64{http.StatusAccepted: 2, http.StatusGone: 4}, final)
	require.Equal(t, map[int64]int{0: 1, 1: 2, 2: 3, 3: 4, 4: 1, 5: 2, 6: 3, 7: 4}, tries)

	// Cancelled, it stops and says so.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = u.Settle(ctx, op)
	require.ErrorIs(t, err, context.Canceled)
}

// Scenario 1's figures are its median round's, by the round's ratio, not
// the first round's or the fastest.
func TestMedianRoundIsTheMiddleRatio(t *testing.T) {
	round := func(base, test float64) abRound {
		return abRound{base: Result{RPS: base}, test: Result{RPS: test}}
	}
	rounds := []abRound{round(100, 99), round(100, 74), round(200, 170)}
	require.InDelta(t, 0.85, medianRound(rounds).ratio(), 1e-9)
	require.InDelta(t, 0.74, medianRound(rounds[1:2]).ratio(), 1e-9)
	require.InDelta(t, 0.74, medianRound(rounds[:2]).ratio(), 1e-9, "of two, the lower")
	require.Equal(t, 0.99, rounds[0].ratio(), "the rounds keep their order")
}

// Scenario 3 meters the test services' own processes: the redis-server and
// mariadbd that serve the test addresses, found by their command lines.
func TestServicesCPUFindsTheTestServers(t *testing.T) {
	ports, err := mysqlPorts(testenv.MySQLDSN(), nil)
	require.NoError(t, err)
	m, err := servicesCPU(testenv.RedisAddr(), ports)
	require.NoError(t, err)
	cpu, err := m.read()
	require.NoError(t, err)
	require.Greater(t, cpu, 0.0)
	_, err = servicesCPU("127.0.0.1:1", ports)
	require.Error(t, err, "no redis-server serves port 1")
}

func TestMetricSumAddsEveryLabelSet(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "# HELP x_total x\nx_total 3\nx_total_other 100\ny_total{a=\"1\"} 2\ny_total{a=\"2\"} 5\n")
	}))
	defer srv.Close()
	x, err := metricSum(context.Background(), srv.URL, "x_total")
	require.NoError(t, err)
	require.Equal(t, 3.0, x)
	y, err := metricSum(context.Background(), srv.URL, "y_total")
	require.NoError(t, err)
	require.Equal(t, 7.0, y)
}
