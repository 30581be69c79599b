package activities

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testkit/inflight"
)

// A wave of reconciliations (30 sales ending together) never runs more
// than the bound at once, and every one of them runs.
func TestReconcileSlotsBoundAWave(t *testing.T) {
	const bound, wave = 3, 30
	slots := NewReconcileSlots(bound)
	var (
		running inflight.Gauge
		mu      sync.Mutex
		ran     int
		wg      sync.WaitGroup
	)
	for range wave {
		wg.Go(func() {
			err := slots.Do(context.Background(), time.Minute, func(context.Context) error {
				defer running.Enter()()
				time.Sleep(10 * time.Millisecond)
				mu.Lock()
				ran++
				mu.Unlock()
				return nil
			})
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	require.Equal(t, wave, ran)
	require.Equal(t, bound, running.Most(), "at most the bound at once, and the bound used")
}

// A reconciliation waits for a slot only while its deadline leaves it its
// run time, then runs over the bound rather than time out; one whose
// caller gave up while it waited does not run.
func TestReconcileSlotsRunOverTheBoundRatherThanTimeOut(t *testing.T) {
	slots := NewReconcileSlots(1)
	held, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- slots.Do(context.Background(), time.Minute, func(context.Context) error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held

	const run = time.Second
	ctx, cancel := context.WithTimeout(context.Background(), run+200*time.Millisecond)
	defer cancel()
	began := time.Now()
	var ranWithin time.Duration
	require.NoError(t, slots.Do(ctx, run, func(rctx context.Context) error {
		deadline, ok := rctx.Deadline()
		require.True(t, ok)
		ranWithin = time.Until(deadline)
		return nil
	}))
	waited := time.Since(began)
	require.GreaterOrEqual(t, waited, 150*time.Millisecond, "waited for the slot while the deadline allowed")
	require.Less(t, waited, run, "then ran over the bound")
	require.Greater(t, ranWithin, run/2, "with its run time left")

	gone, giveUp := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, giveUp)
	err := slots.Do(gone, run, func(context.Context) error {
		t.Error("ran after its caller gave up")
		return nil
	})
	require.ErrorIs(t, err, context.Canceled)

	close(release)
	require.NoError(t, <-done)
}
