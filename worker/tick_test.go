package worker

import (
	"context"
	"testing"
	"time"
)

func TestEveryTickFirstRunAndStop(t *testing.T) {
	for _, atOnce := range []bool{true, false} {
		ctx, cancel := context.WithCancel(context.Background())
		calls := make(chan struct{}, 4)
		done := make(chan struct{})
		go func() {
			defer close(done)
			everyTick(ctx, time.Hour, atOnce, func() { calls <- struct{}{} })
		}()
		if atOnce {
			select {
			case <-calls:
			case <-time.After(10 * time.Second):
				t.Fatal("atOnce: fn did not run at once")
			}
		}
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("atOnce %v: did not stop with its context", atOnce)
		}
		if n := len(calls); n != 0 {
			t.Errorf("atOnce %v: %d more runs before the first period", atOnce, n)
		}
	}
	// With a short period it keeps running (a tick due when the context
	// ends may still run once more).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n := 0
	everyTick(ctx, time.Millisecond, false, func() {
		if n++; n >= 3 {
			cancel()
		}
	})
	if n < 3 || n > 4 {
		t.Errorf("%d runs, want 3 (or 4)", n)
	}
}
