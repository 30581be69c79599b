package degraded

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/ratelimit"
	"github.com/seckill/seckill/redisgateway"
)

// ModeStore switches a sale's mode in the database (store.Store).
type ModeStore interface {
	// SwitchToDatabaseAfterDwell moves a sale on Redis to database mode
	// with a new epoch, its database path selling only after holdOff,
	// unless it came back to Redis less than minDwell ago (the sale
	// returned is then still on Redis).
	SwitchToDatabaseAfterDwell(ctx context.Context, saleID int64, holdOff, minDwell time.Duration) (*domain.Sale, error)
}

// Fleet is the fleet's evidence as an API instance asks it (Observer).
type Fleet interface {
	RedisDown() bool
}

// GuardDeps are what a Guard is built on.
type GuardDeps struct {
	// RedisTimeout is the hot path's per-call Redis timeout; ClockSkew
	// bounds how far the hosts' clocks differ. The hold-off allows for
	// both.
	RedisTimeout, ClockSkew time.Duration
	// Heartbeat is this instance's view of Redis (the observer's Up too).
	Heartbeat *Heartbeat
	Fleet     Fleet
	Store     ModeStore
	// BreakerState receives the breaker's state (0 closed, 1 half-open,
	// 2 open).
	BreakerState prometheus.Gauge
	Logger       *slog.Logger
}

// Guard is an API instance's degraded mode: the breaker on its Redis
// calls, the fleet's evidence, the switch of a sale to the database path
// with its hold-off and dwell, and the database path's limiter.
type Guard struct {
	set                     config.Degraded
	redisTimeout, clockSkew time.Duration
	breaker                 *breaker
	fleet                   Fleet
	store                   ModeStore
	limiter                 *Limiter
	rateLimited             *domain.Error
}

// NewGuard is the guard of set on d. Run its breaker's probe and
// heartbeat with Watch.
func NewGuard(set config.Degraded, d GuardDeps) *Guard {
	return &Guard{
		set: set, redisTimeout: d.RedisTimeout, clockSkew: d.ClockSkew,
		breaker: newBreaker(d.Logger, d.BreakerState, d.Heartbeat),
		fleet:   d.Fleet, store: d.Store,
		limiter: NewLimiter(set.FallbackRPS, set.FallbackInFlight),
		rateLimited: &domain.Error{Code: domain.ERateLimited, Message: "too many requests",
			RetryAfter: ratelimit.RetryAfter(set.FallbackRPS)},
	}
}

// Call runs one Redis call of the reservation path through the breaker. A
// refusal (IsBreakerRefusal) made no call; a timeout while Redis answered
// the heartbeat comes back as a client-side stall (IsClientStall), which
// the breaker does not count.
func (g *Guard) Call(fn func() (redisgateway.ReserveResult, error)) (redisgateway.ReserveResult, error) {
	return g.breaker.execute(fn)
}

// RedisDown reports whether most of the fleet finds Redis down: only then
// may a sale move to the database path.
func (g *Guard) RedisDown() bool { return g.fleet.RedisDown() }

// HoldOff is how long after a switch the database path waits before it
// sells: the last Redis reservation any instance sends before it learns of
// the switch (within ModeLag) carries a deadline at most RedisTimeout +
// ClockSkew after it was sent, and Redis's clock may lag by ClockSkew more.
func (g *Guard) HoldOff() time.Duration {
	return ModeLag + g.redisTimeout + 2*g.clockSkew
}

// SwitchToDatabase moves a sale this instance still sees on Redis to the
// database path after the hold-off, unless it came back to Redis less
// than SECKILL_MODE_MIN_DWELL ago: the sale returned is then still on
// Redis.
func (g *Guard) SwitchToDatabase(ctx context.Context, saleID int64) (*domain.Sale, error) {
	return g.store.SwitchToDatabaseAfterDwell(ctx, saleID, g.HoldOff(), g.set.ModeMinDwell)
}

// Acquire takes a database-path transaction's slot at now (Limiter.Acquire): the
// slot's release, or the 429 to answer and why.
func (g *Guard) Acquire(now time.Time) (release func(), refusal *domain.Error, refused string) {
	release, refused = g.limiter.Acquire(now)
	if refused != "" {
		return nil, g.rateLimited, refused
	}
	return release, nil, ""
}

// Watch pings Redis until stop: the heartbeat on aside connections
// (pingAll, every server) that tells a stalled process from a silent
// Redis, and the breaker's probe (ping) while it is not closed.
func (g *Guard) Watch(stop <-chan struct{}, ping, pingAll func(context.Context) error) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.breaker.probe(stop, ping)
	}()
	g.breaker.heartbeat.run(stop, pingAll)
	<-done
}

// BreakerState is the breaker's state now.
func (g *Guard) BreakerState() gobreaker.State { return g.breaker.cb.State() }

// InFlight is how many database-path transactions are running.
func (g *Guard) InFlight() int { return g.limiter.InFlight() }
