package chaos

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/domain"
)

// fakeAPI answers the admin routes as a script says, and keeps what it
// was sent.
type fakeAPI struct {
	t      *testing.T
	srv    *httptest.Server
	answer func(method, path string, body []byte) (int, string)

	mu   sync.Mutex
	seen []string // "METHOD path body"
	keys []string // Idempotency-Key of each request
}

func newFakeAPI(t *testing.T, answer func(method, path string, body []byte) (int, string)) *fakeAPI {
	f := &fakeAPI{t: t, answer: answer}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := auth.VerifyToken([]byte(config.DevAdminJWTSecret), strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
		if err != nil || !p.Admin {
			t.Errorf("%s %s: not an operator's token: %v", r.Method, r.URL, err)
		}
		body, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		f.mu.Lock()
		f.seen = append(f.seen, strings.TrimSpace(fmt.Sprintf("%s %s %s", r.Method, r.URL.RequestURI(), body)))
		f.keys = append(f.keys, r.Header.Get("Idempotency-Key"))
		f.mu.Unlock()
		status, out := f.answer(r.Method, r.URL.RequestURI(), body)
		if status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "1")
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(out))
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAPI) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.seen...)
}

const unavailable = `{"error":{"code":"unavailable","message":"database unavailable"}}`

// testCaller is a caller of the given APIs recording into memory.
func testCaller(t *testing.T, apis ...string) (*caller, *Recorder) {
	d := &Deployment{}
	for _, u := range apis {
		d.APIs = append(d.APIs, &App{URL: u})
	}
	h := &Recorder{}
	c, err := newCaller(d, h)
	require.NoError(t, err)
	return c, h
}

// The run's sales are created (with an Idempotency-Key) and warmed through
// the first API.
func TestCreateSalesThroughTheAdminAPI(t *testing.T) {
	next := int64(40)
	api := newFakeAPI(t, func(method, path string, body []byte) (int, string) {
		if path == "/admin/v1/sales" {
			next++
			return http.StatusCreated, fmt.Sprintf(`{"sale_id":%d}`, next)
		}
		return http.StatusOK, `{"sale_id":0,"redis_stock":15}`
	})
	c, h := testCaller(t, api.srv.URL, "http://127.0.0.1:1")
	out, err := createSales(t.Context(), c, DefaultSales[:2])
	require.NoError(t, err)
	require.Len(t, out, 2)
	assert.Equal(t, []int64{41, 42}, []int64{out[0].ID, out[1].ID})
	assert.Equal(t, DefaultSales[1].Stock, out[1].Stock)
	seen := api.requests()
	require.Len(t, seen, 4)
	var sale map[string]any
	require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(seen[0], "POST /admin/v1/sales ")), &sale))
	assert.Equal(t, map[string]any{"goods_id": 100.0, "title": "chaos sale 1", "price_cents": float64(DefaultSales[0].PriceCents),
		"stock": float64(DefaultSales[0].Stock), "buckets": 4.0, "payment_window_seconds": float64(DefaultSales[0].WindowSeconds)},
		map[string]any{"goods_id": sale["goods_id"], "title": sale["title"], "price_cents": sale["price_cents"], "stock": sale["stock"],
			"buckets": sale["buckets"], "payment_window_seconds": sale["payment_window_seconds"]})
	assert.Equal(t, "POST /admin/v1/sales/41/warmup", seen[1])
	assert.Equal(t, "POST /admin/v1/sales/42/warmup", seen[3])
	assert.NotEmpty(t, api.keys[0], "a sale is created under an Idempotency-Key")
	assert.Empty(t, h.Events(), "setting up is not part of the history")

	failing := newFakeAPI(t, func(string, string, []byte) (int, string) { return http.StatusServiceUnavailable, unavailable })
	c, _ = testCaller(t, failing.srv.URL)
	_, err = createSales(t.Context(), c, DefaultSales[:1])
	require.ErrorContains(t, err, "create sale: unavailable")
	assert.Len(t, failing.requests(), 1, "no retry behind the run's back")
}

