package reservation

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/netproxy"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
)

// A start that fails while Temporal is unreachable is recorded QUEUED in
// the database and retried until it succeeds: no relay runs here, so the
// workflow exists afterwards only because the queue kept its start: with
// the hold's inbox entry lost as well (keys deleted, an AOF's last second)
// no relay could start it.
func TestStarterRetriesAStartUntilTemporalAnswers(t *testing.T) {
	proxy, err := netproxy.Start(testenv.TemporalAddress(), 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tc, err := client.DialContext(dctx, client.Options{HostPort: proxy.Addr(), Logger: testenv.TemporalLogger{}})
	require.NoError(t, err)
	t.Cleanup(tc.Close)
	direct := testenv.MustTemporal(t)

	st := testenv.MustStore(t)
	sale := testenv.MustSale(t, st, 5)
	m := &outcomes{n: map[string]int{}}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	queue := "starter-test-unpolled" // no worker: the workflow just runs
	s := NewStartQueue(StartQueueDeps{Capacity: 16, Temporal: tc, TaskQueue: queue, Store: st, Redis: redisgateway.NewClient(testenv.MustRedis(t)), RedisTimeout: time.Second, Logger: logger, Count: m.count})
	stop := make(chan struct{})
	s.Run(stop, func() context.Context { return context.Background() })
	t.Cleanup(func() { close(stop); s.Wait() })

	// hold is a Redis hold's start whose workflow the test ends.
	hold := func(user int64, req string) domain.OrderInput {
		in := domain.RedisHoldInput(domain.DeriveToken([]byte("starter-test"), sale.ID, user, req), sale.ID, user, req)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = direct.TerminateWorkflow(ctx, domain.OrderWorkflowID(in.Token), "", "test over")
		})
		return in
	}
	user := testenv.UniqueUser()
	in := hold(user, "req-1")
	proxy.SetCut(true)
	s.Enqueue(context.Background(), in)
	require.Eventually(t, func() bool { return m.of("failed") >= 1 },
		20*time.Second, 20*time.Millisecond, "the start fails while Temporal is cut off")
	// (The failure is counted just before the start is kept.)
	require.Eventually(t, func() bool { return s.retry.len() == 1 }, 5*time.Second, 10*time.Millisecond, "the failed start is kept")
	// ... and recorded, so that it outlives this process.
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		r, err := st.GetReservation(ctx, in.Token)
		return err == nil && r.Status == domain.StatusQueued && r.UserID == user && r.RequestID == "req-1"
	}, 10*time.Second, 50*time.Millisecond, "the kept start is recorded QUEUED")
	// With Temporal suspect, a new start's reservation is recorded before
	// enqueue returns (before the request answers 202), however many
	// starts wait in the queue: a failing start can take its whole timeout
	// to fail, and the API may die meanwhile. It is kept
	// for the retry loop.
	in2 := hold(testenv.UniqueUser(), "req-2")
	asked := time.Now()
	s.Enqueue(context.Background(), in2)
	require.Less(t, time.Since(asked), startTimeout, "enqueue does not wait for a start")
	ctx2, cancel2 := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel2()
	r2, err := st.GetReservation(ctx2, in2.Token)
	require.NoError(t, err, "recorded before the 202")
	require.Equal(t, domain.StatusQueued, r2.Status)
	require.Equal(t, 2, s.retry.len(), "kept for the retry loop")
	require.Empty(t, s.retry.unrecorded(), "both recorded")
	proxy.SetCut(false)

	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := direct.DescribeWorkflow(ctx, domain.OrderWorkflowID(in.Token), "")
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "the start was retried once Temporal answered")
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := direct.DescribeWorkflow(ctx, domain.OrderWorkflowID(in2.Token), "")
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "the second start too")
	require.Eventually(t, func() bool { return s.retry.len() == 0 }, 10*time.Second, 20*time.Millisecond)
	require.GreaterOrEqual(t, m.of("retried"), 1)
}

// The database path's starts mark their outbox entries dispatched, many in
// one statement, so the outbox relay does not start them again; the marks
// still queued when the starter stops are written before it returns.
func TestStarterMarksDatabasePathStartsDispatched(t *testing.T) {
	tc := testenv.MustTemporal(t)
	st := testenv.MustStore(t)
	sale := testenv.MustSale(t, st, 10)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, st.RecordRedisStock(ctx, sale.ID, 10, time.Now()))
	_, err := st.SwitchToDatabase(ctx, sale.ID, 0)
	require.NoError(t, err)
	m := &outcomes{n: map[string]int{}}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := NewStartQueue(StartQueueDeps{Capacity: 16, Temporal: tc, TaskQueue: "starter-test-unpolled", Store: st, Redis: redisgateway.NewClient(testenv.MustRedis(t)), RedisTimeout: time.Second, Logger: logger, Count: m.count})
	stop := make(chan struct{})
	s.Run(stop, func() context.Context { return context.Background() })

	base := testenv.UniqueUser() * 100
	for i := range 6 {
		req := "mark-" + string(rune('a'+i))
		in := domain.DatabasePathInput(domain.DeriveToken([]byte("starter-test"), sale.ID, base+int64(i), req), sale.ID, base+int64(i), req)
		_, _, err := st.ReserveInDB(ctx, in)
		require.NoError(t, err)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = tc.TerminateWorkflow(ctx, domain.OrderWorkflowID(in.Token), "", "test over")
		})
		s.Enqueue(ctx, in)
	}
	require.Eventually(t, func() bool { return m.of("started") == 6 },
		20*time.Second, 20*time.Millisecond)
	close(stop)
	s.Wait()
	var unmarked int
	require.NoError(t, st.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM outbox WHERE sale_id = ? AND dispatched_at IS NULL", sale.ID).Scan(&unmarked))
	require.Zero(t, unmarked, "every started workflow's outbox entry is marked")
}
