package api

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/seckill/seckill/internal/promreg"
	"github.com/seckill/seckill/redisgateway"
)

// Filter layers of the reservation path, cheapest first.
const (
	layerValidation = "validation"
	layerGlobal     = "global_limit"
	layerAddr       = "addr_limit"
)

type metrics struct {
	requestCache promreg.SeriesCache[prometheus.Counter]
	latencyCache promreg.SeriesCache[prometheus.Observer]

	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	// filter counts the reservation's filter layers, the API's among
	// them, in the services' series.
	filter func(layer, outcome string)
}

func newMetrics(reg prometheus.Registerer, filter func(layer, outcome string)) (*metrics, error) {
	r := &promreg.Registrar{Reg: reg}
	m := &metrics{
		filter: filter,
		requests: promreg.Reuse(r, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_http_requests_total",
			Help: "HTTP requests by route and status.",
		}, []string{"route", "status"})),
		latency: promreg.Reuse(r, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "seckill_http_request_duration_seconds",
			Help:    "Time the API took to answer, by route template and status.",
			Buckets: redisgateway.LatencyBuckets,
		}, []string{"route", "status"})),
	}
	promreg.Reuse(r, collectors.NewGoCollector())
	promreg.Reuse(r, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if r.Err != nil {
		return nil, r.Err
	}
	return m, nil
}

func (m *metrics) pass(layer string) { m.count(layer, "pass") }

// count counts a filter layer's outcome: "pass", or why it refused.
func (m *metrics) count(layer, outcome string) { m.filter(layer, outcome) }

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
