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
// map. A sync.Map, not a map behind an RWMutex: on a fresh API's first
// burst each new label pair's write queued every reader behind it, a
// convoy seen in the scheduling-latency profile.
type SeriesCache[T any] struct {
	m sync.Map // [2]string → T
	n atomic.Int32
}

// Get is vec's series of the labels a and b.
func (c *SeriesCache[T]) Get(vec interface{ WithLabelValues(...string) T }, a, b string) T {
	key := [2]string{a, b}
	if series, ok := c.m.Load(key); ok {
		return series.(T)
	}
	series := vec.WithLabelValues(a, b)
	// Label values are bounded (layers, outcomes, route patterns, codes);
	// the cap only guards against a mistake.
	if c.n.Load() < 4096 {
		if _, loaded := c.m.LoadOrStore(key, series); !loaded {
			c.n.Add(1)
		}
	}
	return series
}

// Bool is a gauge's value of b.
func Bool(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
