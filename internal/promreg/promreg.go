// Package promreg registers Prometheus collectors that several servers of
// one process (or one test) may register on the same registry, and keeps
// the hot path's series resolved.
package promreg

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c on reg; when reg already holds an equal collector
// of c's type (a second server on one registry), that one is returned.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var already prometheus.AlreadyRegisteredError
		if errors.As(err, &already) {
			if existing, ok := already.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, fmt.Errorf("register metrics: %w", err)
	}
	return c, nil
}

// Registrar registers collectors until the first error, which it keeps:
// a server declares its metrics in one expression and checks Err once.
type Registrar struct {
	Reg prometheus.Registerer
	Err error
}

// Reuse registers c through r and returns the collector to use: c, or the
// one already registered in its place.
func Reuse[C prometheus.Collector](r *Registrar, c C) C {
	if r.Err != nil {
		return c
	}
	got, err := Register(r.Reg, c)
	if err != nil {
		r.Err = err
	}
	return got
}

// OutcomeCounts is a counter vector with its known label values resolved
// once: the hot path skips the vector's hashing and lock, and every known
// series exists at 0 from the start (rates and alerts see it before its
// first event).
type OutcomeCounts struct {
	vec *prometheus.CounterVec
	by  map[string]prometheus.Counter
}

// NewOutcomeCounts resolves vec's series of values.
func NewOutcomeCounts(vec *prometheus.CounterVec, values ...string) OutcomeCounts {
	o := OutcomeCounts{vec: vec, by: make(map[string]prometheus.Counter, len(values))}
	for _, v := range values {
		o.by[v] = vec.WithLabelValues(v)
	}
	return o
}

// Inc counts one event of value.
func (o OutcomeCounts) Inc(value string) { o.Of(value).Inc() }

// Of is the counter of value.
func (o OutcomeCounts) Of(value string) prometheus.Counter {
	if c, ok := o.by[value]; ok {
		return c
	}
	return o.vec.WithLabelValues(value)
}

// SeriesCache keeps the series (counters, observers) of a two-label vector
// once resolved: the hot path counts several layers per request, and the
// vector's own lookup (hashing, label checks, its lock) costs more than this
// map. Readers take no lock: a new label pair replaces the map whole, under
// mu, which happens a bounded number of times (label values are bounded).
// A map behind an RWMutex convoyed every reader behind a new pair's write
// on a fresh API's first burst; a sync.Map's lookup costs more than a
// plain map's (BenchmarkSeriesCache).
type SeriesCache[T any] struct {
	m  atomic.Pointer[map[[2]string]T]
	mu sync.Mutex
}

// Get is vec's series of the labels a and b.
func (c *SeriesCache[T]) Get(vec interface{ WithLabelValues(...string) T }, a, b string) T {
	if m := c.m.Load(); m != nil {
		if series, ok := (*m)[[2]string{a, b}]; ok {
			return series
		}
	}
	return c.add(vec, a, b)
}

// add resolves a new pair and keeps it. The cap only guards against a
// mistake (label values are layers, outcomes, route patterns, codes).
func (c *SeriesCache[T]) add(vec interface{ WithLabelValues(...string) T }, a, b string) T {
	series := vec.WithLabelValues(a, b)
	key := [2]string{a, b}
	c.mu.Lock()
	defer c.mu.Unlock()
	var old map[[2]string]T
	if p := c.m.Load(); p != nil {
		old = *p
	}
	if kept, ok := old[key]; ok {
		return kept
	}
	if len(old) >= 4096 {
		return series
	}
	next := make(map[[2]string]T, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[key] = series
	c.m.Store(&next)
	return series
}

// Bool is a gauge's value of b.
func Bool(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
