package degraded

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/redisgateway"
)

// fakeModeStore records the switches asked of it.
type fakeModeStore struct {
	holdOffs, minDwells []time.Duration
	sale                *domain.Sale
}

func (f *fakeModeStore) SwitchToDatabaseAfterDwell(_ context.Context, saleID int64, holdOff, minDwell time.Duration) (*domain.Sale, error) {
	f.holdOffs = append(f.holdOffs, holdOff)
	f.minDwells = append(f.minDwells, minDwell)
	return f.sale, nil
}

type fleetOf bool

func (f fleetOf) RedisDown() bool { return bool(f) }

func newTestGuard(set config.Degraded, st ModeStore, down bool) *Guard {
	return NewGuard(set, GuardDeps{
		RedisTimeout: 250 * time.Millisecond, ClockSkew: 500 * time.Millisecond,
		Heartbeat: NewHeartbeat(250 * time.Millisecond), Fleet: fleetOf(down), Store: st,
		BreakerState: prometheus.NewGauge(prometheus.GaugeOpts{Name: "breaker_state"}),
		Logger:       slog.New(slog.DiscardHandler),
	})
}

// The switch waits out every Redis reservation an instance may still send
// before it learns of the new mode (ModeLag), that call's deadline
// (RedisTimeout + ClockSkew) and Redis's clock lagging by ClockSkew more;
// and it is refused while the sale dwelt on Redis less than
// SECKILL_MODE_MIN_DWELL.
func TestTheSwitchWaitsOutRedisCallsInFlightAndTheDwell(t *testing.T) {
	st := &fakeModeStore{sale: &domain.Sale{ID: 7, Mode: domain.ModeDatabase}}
	g := newTestGuard(config.Degraded{ModeMinDwell: 5 * time.Second}, st, true)
	require.Equal(t, 2500*time.Millisecond+250*time.Millisecond+2*500*time.Millisecond, g.HoldOff())
	sale, err := g.SwitchToDatabase(t.Context(), 7)
	require.NoError(t, err)
	require.Same(t, st.sale, sale)
	require.Equal(t, []time.Duration{g.HoldOff()}, st.holdOffs)
	require.Equal(t, []time.Duration{5 * time.Second}, st.minDwells)
	require.True(t, g.RedisDown(), "the fleet's evidence, as the observer has it")
}

// A database-path request beyond the slots is answered 429 with a
// Retry-After of a token's refill at SECKILL_FALLBACK_RPS (at least 1 s).
func TestTheDatabasePathsRefusalIsA429WithItsRetryAfter(t *testing.T) {
	g := newTestGuard(config.Degraded{FallbackRPS: 0.25, FallbackInFlight: 1}, &fakeModeStore{}, true)
	release, refusal, refused := g.Acquire(time.Now())
	require.Nil(t, refusal)
	require.Empty(t, refused)
	require.Equal(t, 1, g.InFlight())
	_, refusal, refused = g.Acquire(time.Now())
	require.Equal(t, "saturated", refused)
	var e *domain.Error
	require.True(t, errors.As(refusal, &e))
	require.Equal(t, domain.ERateLimited, e.Code)
	require.Equal(t, 4, e.RetryAfter)
	release()
	require.Zero(t, g.InFlight())
}

// The breaker opens after BreakerTrip failures in a row, after which no
// call is made; a client's cancellation is not Redis's failure.
func TestTheBreakerOpensOnRedisFailuresAlone(t *testing.T) {
	g := newTestGuard(config.Degraded{}, &fakeModeStore{}, false)
	calls := 0
	for range BreakerTrip - 1 {
		_, err := g.Call(func() (res redisgateway.ReserveResult, err error) { calls++; return res, context.Canceled })
		require.ErrorIs(t, err, context.Canceled)
	}
	for range BreakerTrip {
		_, err := g.Call(func() (res redisgateway.ReserveResult, err error) {
			calls++
			return res, errors.New("connection refused")
		})
		require.False(t, IsBreakerRefusal(err))
	}
	require.Equal(t, 2*BreakerTrip-1, calls)
	_, err := g.Call(func() (res redisgateway.ReserveResult, err error) { calls++; return res, nil })
	require.True(t, IsBreakerRefusal(err), "open: refused without a call")
	require.Equal(t, 2*BreakerTrip-1, calls)
}
