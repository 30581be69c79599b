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
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/authtoken"
	"github.com/seckill/seckill/internal/conn"
	"github.com/seckill/seckill/internal/reqid"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lua"
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
	cfg := testenv.Config(t)
	cfg.TaskQueue = fmt.Sprintf("api-reqid-%d", time.Now().UnixNano()) // nobody polls it
	// The API's own start of a Redis-path order (off by default: the inbox
	// relay starts it, carrying the id from the inbox entry).
	cfg.APIStartsRedisOrders = true
	logs := &syncBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tc, err := conn.Temporal(ctx, cfg, logger, 20*time.Second)
	require.NoError(t, err)
	defer tc.Close()
	st, rdb := testenv.MustStore(t), testenv.MustRedis(t)
	reg := prometheus.NewRegistry()
	app := New(Deps{Config: cfg, Logger: logger, Store: st, Redis: lua.NewClient(rdb), Temporal: tc, Registry: reg})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = app.Listener(ln) }()
	t.Cleanup(func() { _ = app.ShutdownWithTimeout(5 * time.Second) })
	base := "http://" + ln.Addr().String()
	hc := &http.Client{Timeout: 20 * time.Second}

	send := func(method, path, token, body, id string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
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
		resp, err := hc.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, b
	}

	t.Run("kept when well-formed, made otherwise", func(t *testing.T) {
		kept := strings.Repeat("aZ9_-", 12) + "abcd" // 64 characters
		resp, _ := send("GET", "/healthz", "", "", kept)
		assert.Equal(t, kept, resp.Header.Get(reqid.Header))
		seen := map[string]bool{}
		for _, bad := range []string{"", kept + "x", "has space", "semi;colon", "ünï"} {
			resp, _ := send("GET", "/no/such/route", "", "", bad)
			got := resp.Header.Get(reqid.Header)
			assert.True(t, reqid.Valid(got), "made id %q", got)
			assert.NotEqual(t, bad, got)
			assert.False(t, seen[got], "id %q made twice", got)
			seen[got] = true
		}
	})

	sale := testenv.MustSale(t, st, 5)
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer ccancel()
		_ = rdb.Del(cctx, lua.SaleKeys(sale.ID).All()...).Err()
	})
	adminUser := testenv.UniqueUser()
	admin, err := authtoken.Mint(cfg.AdminJWTSecret, adminUser, authtoken.RoleAdmin, time.Hour)
	require.NoError(t, err)
	salePath := "/admin/v1/sales/" + strconv.FormatInt(sale.ID, 10)

	t.Run("admin actions name the request and the admin", func(t *testing.T) {
		resp, body := send("POST", salePath+"/warmup", admin, "", "warm-1")
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		resp, body = send("POST", salePath+"/pause", admin, "", "pause-1")
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		resp, body = send("POST", salePath+"/resume", admin, "", "resume-1")
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		for msg, id := range map[string]string{"sale warmed": "warm-1", "sale control": "pause-1"} {
			lines := logs.lines(t, msg)
			require.NotEmpty(t, lines, "no %q line", msg)
			l := lines[0]
			assert.Equal(t, id, l[reqid.LogKey], msg)
			assert.Equal(t, float64(adminUser), l["admin_user_id"], msg)
			assert.Equal(t, float64(sale.ID), l["sale_id"], msg)
			assert.NotContains(t, l, "sale", "one key per concept: sale_id")
		}
	})

	t.Run("the workflow start carries it", func(t *testing.T) {
		user := testenv.UniqueUser()
		tok, err := authtoken.Mint(cfg.JWTSecret, user, authtoken.RoleUser, time.Hour)
		require.NoError(t, err)
		resp, body := send("POST", "/api/v1/sales/"+strconv.FormatInt(sale.ID, 10)+"/reservations", tok,
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
			_ = tc.TerminateWorkflow(cctx, wfID, "", "test over")
		})
		var got string
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			hctx, hcancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer hcancel()
			it := tc.GetWorkflowHistory(hctx, wfID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
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
		assert.Equal(t, "buy-click-42", got)

		// The latency histogram names the route's template, never the path.
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
		assert.EqualValues(t, 1, routes["/api/v1/sales/:sale_id/reservations 202"], "%v", routes)
		assert.EqualValues(t, 5, routes["unmatched 404"], "%v", routes)
		for r := range routes {
			assert.NotContains(t, r, strconv.FormatInt(sale.ID, 10), "raw path in a route label")
		}
	})
}
