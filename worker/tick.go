package worker

import (
	"context"
	"time"

	"golang.org/x/sync/errgroup"
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

// eachParallel runs fn for 0..n-1, limit at a time, each call bounded by
// timeout; the first failure cancels the calls not yet done. It answers
// which calls succeeded, and the first failure.
func eachParallel(ctx context.Context, n, limit int, timeout time.Duration, fn func(ctx context.Context, i int) error) ([]bool, error) {
	done := make([]bool, n)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(limit)
	for i := range n {
		g.Go(func() error {
			cctx, cancel := context.WithTimeout(gctx, timeout)
			defer cancel()
			if err := fn(cctx, i); err != nil {
				return err
			}
			done[i] = true
			return nil
		})
	}
	err := g.Wait()
	return done, err
}
