package promreg

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
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
