package api

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/seckill/seckill/fleet"
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
	filterCache  seriesCache[prometheus.Counter]
	requestCache seriesCache[prometheus.Counter]
	latencyCache seriesCache[prometheus.Observer]

	filter   *prometheus.CounterVec
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	starter  outcomeCounts
	// holdRecords counts Redis holds recorded before their 202, by outcome.
	holdRecords outcomeCounts
	// handOvers counts units this instance handed to a waitlist.
	handOvers prometheus.Counter
	breaker   prometheus.Gauge

	statusReads outcomeCounts // by statusSource
}

// The outcomes of seckill_starter_total and seckill_hold_records_total.
var (
	starterOutcomes = []string{"queued", "deferred", "no_temporal", "retry_dropped", "started", "failed", "retried", "recorded"}
	holdOutcomes    = []string{"recorded", "uncounted", "failed", "refused"}
)

func newMetrics(reg prometheus.Registerer, queueLen func() float64) (*metrics, error) {
	r := &registrar{reg: reg}
	m := &metrics{
		filter: reuse(r, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_filter_total",
			Help: "Reservation requests by filter layer and outcome (pass or the rejection).",
		}, []string{"layer", "outcome"})),
		requests: reuse(r, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_http_requests_total",
			Help: "HTTP requests by route and status.",
		}, []string{"route", "status"})),
		latency: reuse(r, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "seckill_http_request_duration_seconds",
			Help:    "Time the API took to answer, by route template and status.",
			Buckets: lua.LatencyBuckets,
		}, []string{"route", "status"})),
		starter: newOutcomeCounts(reuse(r, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_starter_total",
			Help: "Workflow starts handed to the in-process starter, by outcome.",
		}, []string{"outcome"})), starterOutcomes...),
		holdRecords: newOutcomeCounts(reuse(r, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_hold_records_total",
			Help: "Redis holds recorded in MySQL before their 202 (or right after a waitlist hand-over), by outcome: recorded, uncounted (the database path's quota opened first: 503), failed (the insert failed: 503) and refused (503 at once while inserts fail and another request is trying).",
		}, []string{"outcome"})), holdOutcomes...),
		handOvers: reuse(r, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_waitlist_handovers_total",
			Help: "Returned units this instance handed to the longest-waiting user of a sale's waitlist, each a Redis hold like a 202's.",
		})),
		breaker: reuse(r, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "seckill_redis_breaker_state",
			Help: "State of the Redis circuit breaker of the reservation path: 0 closed, 1 half-open, 2 open.",
		})),
		statusReads: newOutcomeCounts(reuse(r, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_status_reads_total",
			Help: "Reservation status reads (polls, stream re-reads) by where they were answered: ended_cache, live_cache, redis, database.",
		}, []string{"source"})), status.SourceEnded, status.SourceLive, status.SourceRedis, status.SourceDatabase),
	}
	// A second app on one registry keeps the first queue gauge.
	reuse[prometheus.Collector](r, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "seckill_starter_queue_length",
		Help: "Workflow starts waiting in the in-process queue.",
	}, queueLen))
	reuse(r, collectors.NewGoCollector())
	reuse(r, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if r.err != nil {
		return nil, r.err
	}
	return m, nil
}

// registrar registers collectors until the first error, which it keeps.
type registrar struct {
	reg prometheus.Registerer
	err error
}

// reuse registers c through r and returns the collector to use: c, or the
// one already registered in its place.
func reuse[C prometheus.Collector](r *registrar, c C) C {
	if r.err != nil {
		return c
	}
	got, err := promreg.Register(r.reg, c)
	if err != nil {
		r.err = err
	}
	return got
}

// outcomeCounts is a counter vector with its known label values resolved
// once: the hot path skips the vector's hashing and lock, and every known
// series exists at 0 from the start (rates and alerts see it before its
// first event).
type outcomeCounts struct {
	vec *prometheus.CounterVec
	by  map[string]prometheus.Counter
}

func newOutcomeCounts(vec *prometheus.CounterVec, values ...string) outcomeCounts {
	o := outcomeCounts{vec: vec, by: make(map[string]prometheus.Counter, len(values))}
	for _, v := range values {
		o.by[v] = vec.WithLabelValues(v)
	}
	return o
}

func (o outcomeCounts) inc(value string) {
	if c, ok := o.by[value]; ok {
		c.Inc()
		return
	}
	o.vec.WithLabelValues(value).Inc()
}

func (m *metrics) pass(layer string) { m.count(layer, "pass") }

// count counts a filter layer's outcome: "pass", or why it refused.
func (m *metrics) count(layer, outcome string) { m.filterCache.get(m.filter, layer, outcome).Inc() }

// request counts an answer by route template (never the raw path: it holds
// tokens) and status; took >= 0 also observes its latency (answers given
// before routing have none).
func (m *metrics) request(route string, status int, took time.Duration) {
	code := "other"
	if status >= 100 && status < len(statusLabels) {
		code = statusLabels[status]
	}
	m.requestCache.get(m.requests, route, code).Inc()
	if took >= 0 {
		m.latencyCache.get(m.latency, route, code).Observe(took.Seconds())
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

// seriesCache keeps the series (counters, observers) of a two-label vector
// once resolved: the hot path counts several layers per request, and the
// vector's own lookup (hashing, label checks, its lock) costs more than this
// map. A sync.Map, not a map behind an RWMutex: on a fresh API's first
// burst each new label pair's write queued every reader behind it, a
// convoy seen in the scheduling-latency profile.
type seriesCache[T any] struct {
	m sync.Map // [2]string → T
	n atomic.Int32
}

func (c *seriesCache[T]) get(vec interface{ WithLabelValues(...string) T }, a, b string) T {
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

// registerFleetGauges exports the fleet's view of Redis as this instance
// last saw it: seckill_redis_cut_off (1: Redis fails this instance alone;
// it refuses reservations and fails /readyz) and seckill_redis_fleet_down
// (1: most of the fleet finds Redis down; sales may move to the database
// path).
func registerFleetGauges(reg prometheus.Registerer, o *fleet.Observer) error {
	gauges := []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "seckill_redis_cut_off",
			Help: "1 while Redis fails this instance but not most of the fleet: reservations answer 503 and /readyz fails."},
			func() float64 { return boolGauge(o.CutOff()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "seckill_redis_fleet_down",
			Help: "1 while most of the fleet finds Redis down: the evidence a sale needs to move to the database path."},
			func() float64 { return boolGauge(o.RedisDown()) }),
	}
	for _, g := range gauges {
		if err := reg.Register(g); err != nil {
			return fmt.Errorf("register fleet gauge: %w", err)
		}
	}
	return nil
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
