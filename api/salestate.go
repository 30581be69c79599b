package api

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/domain"
)

// saleStateCollector exports how many per-sale entries the instance holds,
// by kind: each goes when its sale is retired (or, for the lottery, when
// its opening is long past), so with thousands of sales a day these stay
// at the open sales'.
type saleStateCollector struct {
	s    *server
	desc *prometheus.Desc
}

func newSaleStateCollector(s *server) *saleStateCollector {
	return &saleStateCollector{s: s, desc: prometheus.NewDesc("seckill_sale_state_entries",
		"Per-sale entries this instance holds in memory, by kind (sale_cache, status, allowlists, lottery).", []string{"kind"}, nil)}
}

func (c *saleStateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *saleStateCollector) Collect(ch chan<- prometheus.Metric) {
	status := 0
	if c.s.reads != nil {
		status = c.s.reads.SalesTracked()
	}
	for kind, n := range map[string]int{
		"sale_cache": c.s.cache.Len(),
		"status":     status,
		"allowlists": c.s.gate.Allowlists(),
		"lottery":    c.s.lottery.Sales(),
	} {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), kind)
	}
}

// forgetRetired drops the status reader's state of every sale the cache
// no longer holds (retired ones); the cache, the gate's allowlists and the
// lottery drop theirs in their own refresh.
func (s *server) forgetRetired(open []*domain.Sale) {
	ids := make(map[int64]bool, len(open))
	for _, sale := range open {
		ids[sale.ID] = true
	}
	s.reads.KeepSales(func(id int64) bool { return ids[id] })
}
