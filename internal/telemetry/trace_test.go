package telemetry_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"
	enumspb "go.temporal.io/api/enums/v1"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	tworker "go.temporal.io/sdk/worker"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/backend"
	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/conn"
	"github.com/seckill/seckill/internal/reqid"
	"github.com/seckill/seckill/internal/telemetry"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/store"
	"github.com/seckill/seckill/temporalgateway"
	"github.com/seckill/seckill/test/testsale"
	"github.com/seckill/seckill/worker"
	"github.com/seckill/seckill/workflows"
)

// TestOneReservationOneTrace wires the API, the inbox relay and a Temporal
// worker the way the processes do with tracing on (an in-memory exporter in
// place of OTLP), makes two reservations and checks each is one trace with
// the HTTP request, the reserve script, the workflow start, the workflow's
// activities and the database: one started by the API itself, one
// by the relay from the inbox entry alone (an API without Temporal).
// traced installs an in-memory exporter sampling every trace and answers
// a configuration with tracing on and the store and Redis opened by it, as
// the processes open them (with their tracing hooks).
func traced(t *testing.T, ctx context.Context) (*tracetest.InMemoryExporter, *config.Config, *store.Store, redis.UniversalClient) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	telemetry.Install(tp)
	t.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		otel.SetTracerProvider(noop.NewTracerProvider())
		otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
	})
	cfg := testenv.Config(t)
	cfg.Tracing = true
	testenv.MustStore(t) // creates the package's test database
	st, err := conn.Store(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	rdb, err := conn.Redis(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = rdb.Close() })
	return exp, cfg, st, rdb
}

func TestOneReservationOneTrace(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	exp, cfg, st, rdb := traced(t, ctx)
	cfg.TaskQueue = fmt.Sprintf("telemetry-%d", time.Now().UnixNano())
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	tc, err := conn.Temporal(ctx, cfg, logger, 30*time.Second)
	require.NoError(t, err)
	t.Cleanup(tc.Close)
	client := redisgateway.NewClient(rdb)

	startWorkerAndRelay(t, tc, cfg.TaskQueue, st, client, logger)
	withStarter := serveApp(t, api.New(api.Deps{Config: cfg, Logger: logger, Services: backend.Build(backend.Deps{Config: cfg, Logger: logger, Store: st, Redis: client, Temporal: tc})}))
	relayOnly := serveApp(t, api.New(api.Deps{Config: cfg, Logger: logger, Services: backend.Build(backend.Deps{Config: cfg, Logger: logger, Store: st, Redis: client})}))
	sale := testenv.MustSale(t, st, 5)
	testsale.MustWarm(t, st, rdb, sale)
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer ccancel()
		for _, s := range exp.GetSpans() {
			if s.Name == "StartWorkflow:"+domain.OrderWorkflowName {
				for _, a := range s.Attributes {
					if a.Key == "temporalWorkflowID" {
						_ = tc.TerminateWorkflow(cctx, a.Value.AsString(), "", "test over")
					}
				}
			}
		}
	})

	for name, base := range map[string]string{"started by the API": withStarter, "started by the relay": relayOnly} {
		t.Run(name, func(t *testing.T) {
			token, traceID, httpRequestID := reserveTraced(t, base, sale.ID)
			names := waitTraceSpans(t, exp, traceID)
			sort.Strings(names)
			t.Logf("trace %s: %d spans: %s", traceID, len(names), strings.Join(names, ", "))
			// The workflow's start names the request, whoever started it.
			require.Equal(t, httpRequestID, startRequestID(t, tc, token))
		})
	}
}

