package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/seckill/seckill/backend"
	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/authtoken"
	"github.com/seckill/seckill/internal/conn"
	"github.com/seckill/seckill/internal/reqid"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/store"
)

// syncBuffer collects log lines written from many goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// lines are the JSON log lines whose msg is msg.
func (s *syncBuffer) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(s.b.String(), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), l)
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// TestRequestIDs checks X-Request-Id end to end on a real API with
// Temporal: a well-formed id is kept and returned, anything else replaced;
// the request's log lines carry it (and the admin who acted); the workflow
// the request starts has it in its start event's header.
func TestRequestIDs(t *testing.T) {
	s := startReqidServer(t)
	t.Run("kept when well-formed, made otherwise", func(t *testing.T) {
		kept := strings.Repeat("aZ9_-", 12) + "abcd" // 64 characters
		resp, _ := s.send(t, "GET", "/healthz", "", "", kept)
		assert.Equal(t, kept, resp.Header.Get(reqid.Header))
		seen := map[string]bool{}
		for _, bad := range []string{"", kept + "x", "has space", "semi;colon", "ünï"} {
			resp, _ := s.send(t, "GET", "/no/such/route", "", "", bad)
			got := resp.Header.Get(reqid.Header)
			assert.True(t, reqid.Valid(got), "made id %q", got)
			assert.NotEqual(t, bad, got)
			assert.False(t, seen[got], "id %q made twice", got)
			seen[got] = true
		}
	})

	sale := testenv.MustSale(t, s.st, 5)
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer ccancel()
		_ = s.rdb.Del(cctx, redisgateway.SaleKeys(sale.ID).All()...).Err()
	})
	t.Run("admin actions name the request and the admin", func(t *testing.T) { s.testAdminActionsLogged(t, sale) })
	t.Run("the workflow start carries it", func(t *testing.T) {
		user := testenv.UniqueUser()
		tok, err := authtoken.Mint(s.cfg.JWTSecret, user, authtoken.RoleUser, time.Hour)
		require.NoError(t, err)
		resp, body := s.send(t, "POST", "/api/v1/sales/"+strconv.FormatInt(sale.ID, 10)+"/reservations", tok,
			`{"request_id":"reqid-test-1"}`, "buy-click-42")
		require.Equal(t, http.StatusAccepted, resp.StatusCode, string(body))
		assert.Equal(t, "buy-click-42", resp.Header.Get(reqid.Header))
		var r struct {
			Token string `json:"token"`
		}
		require.NoError(t, json.Unmarshal(body, &r))
		wfID := domain.OrderWorkflowID(r.Token)
		t.Cleanup(func() {
			cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer ccancel()
			_ = s.tc.TerminateWorkflow(cctx, wfID, "", "test over")
		})
		assert.Equal(t, "buy-click-42", s.startHeader(t, wfID))

		// The latency histogram names the route's template, never the path.
		routes := latencyRoutes(t, s.reg)
		assert.EqualValues(t, 1, routes["/api/v1/sales/:sale_id/reservations 202"], "%v", routes)
		assert.EqualValues(t, 5, routes["unmatched 404"], "%v", routes)
		for r := range routes {
			assert.NotContains(t, r, strconv.FormatInt(sale.ID, 10), "raw path in a route label")
		}
	})
}

// reqidServer is an API on a real listener whose JSON log lines the test
// reads.
type reqidServer struct {
	cfg  *config.Config
	logs *syncBuffer
	tc   client.Client
	st   *store.Store
	rdb  redis.UniversalClient
	reg  *prometheus.Registry
	base string
	hc   *http.Client
}

