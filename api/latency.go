package api

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/lua"
)

// requestTimer returns a middleware observing each request's handling time
// on seckill_http_request_duration_seconds by route template (never the raw
// path: it holds tokens) and status.
func requestTimer(reg prometheus.Registerer) (fiber.Handler, error) {
	hist, err := register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "seckill_http_request_duration_seconds",
		Help:    "Time the API took to answer, by route template and status.",
		Buckets: lua.LatencyBuckets,
	}, []string{"route", "status"}))
	if err != nil {
		return nil, fmt.Errorf("request latency: %w", err)
	}
	var cache observerCache
	return func(c *fiber.Ctx) error {
		start := time.Now()
		err := c.Next()
		route := "unmatched"
		if r := c.Route(); r != nil && r.Path != "/" {
			route = r.Path
		}
		status := c.Response().StatusCode()
		if err != nil {
			// The error handler writes the answer after the middleware.
			status = statusOf(domain.ErrorCode(err))
			var fe *fiber.Error
			if errors.As(err, &fe) {
				status = fe.Code
			}
		}
		code := "other"
		if status >= 100 && status < len(statusLabels) {
			code = statusLabels[status]
		}
		cache.get(hist, route, code).Observe(time.Since(start).Seconds())
		return err
	}, nil
}

// observerCache is counterCache for histograms: the vector's own lookup
// costs more than this map on the hot path.
type observerCache struct {
	mu sync.RWMutex
	m  map[[2]string]prometheus.Observer
}

func (c *observerCache) get(vec *prometheus.HistogramVec, a, b string) prometheus.Observer {
	key := [2]string{a, b}
	c.mu.RLock()
	o, ok := c.m[key]
	c.mu.RUnlock()
	if ok {
		return o
	}
	o = vec.WithLabelValues(a, b)
	c.mu.Lock()
	if c.m == nil {
		c.m = map[[2]string]prometheus.Observer{}
	}
	if len(c.m) < 4096 {
		c.m[key] = o
	}
	c.mu.Unlock()
	return o
}
