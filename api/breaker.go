package api

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"

	"github.com/seckill/seckill/lua"
)

// Breaker settings. The per-call timeout (cfg.RedisTimeout, default 250 ms)
// is what turns a slow Redis into failures: the reserve script's p99.9 on
// this 2-core machine under a 256-connection burst stays in single-digit
// milliseconds (bench scenario 3), so a quarter second is far above a busy
// Redis and far below a client's patience.
const (
	breakerTrip        = 5                      // consecutive failures that open it
	breakerOpenFor     = time.Second            // open, then half-open to probe
	breakerProbes      = 3                      // successes in half-open that close it
	breakerProbeEvery  = 250 * time.Millisecond // health pings while not closed
	breakerCountWindow = 10 * time.Second       // closed-state counts reset
)

// redisBreaker guards the reservation path's Redis calls. When it opens,
// reservations of Redis-mode sales move to the database path; a prober pings
// Redis through it while it is not closed, so it closes soon after Redis
// answers, without waiting for reservation traffic.
type redisBreaker struct {
	cb     *gobreaker.CircuitBreaker[lua.ReserveResult]
	state  prometheus.Gauge
	logger *slog.Logger
}

func newRedisBreaker(logger *slog.Logger, state prometheus.Gauge) *redisBreaker {
	b := &redisBreaker{state: state, logger: logger}
	b.cb = gobreaker.NewCircuitBreaker[lua.ReserveResult](gobreaker.Settings{
		Name:        "redis",
		MaxRequests: breakerProbes,
		Interval:    breakerCountWindow,
		Timeout:     breakerOpenFor,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= breakerTrip },
		// A request cancelled by its client says nothing about Redis.
		IsExcluded: func(err error) bool { return errors.Is(err, context.Canceled) },
		OnStateChange: func(name string, from, to gobreaker.State) {
			state.Set(float64(to))
			logger.Warn("circuit breaker state change", "breaker", name, "from", from.String(), "to", to.String())
		},
	})
	state.Set(float64(gobreaker.StateClosed))
	return b
}

// open reports whether calls are being refused (open, or half-open with
// its probes taken).
func isBreakerRefusal(err error) bool {
	return errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests)
}

// execute runs fn through the breaker.
func (b *redisBreaker) execute(fn func() (lua.ReserveResult, error)) (lua.ReserveResult, error) {
	return b.cb.Execute(fn)
}

// probe pings Redis through the breaker while it is not closed, until stop.
func (b *redisBreaker) probe(stop <-chan struct{}, ping func(context.Context) error) {
	t := time.NewTicker(breakerProbeEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		if b.cb.State() == gobreaker.StateClosed {
			continue
		}
		_, err := b.cb.Execute(func() (lua.ReserveResult, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			return lua.ReserveResult{}, ping(ctx)
		})
		if err != nil && !isBreakerRefusal(err) {
			b.logger.Debug("redis probe failed", "err", err)
		}
	}
}
