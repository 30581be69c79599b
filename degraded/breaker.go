package degraded

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"

	"github.com/seckill/seckill/redisgateway"
)

// Breaker settings. The per-call timeout (SECKILL_REDIS_TIMEOUT, default
// 250 ms) is what turns a slow Redis into failures: the reserve script's
// p99.9 under a 256-connection burst stays in single-digit milliseconds
// even with Redis, MariaDB, Temporal and the load generator sharing two
// cores (bench scenario 3), so a quarter second is far above a busy Redis
// and far below a client's patience.
const (
	BreakerTrip        = 5                      // consecutive failures that open it
	breakerOpenFor     = time.Second            // open, then half-open to probe
	breakerProbes      = 3                      // successes in half-open that close it
	breakerProbeEvery  = 250 * time.Millisecond // health pings while not closed
	breakerCountWindow = 10 * time.Second       // closed-state counts reset
	heartbeatEvery     = 50 * time.Millisecond  // pings on the aside connections while a stall is judged
	heartbeatIdleEvery = 250 * time.Millisecond // pings otherwise (Up's witness: four answers within DownAfter)
	heartbeatBusyFor   = 5 * time.Second        // heartbeatEvery lasts this long after a stall was judged
	probeTimeout       = 500 * time.Millisecond // each probe's ping
)

// breaker guards the reservation path's Redis calls. While it is open,
// reservations of Redis-mode sales move to the database path if most of
// the fleet finds Redis down too (FleetDown), and are refused otherwise
// (this instance is cut off); a prober pings
// Redis through it while it is not closed, so it closes soon after Redis
// answers, without waiting for reservation traffic.
//
// A timed-out call counts as a failure only if Redis also left a ping
// unanswered since the call began (heartbeat): a process that stalls its
// own calls (a cold pool, GC assists, a starved CPU on a fresh instance's
// first burst) while Redis answers must not move a sale to the database
// path. The call still answers 503 (outcome unknown) either way.
type breaker struct {
	cb        *gobreaker.CircuitBreaker[redisgateway.ReserveResult]
	heartbeat *Heartbeat
	state     prometheus.Gauge
	logger    *slog.Logger
	// left receives when the breaker changes state: the probe sleeps on it
	// while the breaker is closed.
	left chan struct{}
}

// errClientStall wraps a timed-out call while Redis answered pings: the
// wait was this process's, so the breaker does not count it.
type errClientStall struct{ err error }

func (e errClientStall) Error() string { return "client-side stall: " + e.err.Error() }
func (e errClientStall) Unwrap() error { return e.err }

// IsClientStall reports a call that timed out while Redis answered the
// heartbeat: the wait was this process's. nil, the hot path's answer,
// costs no allocation.
func IsClientStall(err error) bool { return err != nil && errors.As(err, new(errClientStall)) }

func newBreaker(logger *slog.Logger, state prometheus.Gauge, hb *Heartbeat) *breaker {
	b := &breaker{state: state, logger: logger, heartbeat: hb, left: make(chan struct{}, 1)}
	b.cb = gobreaker.NewCircuitBreaker[redisgateway.ReserveResult](gobreaker.Settings{
		Name:        "redis",
		MaxRequests: breakerProbes,
		Interval:    breakerCountWindow,
		Timeout:     breakerOpenFor,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= BreakerTrip },
		// A request cancelled by its client, or timed out while Redis
		// answered, says nothing about Redis.
		IsExcluded: func(err error) bool { return errors.Is(err, context.Canceled) || IsClientStall(err) },
		OnStateChange: func(name string, from, to gobreaker.State) {
			state.Set(float64(to))
			logger.Warn("circuit breaker state change", "breaker", name, "from", from.String(), "to", to.String())
			select {
			case b.left <- struct{}{}:
			default: // the probe has yet to take the last one
			}
		},
	})
	state.Set(float64(gobreaker.StateClosed))
	return b
}

// IsBreakerRefusal reports a call the breaker refused (open, or half-open
// with its probes taken): no call was made.
func IsBreakerRefusal(err error) bool {
	return errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests)
}

// execute runs fn through the breaker; a timeout while Redis answered the
// heartbeat comes back as an errClientStall.
func (b *breaker) execute(fn func() (redisgateway.ReserveResult, error)) (redisgateway.ReserveResult, error) {
	return b.cb.Execute(func() (redisgateway.ReserveResult, error) {
		began := time.Now()
		res, err := fn()
		if err != nil && redisgateway.IsTimeout(err) && b.heartbeat.answeredSince(began) {
			return res, errClientStall{err}
		}
		return res, err
	})
}

