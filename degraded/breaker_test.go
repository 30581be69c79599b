package degraded

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
