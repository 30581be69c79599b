package api

import (
	"errors"
	"fmt"
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
	var cache seriesCache[prometheus.Observer]
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
