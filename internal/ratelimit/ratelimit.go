// Package ratelimit holds the token buckets the API and the reservation
// service admit by: a rate from configuration, a bounded table of buckets
// per key, and the keys of client addresses and users.
package ratelimit

import (
	"math"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limit turns a configured rate into a limiter rate; 0 means unlimited.
func Limit(rps float64) rate.Limit {
	if rps <= 0 {
		return rate.Inf
	}
	return rate.Limit(rps)
}

// RetryAfter is how many seconds a rejected client should wait: one token's
// refill time, rounded up, at least one second.
func RetryAfter(rps float64) int {
	if rps <= 0 {
		return 1
	}
	return max(1, int(math.Ceil(1/rps)))
}

// Keyed is a bounded map of per-key token buckets. Idle entries are
// evicted by sweep; when a shard is full even after a sweep, a new key
// takes the place of the least recently seen of a few entries sampled
// (evictSample), so memory stays bounded under a flood of new keys and a
// newcomer still gets a bucket of its own: a flood never makes every new
// client share one exhausted bucket. (An evicted key starts again with a
// full bucket: lenient to it, never a refusal of others.)
type Keyed[K comparable] struct {
	limit   rate.Limit
	burst   int
	maxKeys int
	idle    time.Duration
	shards  [32]limiterShard[K]
	hash    func(K) uint32
}

// evictSample is how many entries a full shard compares to evict one.
const evictSample = 8

type limiterShard[K comparable] struct {
	mu sync.Mutex
	m  map[K]*limiterEntry
}

type limiterEntry struct {
	lim      *rate.Limiter
	lastSeen int64 // unix nanos
}

// NewKeyed is a table of at most maxKeys buckets of rps and burst, an
// entry idle for idle swept.
func NewKeyed[K comparable](rps float64, burst, maxKeys int, idle time.Duration, hash func(K) uint32) *Keyed[K] {
	k := &Keyed[K]{
		limit:   Limit(rps),
		burst:   max(burst, 1),
		maxKeys: max(maxKeys/32, 1),
		idle:    idle,
		hash:    hash,
	}
	for i := range k.shards {
		k.shards[i].m = make(map[K]*limiterEntry)
	}
	return k
}

// Allow takes a token from key's bucket.
func (k *Keyed[K]) Allow(key K, now time.Time) bool {
	if k.limit == rate.Inf {
		return true
	}
	sh := &k.shards[k.hash(key)%uint32(len(k.shards))]
	sh.mu.Lock()
	e, ok := sh.m[key]
	if !ok {
		if len(sh.m) >= k.maxKeys {
			sweepShard(sh, now, k.idle)
		}
		if len(sh.m) >= k.maxKeys {
			evictOldest(sh)
		}
		e = &limiterEntry{lim: rate.NewLimiter(k.limit, k.burst)}
		sh.m[key] = e
	}
	e.lastSeen = now.UnixNano()
	ok = e.lim.AllowN(now, 1)
	sh.mu.Unlock()
	return ok
}

// Sweep drops entries idle for longer than the idle time; a bucket idle that
// long has refilled, so dropping it changes no answer.
func (k *Keyed[K]) Sweep(now time.Time) {
	for i := range k.shards {
		sh := &k.shards[i]
		sh.mu.Lock()
		sweepShard(sh, now, k.idle)
		sh.mu.Unlock()
	}
}

func sweepShard[K comparable](sh *limiterShard[K], now time.Time, idle time.Duration) {
	cut := now.Add(-idle).UnixNano()
	for key, e := range sh.m {
		if e.lastSeen < cut {
			delete(sh.m, key)
		}
	}
}

// evictOldest drops the least recently seen of evictSample entries (Go's
// map iteration starts at a random place).
func evictOldest[K comparable](sh *limiterShard[K]) {
	var oldest K
	oldestSeen, n := int64(math.MaxInt64), 0
	for key, e := range sh.m {
		if e.lastSeen < oldestSeen {
			oldest, oldestSeen = key, e.lastSeen
		}
		if n++; n == evictSample {
			break
		}
	}
	delete(sh.m, oldest)
}

// AddrBucket is the key of a client address's buckets: an IPv4 address
// itself, an IPv6 address's /64 (one subscriber's network holds 2^64
// addresses; keyed by the full address, one host could take a new bucket
// per request).
func AddrBucket(a netip.Addr) netip.Addr {
	if !a.Is6() || a.Is4In6() {
		return a
	}
	p, err := a.Prefix(64)
	if err != nil {
		return a
	}
	return p.Addr()
}

// HashAddr and HashUser spread keys over a table's shards.
func HashAddr(a netip.Addr) uint32 {
	b := a.As16()
	var h uint32 = 2166136261
	for _, x := range b {
		h = (h ^ uint32(x)) * 16777619
	}
	return h
}

func HashUser(u int64) uint32 { return uint32(u) ^ uint32(u>>32) }

// InPrefixes reports whether a is in one of ps.
func InPrefixes(a netip.Addr, ps []netip.Prefix) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
