package reservation

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/netproxy"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/store"
)

// outcomes counts a recorder's outcomes.
type outcomes struct {
	mu sync.Mutex
	n  map[string]int
}

func (o *outcomes) count(outcome string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.n[outcome]++
}

func (o *outcomes) of(outcome string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n[outcome]
}

// mustRecorderBehindProxy is a hold recorder on a store whose link to
// MariaDB the test can cut, with a sale of 5 units.
func mustRecorderBehindProxy(t *testing.T) (*Holds, *outcomes, *netproxy.Proxy, *domain.Sale) {
	t.Helper()
	proxy, dsn := testenv.MustMySQLProxy(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	testenv.MustStore(t) // migrated
	st, err := store.Open(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	sale := testenv.MustSale(t, st, 5)
	o := &outcomes{n: map[string]int{}}
	return newHolds(st, slog.New(slog.DiscardHandler), o.count), o, proxy, sale
}

// A Redis hold is promised (202) only once MySQL has it where the database
// path's quota counts it: with this instance's link to MariaDB cut, the
// hold is refused (503, outcome unknown) and, while a probe is out, the
// others are refused without waiting; the first insert that succeeds again
// reopens the way, and the retried hold is recorded.
func TestAHoldTheDatabaseCannotRecordIsNotPromised(t *testing.T) {
	h, o, proxy, sale := mustRecorderBehindProxy(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	user := testenv.UniqueUser()
	in := domain.RedisHoldInput(domain.DeriveToken([]byte("promise-test"), sale.ID, user, "req-1"), sale.ID, user, "req-1")

	proxy.SetCut(true)
	require.ErrorIs(t, h.Promise(ctx, in, sale.ModeEpoch, 0), domain.ErrOutcomeUnknown, "no 202 the database did not record")
	require.Equal(t, 1, o.of("failed"))
	h.probing.Store(true) // another request is trying
	require.ErrorIs(t, h.Promise(ctx, in, sale.ModeEpoch, 0), domain.ErrOutcomeUnknown)
	require.Equal(t, 1, o.of("refused"), "refused at once while a probe is out")
	h.probing.Store(false)

	proxy.SetCut(false)
	require.Eventually(t, func() bool { return h.Promise(ctx, in, sale.ModeEpoch, 0) == nil }, 20*time.Second, 100*time.Millisecond,
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

	require.True(t, h.Ready(ctx), "nothing failed yet")
	proxy.SetCut(true)
	require.Error(t, h.Record(ctx, in, sale.ModeEpoch))
	require.False(t, h.Ready(ctx), "the database does not answer")
	proxy.SetCut(false)
	require.Eventually(t, func() bool { return h.Ready(ctx) }, 20*time.Second, 100*time.Millisecond)
	require.NoError(t, h.Record(ctx, in, sale.ModeEpoch))
}

// The request path waits for a hold's record while the database keeps
// answering other records (a busy database: the record waits behind its
// shard's groups), gives up soon once it answers none (a stalled one), and
// never waits past holdRecordMax.
func TestAHoldsRecordWaitsWhileTheDatabaseProgresses(t *testing.T) {
	answering := func() (time.Time, time.Duration) { return time.Now(), 100 * time.Millisecond }
	silent := time.Now().Add(-time.Minute)
	for _, tc := range []struct {
		name     string
		wait     time.Duration
		progress func() (time.Time, time.Duration)
		want     error
		min, max time.Duration
	}{
		{name: "busy", wait: 3 * holdRecordStall, progress: answering, min: 3 * holdRecordStall, max: holdRecordMax},
		{name: "stalled", wait: time.Minute, progress: func() (time.Time, time.Duration) { return silent, 20 * time.Millisecond },
			want: domain.ErrOutcomeUnknown, min: holdRecordStall, max: 2 * holdRecordStall},
		{name: "slow round trips", wait: time.Minute, progress: func() (time.Time, time.Duration) { return silent, 200 * time.Millisecond },
			want: domain.ErrOutcomeUnknown, min: stallTrips * 200 * time.Millisecond, max: stallTrips*200*time.Millisecond + holdRecordStall},
		{name: "never answered", wait: time.Minute, progress: answering, want: domain.ErrOutcomeUnknown, min: holdRecordMax, max: holdRecordMax + holdRecordStall},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := &outcomes{n: map[string]int{}}
			h := newHolds(&fakeLedger{wait: tc.wait, progress: tc.progress}, slog.New(slog.DiscardHandler), o.count)
			in := domain.RedisHoldInput("42-token", 42, 1001, "req-00000001")
			began := time.Now()
			err := h.Promise(t.Context(), in, 3, 7)
			took := time.Since(began)
			if tc.want == nil {
				require.NoError(t, err)
				require.Equal(t, 1, o.of("recorded"))
			} else {
				require.ErrorIs(t, err, tc.want)
				require.Equal(t, 1, o.of("failed"))
			}
			require.GreaterOrEqual(t, took, tc.min)
			require.Less(t, took, tc.max)
		})
	}
}
