package api

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/backend"
	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/authtoken"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/store"
)

// harness is a real API on a loopback listener over the test services.
type harness struct {
	tb     testing.TB
	app    *fiber.App
	server *Server
	// services are the server's, built: tests read their state.
	services *backend.Services
	base     string
	cfg      *config.Config
	st       *store.Store
	rdb      redis.UniversalClient
	scripts  *redisgateway.Scripts
	http     *http.Client
	admin    string
}

// MustHarness starts the API against the test Redis and MariaDB.
func MustHarness(tb testing.TB, mutate ...func(*config.Config)) *harness {
	tb.Helper()
	return MustHarnessWithRedis(tb, testenv.MustRedis(tb), mutate...)
}

// MustHarnessWithRedis starts the API on the given Redis client.
func MustHarnessWithRedis(tb testing.TB, rdb redis.UniversalClient, mutate ...func(*config.Config)) *harness {
	tb.Helper()
	return mustHarnessDeps(tb, rdb, nil, mutate...)
}

// mustHarnessDeps starts the API with its Deps changed by deps (nil: as
// they are): a logger to read, an identity provider.
func mustHarnessDeps(tb testing.TB, rdb redis.UniversalClient, deps func(*Deps), mutate ...func(*config.Config)) *harness {
	tb.Helper()
	cfg := testenv.Config(tb)
	for _, m := range mutate {
		m(cfg)
	}
	h := &harness{tb: tb, cfg: cfg, st: testenv.MustStore(tb), rdb: rdb, scripts: redisgateway.New()}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	h.services = backend.Build(backend.Deps{Config: cfg, Logger: logger, Store: h.st, Redis: redisgateway.NewClient(h.rdb)})
	d := Deps{Config: cfg, Logger: logger, Services: h.services}
	if deps != nil {
		deps(&d)
	}
	srv := NewServer(d)
	h.app, h.server = srv.App, srv
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	go func() { _ = srv.Serve(ln) }()
	tb.Cleanup(func() { _ = h.app.ShutdownWithTimeout(5 * time.Second) })
	h.base = "http://" + ln.Addr().String()
	h.http = &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256}}
	tb.Cleanup(h.http.CloseIdleConnections)
	h.admin = h.MustToken(1, authtoken.RoleAdmin)
	return h
}

// MustToken mints a JWT for user with role.
func (h *harness) MustToken(user int64, role string) string {
	h.tb.Helper()
	secret := h.cfg.JWTSecret
	if role == authtoken.RoleAdmin {
		secret = h.cfg.AdminJWTSecret
	}
	tok, err := authtoken.Mint(secret, user, role, time.Hour)
	require.NoError(h.tb, err)
	return tok
}

type response struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r response) json(tb testing.TB) map[string]any {
	tb.Helper()
	var m map[string]any
	require.NoError(tb, json.Unmarshal(r.Body, &m), "body %s", r.Body)
	return m
}

func (r response) errCode(tb testing.TB) string {
	tb.Helper()
	m := r.json(tb)
	e, ok := m["error"].(map[string]any)
	require.True(tb, ok, "no error body in %s", r.Body)
	code, _ := e["code"].(string)
	_, hasMsg := e["message"].(string)
	require.True(tb, hasMsg, "error without message: %s", r.Body)
	return code
}

// do sends one request; token "" sends no Authorization header.
func (h *harness) do(method, path, token, body string) response {
	h.tb.Helper()
	return h.doWith(method, path, token, body, nil)
}

// doWith sends one request with extra headers.
func (h *harness) doWith(method, path, token, body string, header map[string]string) response {
	h.tb.Helper()
	req, err := http.NewRequest(method, h.base+path, strings.NewReader(body))
	require.NoError(h.tb, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := h.http.Do(req)
	require.NoError(h.tb, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(h.tb, err)
	return response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// MustWarmSale creates a live sale and warms it through the admin API;
// its Redis keys are removed at the end of the test.
func (h *harness) MustWarmSale(stock int64, opts ...testenv.SaleOption) *domain.Sale {
	h.tb.Helper()
	sale := testenv.MustSale(h.tb, h.st, stock, opts...)
	h.tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = h.st.MarkFinished(ctx, sale.ID) // else a resyncer rebuilds its vanished keys
		_ = h.rdb.Del(ctx, redisgateway.SaleKeys(sale.ID).All()...).Err()
	})
	r := h.do("POST", "/admin/v1/sales/"+strconv.FormatInt(sale.ID, 10)+"/warmup", h.admin, "")
	require.Equal(h.tb, 200, r.Status, string(r.Body))
	return sale
}

func (h *harness) reserve(saleID int64, token, requestID string) response {
	h.tb.Helper()
	return h.do("POST", "/api/v1/sales/"+strconv.FormatInt(saleID, 10)+"/reservations", token, `{"request_id":"`+requestID+`"}`)
}

func (h *harness) redisInt(key string) int64 {
	h.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, err := h.rdb.Get(ctx, key).Int64()
	if err == redis.Nil {
		return -1
	}
	require.NoError(h.tb, err)
	return n
}

func (h *harness) xlen(key string) int64 {
	h.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, err := h.rdb.XLen(ctx, key).Result()
	require.NoError(h.tb, err)
	return n
}

func (h *harness) dbStock(saleID int64) int64 {
	h.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, err := h.st.DBStock(ctx, saleID)
	require.NoError(h.tb, err)
	return n
}

func newRequest(method, path string) (*http.Request, error) {
	return http.NewRequest(method, "http://api.test"+path, nil)
}

func newRequestBody(method, path, token, body string) (*http.Request, error) {
	req, err := http.NewRequest(method, "http://api.test"+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	return req, nil
}

// doApp runs one request through app.Test.
func doApp(tb testing.TB, app *fiber.App, req *http.Request) response {
	tb.Helper()
	resp, err := app.Test(req, 15000)
	require.NoError(tb, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(tb, err)
	return response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}
