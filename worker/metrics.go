package worker

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the relay's Prometheus metrics.
type Metrics struct {
	Started     prometheus.Counter
	Acked       prometheus.Counter
	StartErrors prometheus.Counter
	DeadLetters *prometheus.CounterVec
	Lag         *prometheus.GaugeVec
	Pending     *prometheus.GaugeVec
	OldestAge   *prometheus.GaugeVec
	// Rebuilds times the rebuilds of sales from the database, by cause:
	// keys_lost or went_back (Redis lost acknowledged writes).
	Rebuilds *prometheus.HistogramVec
}

// Rebuilt records one rebuild (Resyncer.Rebuilt).
func (m *Metrics) Rebuilt(wentBack bool, took time.Duration) {
	cause := "keys_lost"
	if wentBack {
		cause = "went_back"
	}
	m.Rebuilds.WithLabelValues(cause).Observe(took.Seconds())
}

// NewMetrics creates the relay's metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Started: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_inbox_started_total",
			Help: "Order workflows the inbox relay started (or found started).",
		}),
		Acked: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_inbox_acked_total",
			Help: "Inbox entries acknowledged after their workflow was known started.",
		}),
		StartErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_inbox_start_errors_total",
			Help: "Workflow starts of the inbox relay that failed; the entry stays pending.",
		}),
		DeadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_inbox_dead_letters_total",
			Help: "Inbox entries moved to the dead-letter stream.",
		}, []string{"sale"}),
		Lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "seckill_inbox_lag",
			Help: "Inbox entries not yet delivered to the relay group (XINFO GROUPS lag).",
		}, []string{"sale"}),
		Pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "seckill_inbox_pending",
			Help: "Inbox entries delivered but not yet acknowledged.",
		}, []string{"sale"}),
		OldestAge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "seckill_inbox_oldest_pending_age_seconds",
			Help: "Age of the sale's oldest inbox entry whose workflow is not yet known started (0 when none waits).",
		}, []string{"sale"}),
		Rebuilds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "seckill_sale_rebuild_duration_seconds",
			Help:    "Rebuilds of a live sale in Redis from the database, by cause (keys_lost: Redis lost the sale's keys; went_back: Redis lost acknowledged writes, found by a hold's number), and how long each took.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
		}, []string{"cause"}),
	}
	for _, c := range []prometheus.Collector{m.Started, m.Acked, m.StartErrors, m.DeadLetters, m.Lag, m.Pending, m.OldestAge, m.Rebuilds} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register relay metrics: %w", err)
		}
	}
	return m, nil
}
