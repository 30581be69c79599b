package backend

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/internal/promreg"
	"github.com/seckill/seckill/status"
)

// Metrics are the services' own series: the reservation's filter layers,
// the workflow starter, the hold records, the waitlist's hand-overs, the
// breaker and the status reads.
type Metrics struct {
	filterCache promreg.SeriesCache[prometheus.Counter]
	filter      *prometheus.CounterVec
	Starter     promreg.OutcomeCounts
	// HoldRecords counts Redis holds recorded before their 202, by outcome.
	HoldRecords promreg.OutcomeCounts
	// HandOvers counts units this instance handed to a waitlist.
	HandOvers   prometheus.Counter
	Breaker     prometheus.Gauge
	StatusReads promreg.OutcomeCounts // by status source
}

// The outcomes of seckill_starter_total and seckill_hold_records_total.
var (
	starterOutcomes = []string{"queued", "deferred", "no_temporal", "retry_dropped", "started", "failed", "retried", "recorded"}
	holdOutcomes    = []string{"recorded", "uncounted", "failed", "refused", "overruled", "went_back"}
)

// newMetrics registers the services' series on reg; a second set of
// services on one registry shares the first one's series.
func newMetrics(reg prometheus.Registerer) (*Metrics, error) {
	r := &promreg.Registrar{Reg: reg}
	m := &Metrics{
		filter: promreg.Reuse(r, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_filter_total",
			Help: "Reservation requests by filter layer and outcome (pass or the rejection).",
		}, []string{"layer", "outcome"})),
		Starter: promreg.NewOutcomeCounts(promreg.Reuse(r, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_starter_total",
			Help: "Workflow starts handed to the in-process starter, by outcome.",
		}, []string{"outcome"})), starterOutcomes...),
		HoldRecords: promreg.NewOutcomeCounts(promreg.Reuse(r, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_hold_records_total",
			Help: "Redis holds recorded in MySQL before their 202 (or right after a waitlist hand-over), by outcome: recorded, uncounted (the database path's quota opened first: 503), failed (the insert failed: 503), refused (503 at once while inserts fail and another request is trying), overruled (the database refused a hold Redis granted: 409 or 410, Redis had lost writes) and went_back (a hold number Redis handed out before: Redis went back in time and the sale is rebuilt).",
		}, []string{"outcome"})), holdOutcomes...),
		HandOvers: promreg.Reuse(r, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_waitlist_handovers_total",
			Help: "Returned units this instance handed to the longest-waiting user of a sale's waitlist, each a Redis hold like a 202's.",
		})),
		Breaker: promreg.Reuse(r, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "seckill_redis_breaker_state",
			Help: "State of the Redis circuit breaker of the reservation path: 0 closed, 1 half-open, 2 open.",
		})),
		StatusReads: promreg.NewOutcomeCounts(promreg.Reuse(r, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_status_reads_total",
			Help: "Reservation status reads (polls, stream re-reads) by where they were answered: ended_cache, live_cache, redis, database.",
		}, []string{"source"})), status.SourceEnded, status.SourceLive, status.SourceRedis, status.SourceDatabase),
	}
	if r.Err != nil {
		return nil, r.Err
	}
	return m, nil
}

// Filter counts a filter layer's outcome: "pass", or why it refused.
func (m *Metrics) Filter(layer, outcome string) { m.filterCache.Get(m.filter, layer, outcome).Inc() }

// Filtered is the count of a filter layer's outcome so far.
func (m *Metrics) Filtered(layer, outcome string) prometheus.Counter {
	return m.filterCache.Get(m.filter, layer, outcome)
}

// registerQueue exports the starter's queue length; a second set of
// services on one registry keeps the first gauge.
func registerQueue(reg prometheus.Registerer, queueLen func() float64) error {
	r := &promreg.Registrar{Reg: reg}
	promreg.Reuse[prometheus.Collector](r, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "seckill_starter_queue_length",
		Help: "Workflow starts waiting in the in-process queue.",
	}, queueLen))
	return r.Err
}
