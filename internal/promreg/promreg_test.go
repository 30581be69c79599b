package promreg

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A second registration of an equal collector returns the first; a
// clashing one is an error.
func TestRegisterReusesAnEqualCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	opts := prometheus.CounterOpts{Name: "x_total", Help: "x"}
	first, err := Register(reg, prometheus.NewCounter(opts))
	if err != nil {
		t.Fatal(err)
	}
	again, err := Register(reg, prometheus.NewCounter(opts))
	if err != nil || again != first {
		t.Fatalf("second registration: %v, same %v", err, again == first)
	}
	if _, err := Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Name: "x_total", Help: "other"})); err == nil {
		t.Fatal("a clashing collector was registered")
	}
}

// Known outcomes exist at 0 from the start; others are counted too; the
// series cache hands back the vector's own series.
func TestOutcomeCountsAndSeriesCache(t *testing.T) {
	r := &Registrar{Reg: prometheus.NewRegistry()}
	vec := Reuse(r, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "o_total", Help: "o"}, []string{"outcome"}))
	Reuse(r, prometheus.NewGauge(prometheus.GaugeOpts{Name: "o_total", Help: "clash"}))
	if r.Err == nil {
		t.Fatal("the registrar kept no error for a clash")
	}
	o := NewOutcomeCounts(vec, "a", "b")
	if n := testutil.CollectAndCount(vec); n != 2 {
		t.Fatalf("%d series before any event, want 2", n)
	}
	o.Inc("a")
	o.Inc("c")
	if testutil.ToFloat64(o.Of("a")) != 1 || testutil.ToFloat64(vec.WithLabelValues("c")) != 1 || testutil.ToFloat64(o.Of("b")) != 0 {
		t.Fatal("outcomes miscounted")
	}
	pairs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "p_total", Help: "p"}, []string{"x", "y"})
	var c SeriesCache[prometheus.Counter]
	c.Get(pairs, "1", "2").Inc()
	c.Get(pairs, "1", "2").Inc()
	if testutil.ToFloat64(pairs.WithLabelValues("1", "2")) != 2 {
		t.Fatal("the cached series is not the vector's")
	}
}

// BenchmarkSeriesCache: a hot path's lookup of a resolved pair, among the
// few dozen a server counts.
func BenchmarkSeriesCache(b *testing.B) {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "b_total", Help: "b"}, []string{"layer", "outcome"})
	var c SeriesCache[prometheus.Counter]
	layers := []string{"validation", "global_limit", "addr_limit", "sale", "gate", "sold_out", "user_limit", "blacklist"}
	for _, l := range layers {
		for _, o := range []string{"pass", "rate_limited", "sold_out", "not_found"} {
			c.Get(vec, l, o)
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		c.Get(vec, layers[i%len(layers)], "pass").Inc()
		i++
	}
}
