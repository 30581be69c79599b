package sales_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/inflight"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/salecache"
	"github.com/seckill/seckill/sales"
)

// slowTemporal is a start function that holds every start until answer
// closes, then answers err, counting the starts in flight and per sale.
type slowTemporal struct {
	answer   chan struct{}
	err      error
	inFlight inflight.Gauge
	mu       sync.Mutex
	started  map[int64]int
}

func newSlowTemporal(err error) *slowTemporal {
	return &slowTemporal{answer: make(chan struct{}), err: err, started: map[int64]int{}}
}

func (f *slowTemporal) start(ctx context.Context, in domain.SaleInput) error {
	defer f.inFlight.Enter()()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-f.answer:
	}
	if f.err != nil {
		return f.err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.started[in.SaleID]++
	return nil
}

func (f *slowTemporal) counts() (inFlight, most, started int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inFlight.Now(), f.inFlight.Most(), len(f.started)
}

// startsOperator is an operator on the package's database and Redis whose
// sale workflow starts go to start, its background work run until the
// answered stop function returns, which waits for it.
func startsOperator(t *testing.T, start func(context.Context, domain.SaleInput) error, queued int, logs *bytes.Buffer) (*sales.Operator, func()) {
	st := testenv.MustStore(t)
	logger := slog.New(slog.NewJSONHandler(logs, nil))
	client := redisgateway.NewClient(testenv.MustRedis(t))
	var bg sync.WaitGroup
	stop := make(chan struct{})
	op := sales.NewOperatorStartingWith(sales.OperatorDeps{Store: st, Redis: client, Cache: salecache.New(st, client, time.Second, logger),
		Logger: logger, Go: bg.Go, Stop: stop}, start, queued)
	var once sync.Once
	stopAll := func() { once.Do(func() { close(stop); bg.Wait() }) }
	t.Cleanup(stopAll)
	return op, stopAll
}

// createWave creates n sales through op, as fast as it answers.
func createWave(t *testing.T, op *sales.Operator, n int) []int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ids := make([]int64, n)
	now := time.Now().UTC()
	for i := range ids {
		sale, err := op.Create(ctx, &domain.Sale{GoodsID: 1, Title: fmt.Sprintf("%s %d", t.Name(), i), PriceCents: 100, StockTotal: 5, Buckets: 1,
			StartsAt: now.Add(time.Hour), EndsAt: now.Add(2 * time.Hour), PaymentWindowSeconds: 900, PerUserLimit: 1}, "")
		require.NoError(t, err)
		ids[i] = sale.ID
	}
	return ids
}

// A wave of creations whose starts Temporal is slow to answer never has
// more than SaleStartsInFlight starts in flight (and has that many: the
// wave waits in the queue, not at the server); once Temporal answers,
// every sale of the wave is started, once.
func TestSaleStartsOfAWaveAreBoundedInFlightAndAllStart(t *testing.T) {
	temporal := newSlowTemporal(nil)
	var logs bytes.Buffer
	op, stop := startsOperator(t, temporal.start, 1000, &logs)
	const wave = 40
	ids := createWave(t, op, wave)
	require.Eventually(t, func() bool { n, _, _ := temporal.counts(); return n == sales.SaleStartsInFlight },
		10*time.Second, 10*time.Millisecond, "starts in flight while Temporal is slow")
	time.Sleep(100 * time.Millisecond) // room for a start beyond the bound
	_, most, started := temporal.counts()
	require.Equal(t, sales.SaleStartsInFlight, most, "most starts in flight")
	require.Zero(t, started)

	close(temporal.answer)
	require.Eventually(t, func() bool { _, _, n := temporal.counts(); return n == wave }, 20*time.Second, 10*time.Millisecond,
		"every sale of the wave started")
	stop()
	_, most, _ = temporal.counts()
	require.LessOrEqual(t, most, sales.SaleStartsInFlight)
	for _, id := range ids {
		require.Equal(t, 1, temporal.started[id], "starts of sale %d", id)
	}
	require.NotContains(t, logs.String(), "left to the worker's sweeper")
}

// The sales whose start does not fit in the queue or fails (Temporal
// unavailable) are left to the worker's sweeper, counted in a summary,
// not logged one by one; the stop ends the starter.
func TestSaleStartsLeftToTheSweeperAreSummedUp(t *testing.T) {
	temporal := newSlowTemporal(fmt.Errorf("start sale workflow: %w", serviceerror.NewUnavailable("connection refused")))
	var logs bytes.Buffer
	const queued, wave = 5, 20
	op, stop := startsOperator(t, temporal.start, queued, &logs)
	createWave(t, op, wave)
	close(temporal.answer)
	stop()

	var full, left, lines int
	for line := range bytes.Lines(logs.Bytes()) {
		var rec map[string]any
		require.NoError(t, json.Unmarshal(line, &rec))
		if rec["msg"] != "sale workflow starts left to the worker's sweeper" {
			continue
		}
		require.Equal(t, "WARN", rec["level"])
		full += int(rec["queue_full"].(float64))
		left += int(rec["queue_full"].(float64)) + int(rec["failed"].(float64)) + int(rec["at_stop"].(float64))
		lines++
	}
	require.Equal(t, wave, left, "every sale left to the sweeper, counted; logs:\n%s", logs.String())
	require.GreaterOrEqual(t, full, wave-queued-sales.SaleStartsInFlight, "a wave beyond the queue overflows it")
	require.Less(t, lines, 3, "summaries, not a line per sale")
}