func startReqidServer(t *testing.T) *reqidServer {
	cfg := testenv.Config(t)
	cfg.TaskQueue = fmt.Sprintf("api-reqid-%d", time.Now().UnixNano()) // nobody polls it
	// The API's own start of a Redis-path order (off by default: the inbox
	// relay starts it, carrying the id from the inbox entry).
	cfg.APIStartsRedisOrders = true
	s := &reqidServer{cfg: cfg, logs: &syncBuffer{}, reg: prometheus.NewRegistry(), hc: &http.Client{Timeout: 20 * time.Second}}
	logger := slog.New(slog.NewJSONHandler(s.logs, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var err error
	s.tc, err = conn.Temporal(ctx, cfg, logger, 20*time.Second)
	require.NoError(t, err)
	t.Cleanup(s.tc.Close)
	s.st, s.rdb = testenv.MustStore(t), testenv.MustRedis(t)
	app := New(Deps{Config: cfg, Logger: logger, Services: backend.Build(backend.Deps{Config: cfg, Logger: logger, Store: s.st, Redis: redisgateway.NewClient(s.rdb), Temporal: s.tc, Registry: s.reg})})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = app.Listener(ln) }()
	t.Cleanup(func() { _ = app.ShutdownWithTimeout(5 * time.Second) })
	s.base = "http://" + ln.Addr().String()
	return s
}

func (s *reqidServer) send(t *testing.T, method, path, token, body, id string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, s.base+path, strings.NewReader(body))
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if id != "" {
		req.Header.Set(reqid.Header, id)
	}
	resp, err := s.hc.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, b
}

func (s *reqidServer) testAdminActionsLogged(t *testing.T, sale *domain.Sale) {
	adminUser := testenv.UniqueUser()
	admin, err := authtoken.Mint(s.cfg.AdminJWTSecret, adminUser, authtoken.RoleAdmin, time.Hour)
	require.NoError(t, err)
	salePath := "/admin/v1/sales/" + strconv.FormatInt(sale.ID, 10)
	for _, a := range []struct{ action, id string }{{"/warmup", "warm-1"}, {"/pause", "pause-1"}, {"/resume", "resume-1"}} {
		resp, body := s.send(t, "POST", salePath+a.action, admin, "", a.id)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	}
	for msg, id := range map[string]string{"sale warmed": "warm-1", "sale control": "pause-1"} {
		lines := s.logs.lines(t, msg)
		require.NotEmpty(t, lines, "no %q line", msg)
		l := lines[0]
		assert.Equal(t, id, l[reqid.LogKey], msg)
		assert.Equal(t, float64(adminUser), l["admin_user_id"], msg)
		assert.Equal(t, float64(sale.ID), l["sale_id"], msg)
		assert.NotContains(t, l, "sale", "one key per concept: sale_id")
	}
}

// startHeader waits for the workflow's start event and returns the request
// id its header carries.
func (s *reqidServer) startHeader(t *testing.T, wfID string) string {
	var got string
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		hctx, hcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer hcancel()
		it := s.tc.GetWorkflowHistory(hctx, wfID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		if !assert.True(c, it.HasNext(), "no history yet") {
			return
		}
		ev, err := it.Next()
		if !assert.NoError(c, err) {
			return
		}
		started := ev.GetWorkflowExecutionStartedEventAttributes()
		if !assert.NotNil(c, started) {
			return
		}
		p, ok := started.GetHeader().GetFields()[reqid.TemporalHeader]
		if !assert.True(c, ok, "no %s header on the start", reqid.TemporalHeader) {
			return
		}
		assert.NoError(c, converter.GetDefaultDataConverter().FromPayload(p, &got))
	}, 30*time.Second, 200*time.Millisecond)
	return got
}

// latencyRoutes counts the latency histogram's samples by "route status".
func latencyRoutes(t *testing.T, reg *prometheus.Registry) map[string]uint64 {
	mfs, err := reg.Gather()
	require.NoError(t, err)
	routes := map[string]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != "seckill_http_request_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var route, status string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "route":
					route = l.GetValue()
				case "status":
					status = l.GetValue()
				}
			}
			routes[route+" "+status] += m.GetHistogram().GetSampleCount()
		}
	}
	return routes
}
