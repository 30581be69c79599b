// Package degraded owns the degraded mode: when a sale leaves Redis for the
// database path and when it comes back. It holds the policy and its
// timings; the mechanisms stay in their gateways (SQL in store, scripts in
// lua), reached through the small interfaces this package defines.
//
//   - The circuit breaker on this instance's Redis calls, with the
//     heartbeat that tells a stalled process from a silent Redis
//     (breaker.go).
//   - The fleet's evidence: each process publishes its view of Redis, and
//     a sale moves only when most of the fleet finds Redis down; a process
//     cut from a Redis the others reach refuses and fails readiness
//     (fleet.go).
//   - The switch to the database path, its hold-off and the least dwell in
//     a mode, and the database path's limiter (guard.go, limiter.go).
//   - The way back: when a sale on the database path may return to Redis,
//     and when a stalled resync is rolled back (comeback.go).
//
// The reservation service, the worker and the API call it; config fills
// its Settings from the environment.
package degraded

import (
	"math"
	"time"
)

// Settings are the degraded mode's knobs (config fills them from
// SECKILL_FALLBACK_RPS, SECKILL_FALLBACK_IN_FLIGHT, SECKILL_MODE_MIN_DWELL
// and SECKILL_REDIS_HEALTHY_FOR).
type Settings struct {
	// FallbackRPS is the database path's rate per instance while a sale is
	// in database mode (0: unlimited).
	FallbackRPS float64
	// FallbackInFlight bounds the database path's reservations in flight
	// per instance; a reservation beyond it is refused at once (429). Its
	// default is DefaultInFlight(FallbackRPS).
	FallbackInFlight int
	// ModeMinDwell is the least time a sale stays in a mode (Redis or
	// database) before it changes again; RedisHealthyFor is how long Redis
	// must have answered before a sale goes back to it.
	ModeMinDwell    time.Duration
	RedisHealthyFor time.Duration
}

// DefaultInFlight is SECKILL_FALLBACK_IN_FLIGHT's default: the database
// path's reservations in flight at rps a second and 50 ms each, at least
// 16. A request holds its slot for its whole reservation, so fewer slots
// would refuse "saturated" while the rate still had tokens.
func DefaultInFlight(rps float64) int {
	return max(16, int(math.Ceil(rps*0.05)))
}

// ModeLag bounds how long an API instance takes to learn a sale's new mode
// (a sale cache refresh every second, whose Redis read may wait a second
// before the sales are stored). Until then an instance may still reserve
// on Redis, or read a sale's status records there.
const ModeLag = 2500 * time.Millisecond

// modeLagSkew allows for the clocks of the instance that changed the mode
// and of the one waiting it out.
const modeLagSkew = time.Second

// EveryInstanceLearnt is when every instance has learnt of a mode change
// made at changed, by the clock of the process asking.
func EveryInstanceLearnt(changed time.Time) time.Time {
	return changed.Add(ModeLag + modeLagSkew)
}

// The way back's timings: the worker looks at every open sale each
// ResyncEvery, and rolls back a resync older than StaleResync (its
// instance died between its begin and its finish).
const (
	ResyncEvery = time.Second
	StaleResync = 30 * time.Second
)
