// Package degraded owns the degraded mode: when a sale leaves Redis for the
// database path and when it comes back. It holds the policy and its
// timings; the mechanisms stay in their gateways (SQL in store, scripts in
// redisgateway), reached through the small interfaces this package defines.
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
// The reservation service, the worker and the API call it; it is
// configured with config.Degraded, which config fills from the
// environment (config imports no policy, so the test harness that loads
// a configuration depends on none).
package degraded

import "time"

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