// startWorkerAndRelay runs an order worker and an inbox relay on queue
// until the test ends.
func startWorkerAndRelay(t *testing.T, tc tclient.Client, queue string, st *store.Store, client *redisgateway.Client, logger *slog.Logger) {
	w := tworker.New(tc, queue, tworker.Options{})
	workflows.Register(w, &activities.Activities{Store: st, Redis: client})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	metrics, err := worker.NewMetrics(prometheus.NewRegistry())
	require.NoError(t, err)
	relay := &worker.Relay{
		Redis: client, Store: st, Consumer: "telemetry-test", MinIdle: time.Minute, DeadAfter: time.Hour,
		MaxDelivery: 10, Logger: logger, Metrics: metrics,
		Starter: func(ctx context.Context, in domain.OrderInput) error {
			return temporalgateway.Start(ctx, tc, queue, in)
		},
	}
	stop, stopRelay := context.WithCancel(context.Background())
	relayDone := make(chan struct{})
	go func() { defer close(relayDone); relay.Run(stop, context.Background()) }()
	t.Cleanup(func() { stopRelay(); <-relayDone })
}

// serveApp serves app on a free port until the test ends and returns its
// base URL.
func serveApp(t *testing.T, app *fiber.App) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = app.Listener(ln) }()
	t.Cleanup(func() { _ = app.ShutdownWithTimeout(5 * time.Second) })
	return "http://" + ln.Addr().String()

}

