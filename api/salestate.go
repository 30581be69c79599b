package api

import (
	"github.com/prometheus/client_golang/prometheus"
)

// saleStateCollector exports how many per-sale entries the instance holds,
// by kind: each goes when its sale is retired (or, for the lottery, when
// its opening is long past), so with thousands of sales a day these stay
// at the open sales'.
type saleStateCollector struct {
	svc  services
	desc *prometheus.Desc
}

func newSaleStateCollector(svc services) *saleStateCollector {
	return &saleStateCollector{svc: svc, desc: prometheus.NewDesc("seckill_sale_state_entries",
		"Per-sale entries this instance holds in memory, by kind (sale_cache, status, allowlists, lottery).", []string{"kind"}, nil)}
}

func (c *saleStateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *saleStateCollector) Collect(ch chan<- prometheus.Metric) {
	for kind, n := range map[string]int{
		"sale_cache": c.svc.Cache.Len(),
		"status":     c.svc.Reads.SalesTracked(),
		"allowlists": c.svc.Gate.Allowlists(),
		"lottery":    c.svc.Lottery.Sales(),
	} {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), kind)
	}
}
