package degraded

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/redisgateway"
)

// The heartbeat answers "answered since" at once while Redis answers, and
// "no" within a ping's timeout and interval while pings go unanswered.
func TestHeartbeatTellsAnsweringFromSilentRedis(t *testing.T) {
	const timeout = 100 * time.Millisecond
	var silent atomic.Bool
	hb := NewHeartbeat(timeout)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		hb.run(stop, func(ctx context.Context) error {
			if silent.Load() {
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		})
	}()
	t.Cleanup(func() { close(stop); <-done })

	began := time.Now()
	require.True(t, hb.answeredSince(began))
	require.Less(t, time.Since(began), timeout, "an answering Redis is seen within an interval")

	silent.Store(true)
	time.Sleep(2 * heartbeatEvery) // answers sent before the silence have arrived
	began = time.Now()
	require.False(t, hb.answeredSince(began))
	require.GreaterOrEqual(t, time.Since(began), timeout, "only a ping's timeout says it went unanswered")

	silent.Store(false)
	require.Eventually(t, func() bool { return hb.answeredSince(time.Now()) }, 2*time.Second, 10*time.Millisecond)
}

// An idle heartbeat pings every heartbeatIdleEvery, not every
// heartbeatEvery: four pings a second per server for an instance nobody
// calls. Judging a stall sends a ping at once and speeds them up.
func TestHeartbeatIdlesAtItsIdleRate(t *testing.T) {
	var pings atomic.Int64
	hb := NewHeartbeat(100 * time.Millisecond)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		hb.run(stop, func(context.Context) error { pings.Add(1); return nil })
	}()
	t.Cleanup(func() { close(stop); <-done })

	const idle = 2 * time.Second
	time.Sleep(idle)
	n := pings.Load()
	require.LessOrEqual(t, n, int64(idle/heartbeatIdleEvery)+1, "idle pings")
	require.GreaterOrEqual(t, n, int64(idle/heartbeatIdleEvery)-2, "idle pings (Up needs them)")

	began := time.Now()
	require.True(t, hb.answeredSince(began))
	require.Less(t, time.Since(began), heartbeatIdleEvery/2, "a stall judged is pinged at once")
	base := pings.Load()
	time.Sleep(time.Second)
	require.GreaterOrEqual(t, pings.Load()-base, int64(time.Second/heartbeatEvery)/2, "pings while stalls are judged")
}

// The probe sends nothing while the breaker is closed; once it opens, it
// pings Redis until the breaker closes again.
func TestProbeSleepsWhileTheBreakerIsClosed(t *testing.T) {
	b := newBreaker(slog.New(slog.DiscardHandler), prometheus.NewGauge(prometheus.GaugeOpts{Name: "b"}), NewHeartbeat(100*time.Millisecond))
	var pings atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.probe(stop, func(context.Context) error { pings.Add(1); return nil })
	}()
	t.Cleanup(func() { close(stop); <-done })

	time.Sleep(4 * breakerProbeEvery)
	require.Zero(t, pings.Load(), "no probe while closed")
	for range BreakerTrip {
		_, _ = b.cb.Execute(func() (redisgateway.ReserveResult, error) { return redisgateway.ReserveResult{}, errors.New("down") })
	}
	require.Equal(t, gobreaker.StateOpen, b.cb.State())
	require.Eventually(t, func() bool { return b.cb.State() == gobreaker.StateClosed }, 5*time.Second, 10*time.Millisecond, "the probes close it")
	require.GreaterOrEqual(t, pings.Load(), int64(breakerProbes))
}