// reserveTraced makes a reservation through base and returns its token,
// the trace id the answer names and the X-Request-Id it was sent with.
func reserveTraced(t *testing.T, base string, saleID int64) (token, traceID, httpRequestID string) {
	user := testenv.UniqueUser()
	tok, err := testenv.Token(user)
	require.NoError(t, err)
	req, err := http.NewRequest("POST", fmt.Sprintf("%s/api/v1/sales/%d/reservations", base, saleID),
		strings.NewReader(fmt.Sprintf(`{"request_id":"trace-%d"}`, user)))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	httpRequestID = fmt.Sprintf("click-%d", user)
	req.Header.Set(reqid.Header, httpRequestID)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var accepted struct {
		Token string `json:"token"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&accepted))
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	// otelfiber returns the server span's context.
	parts := strings.Split(resp.Header.Get("traceparent"), "-")
	require.Len(t, parts, 4, "traceparent %q", resp.Header.Get("traceparent"))
	return accepted.Token, parts[1], httpRequestID
}

// waitTraceSpans waits until the trace holds the request's, the script's,
// the start's, an activity's and a MySQL span, and returns its spans'
// names.
func waitTraceSpans(t *testing.T, exp *tracetest.InMemoryExporter, traceID string) []string {
	want := []string{
		"/api/v1/sales/:sale_id/reservations", // the HTTP request (route template)
		"evalsha",                             // the reserve script
		"StartWorkflow:" + domain.OrderWorkflowName,
		// The workflow's own span ends with it (paid or expired);
		// its activities' spans are already in.
		"RunActivity:",
		"db.system=mysql",
	}
	var names []string
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		names = names[:0]
		seen := map[string]bool{}
		for _, s := range exp.GetSpans() {
			if s.SpanContext.TraceID().String() != traceID {
				continue
			}
			names = append(names, s.Name)
			seen[s.Name] = true
			if strings.HasPrefix(s.Name, "RunActivity:") {
				seen["RunActivity:"] = true
			}
			for _, a := range s.Attributes {
				if a.Key == "db.system" && a.Value.AsString() == "mysql" {
					seen["db.system=mysql"] = true
				}
			}
		}
		for _, n := range want {
			assert.True(c, seen[n], "no %q span in the trace", n)
		}
	}, 60*time.Second, 250*time.Millisecond)
	return names
}

// startRequestID is the X-Request-Id the token's workflow start carries.
func startRequestID(t *testing.T, tc tclient.Client, token string) string {
	hctx, hcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer hcancel()
	it := tc.GetWorkflowHistory(hctx, domain.OrderWorkflowID(token), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	require.True(t, it.HasNext())
	ev, err := it.Next()
	require.NoError(t, err)
	p, ok := ev.GetWorkflowExecutionStartedEventAttributes().GetHeader().GetFields()[reqid.TemporalHeader]
	require.True(t, ok, "no %s header on the workflow's start", reqid.TemporalHeader)
	var got string
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(p, &got))
	return got
}

// TestFiltersRefuseWithoutSpans checks, with every trace sampled, that a
// request the in-process filters refuse (bad input, no token, the sold-out
// mark), a probe and a scrape make no span, that a request reaching Redis
// still makes its trace, and that background Redis and MySQL calls start
// no trace of their own.
func TestFiltersRefuseWithoutSpans(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	exp, cfg, st, rdb := traced(t, ctx)
	app := api.New(api.Deps{Config: cfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Services: backend.Build(backend.Deps{Config: cfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Store: st, Redis: redisgateway.NewClient(rdb)})})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = app.Listener(ln) }()
	t.Cleanup(func() { _ = app.ShutdownWithTimeout(5 * time.Second) })
	base := "http://" + ln.Addr().String()

	sale := testenv.MustSale(t, st, 1)
	testsale.MustWarm(t, st, rdb, sale)
	reserveURL := fmt.Sprintf("%s/api/v1/sales/%d/reservations", base, sale.ID)
	// send answers the request's status and whether it carried a span.
	send := func(method, url, bearer, body string) (int, bool) {
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		require.NoError(t, err)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("traceparent") != ""
	}
	reserve := func(user int64) (int, bool) {
		tok, err := testenv.Token(user)
		require.NoError(t, err)
		return send("POST", reserveURL, tok, fmt.Sprintf(`{"request_id":"r-%d"}`, user))
	}

	status, traced := reserve(testenv.UniqueUser())
	require.Equal(t, http.StatusAccepted, status)
	require.True(t, traced, "a reservation that reached Redis is traced")
	status, traced = reserve(testenv.UniqueUser())
	require.Equal(t, http.StatusGone, status, "Redis answers sold out")
	require.True(t, traced, "a refusal by the script reached Redis: traced")

	// The in-process sold-out mark follows the script's answer shortly
	// (until then a request still reaches Redis, traced).
	require.Eventually(t, func() bool {
		status, traced := reserve(testenv.UniqueUser())
		require.Equal(t, http.StatusGone, status)
		return !traced
	}, 10*time.Second, 50*time.Millisecond, "the sold-out mark refuses without a span")
	spans := len(exp.GetSpans())
	tok, err := testenv.Token(testenv.UniqueUser())
	require.NoError(t, err)
	for _, r := range []struct {
		method, url, bearer, body string
		status                    int
	}{
		{"POST", reserveURL, "", `{"request_id":"x"}`, http.StatusUnauthorized},
		{"POST", reserveURL, tok, `{"request_id":`, http.StatusBadRequest},
		{"GET", base + "/api/v1/reservations/x", "", "", http.StatusUnauthorized},
		{"GET", base + "/healthz", "", "", http.StatusOK},
		{"GET", base + "/readyz", "", "", http.StatusOK},
		{"GET", base + "/metrics", "", "", http.StatusOK},
	} {
		status, traced := send(r.method, r.url, r.bearer, r.body)
		require.Equal(t, r.status, status, "%s %s", r.method, r.url)
		require.False(t, traced, "%s %s answered with a span", r.method, r.url)
	}
	status, traced = reserve(testenv.UniqueUser())
	require.Equal(t, http.StatusGone, status)
	require.False(t, traced, "the sold-out mark refuses without a span")
	got := exp.GetSpans()
	require.Equal(t, spans, len(got), "refusals, probes and scrapes added spans")
	// Every span is an HTTP request's or a child: background calls (the
	// cache refresh, the breaker's probe) started no trace.
	for _, s := range got {
		if !s.Parent.IsValid() {
			require.True(t, strings.HasPrefix(s.Name, "/api/v1/"), "a root span %q outside a request", s.Name)
		}
	}
}
