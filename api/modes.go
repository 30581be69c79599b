package api

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// saleModeCollector exports, per cached sale, whether it is in database
// mode (1) or not (0).
type saleModeCollector struct {
	cache saleCache
	desc  *prometheus.Desc
}

func newSaleModeCollector(cache saleCache) *saleModeCollector {
	return &saleModeCollector{cache: cache, desc: prometheus.NewDesc("seckill_sale_database_mode",
		"1 while the sale takes reservations on the database path (or is switching back), else 0.", []string{"sale"}, nil)}
}

func (c *saleModeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *saleModeCollector) Collect(ch chan<- prometheus.Metric) {
	for id, dbMode := range c.cache.DatabaseModes() {
		v := 0.0
		if dbMode {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, strconv.FormatInt(id, 10))
	}
}
