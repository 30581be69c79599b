package api

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/netproxy"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/store"
)

// mustRecorderBehindProxy is a hold recorder on a store whose link to
// MariaDB the test can cut, with a sale of 5 units.
func mustRecorderBehindProxy(t *testing.T) (*holdRecorder, *metrics, *netproxy.Proxy, *domain.Sale) {
	t.Helper()
	proxy, dsn := testenv.MustMySQLProxy(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	testenv.MustStore(t) // migrated
	st, err := store.Open(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	sale := testenv.MustSale(t, st, 5)
	m, err := newMetrics(prometheus.NewRegistry(), func() float64 { return 0 })
	require.NoError(t, err)
	return newHoldRecorder(st, slog.New(slog.NewTextHandler(io.Discard, nil)), m.holdRecords), m, proxy, sale
}

// A Redis hold is promised (202) only once MySQL has it where the database
// path's quota counts it: with this instance's link to MariaDB cut, the
// hold is refused (503, outcome unknown) and, while a probe is out, the
// others are refused without waiting; the first insert that succeeds again
// reopens the way, and the retried hold is recorded.
func TestAHoldTheDatabaseCannotRecordIsNotPromised(t *testing.T) {
	h, m, proxy, sale := mustRecorderBehindProxy(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	user := testenv.UniqueUser()
	in := domain.RedisHoldInput(domain.DeriveToken([]byte("promise-test"), sale.ID, user, "req-1"), sale.ID, user, "req-1")
	count := func(outcome string) float64 { return testutil.ToFloat64(m.holdRecords.vec.WithLabelValues(outcome)) }

	proxy.SetCut(true)
	require.False(t, h.promise(ctx, in, sale.ModeEpoch), "no 202 the database did not record")
	require.Equal(t, 1.0, count("failed"))
	h.probing.Store(true) // another request is trying
	require.False(t, h.promise(ctx, in, sale.ModeEpoch))
	require.Equal(t, 1.0, count("refused"), "refused at once while a probe is out")
	h.probing.Store(false)

	proxy.SetCut(false)
	require.Eventually(t, func() bool { return h.promise(ctx, in, sale.ModeEpoch) }, 20*time.Second, 100*time.Millisecond,
		"the retry is promised once the insert succeeds")
	require.False(t, h.failing.Load(), "the way is open again")
	r, err := testenv.MustStore(t).FindReservation(ctx, sale.ID, user, "req-1")
	require.NoError(t, err)
	require.Equal(t, domain.StatusQueued, r.Status)
	require.Equal(t, in.Token, r.Token)
}

// While inserts fail, a waitlist hand-over waits: ready answers false until
// the database answers a ping again; a failed hand-over record marks the
// way closed like a failed 202 insert.
func TestHandOversWaitWhileHoldsCannotBeRecorded(t *testing.T) {
	h, _, proxy, sale := mustRecorderBehindProxy(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	user := testenv.UniqueUser()
	req := domain.WaitlistRequestID(1)
	in := domain.RedisHoldInput(domain.DeriveToken([]byte("promise-test"), sale.ID, user, req), sale.ID, user, req)

	require.True(t, h.ready(ctx), "nothing failed yet")
	proxy.SetCut(true)
	require.Error(t, h.record(ctx, in, sale.ModeEpoch))
	require.False(t, h.ready(ctx), "the database does not answer")
	proxy.SetCut(false)
	require.Eventually(t, func() bool { return h.ready(ctx) }, 20*time.Second, 100*time.Millisecond)
	require.NoError(t, h.record(ctx, in, sale.ModeEpoch))
}
