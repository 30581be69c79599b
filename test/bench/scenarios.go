package bench

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/valyala/fasthttp"
)

// httpDoer is a client for one scenario's connection count. It is
// fasthttp's: the load generator shares the two cores with the API, so the
// client's own cost per request must stay small, or it, not the server,
// decides the figures.
type httpDoer struct{ c *fasthttp.Client }

func newDoer(conns int) httpDoer {
	return httpDoer{c: &fasthttp.Client{
		MaxConnsPerHost:     conns,
		MaxIdleConnDuration: 90 * time.Second,
		ReadTimeout:         10 * time.Second,
		WriteTimeout:        10 * time.Second,
		MaxConnWaitTimeout:  10 * time.Second,
	}}
}

// do sends one request and returns its status.
func (h httpDoer) do(ctx context.Context, method, url, auth string, body []byte) (int, error) {
	return h.doWith(ctx, method, url, auth, body, nil)
}

// doWith is do with extra headers set by headers.
func (h httpDoer) doWith(ctx context.Context, method, url, auth string, body []byte, headers func(*fasthttp.RequestHeader)) (int, error) {
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(method)
	req.SetRequestURI(url)
	if body != nil {
		req.Header.SetContentType("application/json")
		req.SetBodyRaw(body)
	}
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	if headers != nil {
		headers(&req.Header)
	}
	// Runs end by their context; a request in flight then is allowed to
	// finish (fasthttp's deadline is per request, not per run).
	_ = ctx
	if err := h.c.DoTimeout(req, resp, 10*time.Second); err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, url, err)
	}
	return resp.StatusCode(), nil
}

// quietLogger keeps the Temporal SDK's info lines out of the bench output.
type quietLogger struct{}

func (quietLogger) Debug(string, ...any) {}

func (quietLogger) Info(string, ...any) {}

func (quietLogger) Warn(msg string, kv ...any) { slog.Warn(msg, kv...) }

func (quietLogger) Error(msg string, kv ...any) { slog.Error(msg, kv...) }

// Published figures of comparable systems, with their hardware as their
// authors gave it (see docs/benchmarks.md for the sources).
const (
	pubIssue17k  = "17,248 req/s at p99 97 ms (Ryzen laptop; a published figure)"
	pubIssue1471 = "1,471 TPS at p99 640 ms (a published figure)"
	pubJMeter    = "≈8,000 QPS at Redis, p99 95 ms, 1,000 orders, no oversell (Java + Redis + MySQL, JMeter, 4 cores / 8 GB cloud VM, stock 1,000, 500 threads)"
	pubSyncDB    = "synchronous order path: pool exhausted at ≈500 QPS (design note 003, hardware not given)"
	pubConsumer  = "order consumer after tuning: ≈1,800 msg/s (design note 003, hardware not given)"
	pubRowLock   = "SELECT … FOR UPDATE on one stock row: \"a few hundred QPS\" before the pool runs out (design note 004)"
)