// Heartbeat pings every Redis server (heartbeatIdleEvery, heartbeatEvery
// while a stall is judged) on aside connections
// (redisgateway.Client.Aside), without waiting for earlier pings, and
// keeps when an answer last arrived and when the latest unanswered ping
// was sent. It is this instance's own view of Redis in the fleet's (Up)
// and the breaker's witness of a stalled process.
type Heartbeat struct {
	timeout time.Duration
	mu      sync.Mutex
	// answered is when the latest answer arrived; lost is when the
	// latest ping that got none was sent.
	answered, lost time.Time
	changed        chan struct{} // closed, and replaced, at each ping's end
	started        time.Time
	// judged is when answeredSince last asked (unix ns): pings run every
	// heartbeatEvery for heartbeatBusyFor after it, every
	// heartbeatIdleEvery otherwise; kick has the next ping sent at once.
	judged atomic.Int64
	kick   chan struct{}
}

// NewHeartbeat is a heartbeat whose pings wait at most timeout (the hot
// path's Redis timeout). The Guard runs it (Watch).
func NewHeartbeat(timeout time.Duration) *Heartbeat {
	return &Heartbeat{timeout: timeout, changed: make(chan struct{}), started: time.Now(), kick: make(chan struct{}, 1)}
}

// Up reports this instance's own view of Redis in the fleet's: Redis
// answered a ping within DownAfter.
func (h *Heartbeat) Up() bool { return h.upWithin(DownAfter) }

// upWithin reports whether Redis answered a ping within d, counting the
// heartbeat's start as an answer: a fresh instance is not "down" before
// its first ping had time to come back.
func (h *Heartbeat) upWithin(d time.Duration) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return time.Since(h.answered) < d || time.Since(h.started) < d
}

// run pings until stop. Each ping has the hot path's timeout. An idle
// instance pings every heartbeatIdleEvery, enough for Up; a stall being
// judged (answeredSince) has a ping sent at once and every heartbeatEvery
// for heartbeatBusyFor, as a burst of timeouts asks again and again.
func (h *Heartbeat) run(stop <-chan struct{}, ping func(context.Context) error) {
	var pings sync.WaitGroup
	defer pings.Wait()
	t := time.NewTimer(heartbeatIdleEvery)
	defer t.Stop()
	for {
		pings.Go(func() {
			sent := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), h.timeout)
			err := ping(ctx)
			cancel()
			h.record(sent, err == nil)
		})
		t.Reset(h.interval(time.Now()))
		select {
		case <-stop:
			return
		case <-t.C:
		case <-h.kick:
		}
	}
}

// interval is the wait before the next ping.
func (h *Heartbeat) interval(now time.Time) time.Duration {
	if now.UnixNano()-h.judged.Load() < int64(heartbeatBusyFor) {
		return heartbeatEvery
	}
	return heartbeatIdleEvery
}

func (h *Heartbeat) record(sent time.Time, answered bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if answered {
		h.answered = time.Now()
	} else if sent.After(h.lost) {
		h.lost = sent
	}
	close(h.changed)
	h.changed = make(chan struct{})
}

// answeredSince reports whether Redis answered a ping after began. It
// waits, at most a ping's timeout and interval, until an answer arrives
// after began or a ping sent after began goes unanswered.
func (h *Heartbeat) answeredSince(began time.Time) bool {
	h.judged.Store(time.Now().UnixNano())
	select {
	case h.kick <- struct{}{}:
	default: // a ping is due at once already
	}
	deadline := time.NewTimer(h.timeout + heartbeatEvery)
	defer deadline.Stop()
	for {
		h.mu.Lock()
		answered, lost, changed := h.answered.After(began), !h.lost.Before(began), h.changed
		h.mu.Unlock()
		switch {
		case answered:
			return true
		case lost:
			return false
		}
		select {
		case <-changed:
		case <-deadline.C:
			return false
		}
	}
}

// probe pings Redis through the breaker while it is not closed, until
// stop; while it is closed the probe sleeps until it changes state.
func (b *breaker) probe(stop <-chan struct{}, ping func(context.Context) error) {
	t := time.NewTicker(breakerProbeEvery)
	defer t.Stop()
	for {
		if b.cb.State() == gobreaker.StateClosed {
			select {
			case <-stop:
				return
			case <-b.left:
			}
		}
		select {
		case <-stop:
			return
		case <-t.C:
		}
		if b.cb.State() == gobreaker.StateClosed {
			continue
		}
		_, err := b.cb.Execute(func() (redisgateway.ReserveResult, error) {
			ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
			defer cancel()
			return redisgateway.ReserveResult{}, ping(ctx)
		})
		if err != nil && !IsBreakerRefusal(err) {
			b.logger.Debug("redis probe failed", "err", err)
		}
	}
}
