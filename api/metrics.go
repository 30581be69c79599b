package api

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/seckill/seckill/internal/promreg"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/status"
)

// Filter layers of the reservation path, cheapest first.
const (
	layerValidation = "validation"
	layerGlobal     = "global_limit"
	layerAddr       = "addr_limit"
)

type metrics struct {
	filterCache  promreg.SeriesCache[prometheus.Counter]
	requestCache promreg.SeriesCache[prometheus.Counter]
	latencyCache promreg.SeriesCache[prometheus.Observer]

	filter   *prometheus.CounterVec
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	starter  promreg.OutcomeCounts
	// holdRecords counts Redis holds recorded before their 202, by outcome.
	holdRecords promreg.OutcomeCounts
	// handOvers counts units this instance handed to a waitlist.
	handOvers prometheus.Counter
	breaker   prometheus.Gauge

	statusReads promreg.OutcomeCounts // by statusSource
}

// The outcomes of seckill_starter_total and seckill_hold_records_total.
var (
	starterOutcomes = []string{"queued", "deferred", "no_temporal", "retry_dropped", "started", "failed", "retried", "recorded"}
	holdOutcomes    = []string{"recorded", "uncounted", "failed", "refused", "overruled", "went_back"}
)

func newMetrics(reg prometheus.Registerer, queueLen func() float64) (*metrics, error) {
	r := &promreg.Registrar{Reg: reg}
	m := &metrics{
		filter: promreg.Reuse(r, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_filter_total",
			Help: "Reservation requests by filter layer and outcome (pass or the rejection).",
		}, []string{"layer", "outcome"})),
		requests: promreg.Reuse(r, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_http_requests_total",
			Help: "HTTP requests by route and status.",
		}, []string{"route", "status"})),
		latency: promreg.Reuse(r, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "seckill_http_request_duration_seconds",
			Help:    "Time the API took to answer, by route template and status.",
			Buckets: lua.LatencyBuckets,
		}, []string{"route", "status"})),
		starter: promreg.NewOutcomeCounts(promreg.Reuse(r, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_starter_total",
			Help: "Workflow starts handed to the in-process starter, by outcome.",
		}, []string{"outcome"})), starterOutcomes...),
		holdRecords: promreg.NewOutcomeCounts(promreg.Reuse(r, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_hold_records_total",
			Help: "Redis holds recorded in MySQL before their 202 (or right after a waitlist hand-over), by outcome: recorded, uncounted (the database path's quota opened first: 503), failed (the insert failed: 503), refused (503 at once while inserts fail and another request is trying), overruled (the database refused a hold Redis granted: 409 or 410, Redis had lost writes) and went_back (a hold number Redis handed out before: Redis went back in time and the sale is rebuilt).",
		}, []string{"outcome"})), holdOutcomes...),
		handOvers: promreg.Reuse(r, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_waitlist_handovers_total",
			Help: "Returned units this instance handed to the longest-waiting user of a sale's waitlist, each a Redis hold like a 202's.",
		})),
		breaker: promreg.Reuse(r, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "seckill_redis_breaker_state",
			Help: "State of the Redis circuit breaker of the reservation path: 0 closed, 1 half-open, 2 open.",
		})),
		statusReads: promreg.NewOutcomeCounts(promreg.Reuse(r, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_status_reads_total",
			Help: "Reservation status reads (polls, stream re-reads) by where they were answered: ended_cache, live_cache, redis, database.",
		}, []string{"source"})), status.SourceEnded, status.SourceLive, status.SourceRedis, status.SourceDatabase),
	}
	// A second app on one registry keeps the first queue gauge.
	promreg.Reuse[prometheus.Collector](r, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "seckill_starter_queue_length",
		Help: "Workflow starts waiting in the in-process queue.",
	}, queueLen))
	promreg.Reuse(r, collectors.NewGoCollector())
	promreg.Reuse(r, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if r.Err != nil {
		return nil, r.Err
	}
	return m, nil
}

func (m *metrics) pass(layer string) { m.count(layer, "pass") }

// count counts a filter layer's outcome: "pass", or why it refused.
func (m *metrics) count(layer, outcome string) { m.filterCache.Get(m.filter, layer, outcome).Inc() }

// request counts an answer by route template (never the raw path: it holds
// tokens) and status; took >= 0 also observes its latency (answers given
// before routing have none).
func (m *metrics) request(route string, status int, took time.Duration) {
	code := "other"
	if status >= 100 && status < len(statusLabels) {
		code = statusLabels[status]
	}
	m.requestCache.Get(m.requests, route, code).Inc()
	if took >= 0 {
		m.latencyCache.Get(m.latency, route, code).Observe(took.Seconds())
	}
}

// statusLabels are the status codes as label values, made once.
var statusLabels = func() []string {
	out := make([]string, 600)
	for i := range out {
		out[i] = strconv.Itoa(i)
	}
	return out
}()
