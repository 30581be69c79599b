package worker

import (
	"context"
	"time"
)

// everyTick is the worker loops' one ticker: it runs fn every period until
// ctx ends, the first time at once when atOnce, else after the first period.
// fn runs to its end before the next tick is taken (ticks missed meanwhile
// are dropped).
func everyTick(ctx context.Context, period time.Duration, atOnce bool, fn func()) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	if !atOnce {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
	for {
		fn()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