// A pause whose answer is unknown (a 503) is recorded, marked as possibly
// applied, and replayed on the next API, each attempt its own event.
func TestOperatorRecordsEveryAttemptOfAControl(t *testing.T) {
	one := newFakeAPI(t, func(string, string, []byte) (int, string) { return http.StatusServiceUnavailable, unavailable })
	two := newFakeAPI(t, func(string, string, []byte) (int, string) { return http.StatusOK, `{"sale_id":7,"state":"paused"}` })
	c, h := testCaller(t, one.srv.URL, two.srv.URL)
	o := &operator{w: &Workload{C: c}, blacklisted: map[int64]bool{}, paused: map[int64]bool{},
		mayPause: map[int64]bool{}, mayBlacklist: map[int64]bool{}}
	require.True(t, o.control(t.Context(), 0, 7, OpPause))
	assert.True(t, o.paused[7])
	assert.True(t, o.mayPause[7])
	assert.Equal(t, []string{"POST /admin/v1/sales/7/pause"}, one.requests(), "the client does not retry by itself")
	assert.Equal(t, []string{"POST /admin/v1/sales/7/pause"}, two.requests())
	ev := h.Events()
	require.Len(t, ev, 2)
	assert.Equal(t, Event{Seq: 1, Kind: KindRequest, Op: OpPause, API: 1, Sale: 7, HTTP: 503, Code: domain.EUnavailable},
		Event{Seq: ev[0].Seq, Kind: ev[0].Kind, Op: ev[0].Op, API: ev[0].API, Sale: ev[0].Sale, HTTP: ev[0].HTTP, Code: ev[0].Code, Err: ev[0].Err})
	assert.Equal(t, Event{Seq: 2, Kind: KindRequest, Op: OpPause, API: 2, Sale: 7, HTTP: 200},
		Event{Seq: ev[1].Seq, Kind: ev[1].Kind, Op: ev[1].Op, API: ev[1].API, Sale: ev[1].Sale, HTTP: ev[1].HTTP, Code: ev[1].Code, Err: ev[1].Err})
	assert.False(t, ev[0].End.Before(ev[0].T))
	assert.Equal(t, map[string]int{"503 unavailable": 1, "200": 1}, Count(ev).ByOp[OpPause])

	// A refused pause is not replayed.
	refusing := newFakeAPI(t, func(string, string, []byte) (int, string) {
		return http.StatusNotFound, `{"error":{"code":"not_found","message":"no such sale"}}`
	})
	c, h = testCaller(t, refusing.srv.URL)
	o.w.C = c
	assert.False(t, o.control(t.Context(), 0, 8, OpPause))
	require.Len(t, h.Events(), 1)
	assert.Equal(t, domain.ENotFound, h.Events()[0].Code)
	assert.False(t, o.mayPause[8])
}

// A blacklist call without an answer records the transport error; the
// replay on the other API is recorded with its 204.
func TestOperatorBlacklistAndStock(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	api := newFakeAPI(t, func(method, path string, _ []byte) (int, string) {
		if strings.HasSuffix(path, "/stock") {
			return http.StatusConflict, `{"error":{"code":"insufficient_stock","message":"held or sold"}}`
		}
		return http.StatusNoContent, ""
	})
	c, h := testCaller(t, dead.URL, api.srv.URL)
	o := &operator{w: &Workload{C: c}, blacklisted: map[int64]bool{}, paused: map[int64]bool{},
		mayPause: map[int64]bool{}, mayBlacklist: map[int64]bool{}}
	start := time.Now()
	require.True(t, o.blacklist(t.Context(), 0, 10_000_005, true))
	assert.True(t, o.blacklisted[10_000_005])
	assert.True(t, o.mayBlacklist[10_000_005])
	require.True(t, o.blacklist(t.Context(), 1, 10_000_005, false))
	assert.False(t, o.blacklisted[10_000_005])
	o.stock(t.Context(), 1, SaleSpec{ID: 9}, -3)
	assert.Less(t, time.Since(start), 5*time.Second)

	assert.Equal(t, []string{"PUT /admin/v1/blacklist/10000005", "DELETE /admin/v1/blacklist/10000005",
		`POST /admin/v1/sales/9/stock {"delta":-3}`}, api.requests())
	ev := h.Events()
	require.Len(t, ev, 4)
	assert.Equal(t, OpBlacklist, ev[0].Op)
	assert.Equal(t, 1, ev[0].API)
	assert.Zero(t, ev[0].HTTP)
	assert.Contains(t, ev[0].Err, "connection refused")
	assert.True(t, unknownAnswer(ev[0]))
	assert.Equal(t, []any{OpBlacklist, 2, http.StatusNoContent, ""}, []any{ev[1].Op, ev[1].API, ev[1].HTTP, ev[1].Err})
	assert.Equal(t, []any{OpUnblacklist, int64(10_000_005), http.StatusNoContent}, []any{ev[2].Op, ev[2].User, ev[2].HTTP})
	assert.Equal(t, []any{OpStock, int64(9), http.StatusConflict, "insufficient_stock", "delta -3"},
		[]any{ev[3].Op, ev[3].Sale, ev[3].HTTP, ev[3].Code, ev[3].Detail})
}

// The final reconciliation asks the first API, then the second; with
// neither answering it says why.
func TestReconciliationThroughEitherAPI(t *testing.T) {
	one := newFakeAPI(t, func(string, string, []byte) (int, string) { return http.StatusServiceUnavailable, unavailable })
	two := newFakeAPI(t, func(string, string, []byte) (int, string) {
		return http.StatusOK, `{"sale_id":3,"consistent":false,"discrepancies":[{"user_id":42,"token":"3-ab","kind":"redis_mark_without_order","detail":"d"}]}`
	})
	c, h := testCaller(t, one.srv.URL, two.srv.URL)
	ok, ds, why := reconciliation(t.Context(), c, 3)
	assert.False(t, ok)
	assert.Equal(t, []string{"redis_mark_without_order user 42 token 3-ab: d"}, ds)
	assert.Empty(t, why)
	assert.Equal(t, []string{"GET /admin/v1/sales/3/reconciliation"}, one.requests())
	assert.Equal(t, []string{"GET /admin/v1/sales/3/reconciliation"}, two.requests())
	assert.Empty(t, h.Events())

	c, _ = testCaller(t, one.srv.URL)
	ok, ds, why = reconciliation(t.Context(), c, 3)
	assert.False(t, ok)
	assert.Empty(t, ds)
	assert.Equal(t, "503 unavailable", why)
}
