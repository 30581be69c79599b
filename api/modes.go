package api

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// saleModeCollector exports a series (1) for each cached sale off the
// Redis path, none for the others: a scrape costs what the sales under a
// fault cost, not one series for each of the thousands live.
type saleModeCollector struct {
	cache saleCache
	desc  *prometheus.Desc
}

func newSaleModeCollector(cache saleCache) *saleModeCollector {
	return &saleModeCollector{cache: cache, desc: prometheus.NewDesc("seckill_sale_database_mode",
		"1 while the sale takes reservations on the database path (or is switching back); absent for a sale on the Redis path.", []string{"sale"}, nil)}
}

func (c *saleModeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *saleModeCollector) Collect(ch chan<- prometheus.Metric) {
	for _, id := range c.cache.DatabaseModeSales() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, 1, strconv.FormatInt(id, 10))
	}
}
