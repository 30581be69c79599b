package api

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/backend"
	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/authtoken"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
)

func TestAdminCreateSale(t *testing.T) {
	h := MustHarness(t)
	starts := time.Now().UTC().Add(-time.Minute).Format(time.RFC3339)
	ends := time.Now().UTC().Add(time.Hour).Format(time.RFC3339)
	r := h.do("POST", "/admin/v1/sales", h.admin, `{"goods_id":7,"title":"phone","price_cents":4999,"stock":3,"starts_at":"`+starts+`","ends_at":"`+ends+`"}`)
	require.Equal(t, 201, r.Status, string(r.Body))
	v := r.json(t)
	require.EqualValues(t, 3, v["stock_total"])
	require.EqualValues(t, 900, v["payment_window_seconds"])
	require.EqualValues(t, 1, v["per_user_limit"])
	require.Equal(t, "live", v["state"])
	id := int64(v["sale_id"].(float64))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = h.rdb.Del(ctx, redisgateway.SaleKeys(id).All()...).Err()
	})
	sale, err := h.st.GetSale(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, 16, sale.Buckets)

	for field, body := range map[string]string{
		"buckets":                `{"goods_id":7,"title":"x","price_cents":1,"stock":3,"buckets":2000,"starts_at":"` + starts + `","ends_at":"` + ends + `"}`,
		"ends_at":                `{"goods_id":7,"title":"x","price_cents":1,"stock":3,"starts_at":"` + ends + `","ends_at":"` + starts + `"}`,
		"per_user_limit":         `{"goods_id":7,"title":"x","price_cents":1,"stock":3,"per_user_limit":2,"starts_at":"` + starts + `","ends_at":"` + ends + `"}`,
		"stock":                  `{"goods_id":7,"title":"x","price_cents":1,"stock":10000001,"starts_at":"` + starts + `","ends_at":"` + ends + `"}`,
		"payment_window_seconds": `{"goods_id":7,"title":"x","price_cents":1,"stock":3,"payment_window_seconds":0,"starts_at":"` + starts + `","ends_at":"` + ends + `"}`,
		"price_cents":            `{"goods_id":7,"title":"x","price_cents":"1","stock":3,"starts_at":"` + starts + `","ends_at":"` + ends + `"}`,
		"starts_at":              `{"goods_id":7,"title":"x","price_cents":1,"stock":3,"starts_at":"tomorrow","ends_at":"` + ends + `"}`,
	} {
		r := h.do("POST", "/admin/v1/sales", h.admin, body)
		require.Equal(t, 400, r.Status, field)
		require.Equal(t, "invalid_request", r.errCode(t))
		if field != "starts_at" { // time parse errors name the field only by its type
			require.Contains(t, string(r.Body), field)
		}
	}

	// Warm-up is repeatable until the first reservation, then 409 already_live.
	path := "/admin/v1/sales/" + strconv.FormatInt(id, 10) + "/warmup"
	for range 2 {
		r = h.do("POST", path, h.admin, "")
		require.Equal(t, 200, r.Status, string(r.Body))
		require.EqualValues(t, 3, r.json(t)["redis_stock"])
	}
	require.Equal(t, 202, h.reserve(id, h.MustToken(testenv.UniqueUser(), ""), "first-request").Status)
	r = h.do("POST", path, h.admin, "")
	require.Equal(t, 409, r.Status)
	require.Equal(t, "already_live", r.errCode(t))
	require.EqualValues(t, 2, h.redisInt(redisgateway.SaleKeys(id).Stock))
}

func TestAdminPauseResumeStop(t *testing.T) {
	h := MustHarness(t)
	sale := h.MustWarmSale(5)
	sid := strconv.FormatInt(sale.ID, 10)
	user := h.MustToken(testenv.UniqueUser(), "")

	r := h.do("POST", "/admin/v1/sales/"+sid+"/pause", h.admin, "")
	require.Equal(t, 200, r.Status, string(r.Body))
	r = h.reserve(sale.ID, user, "request-0001")
	require.Equal(t, 403, r.Status)
	require.Equal(t, "sale_paused", r.errCode(t))

	require.Equal(t, 200, h.do("POST", "/admin/v1/sales/"+sid+"/resume", h.admin, "").Status)
	require.Equal(t, 202, h.reserve(sale.ID, user, "request-0001").Status)

	r = h.do("POST", "/admin/v1/sales/"+sid+"/stop", h.admin, "")
	require.Equal(t, 200, r.Status)
	require.Equal(t, "ended", r.json(t)["state"])
	r = h.reserve(sale.ID, h.MustToken(testenv.UniqueUser(), ""), "request-0002")
	require.Equal(t, 403, r.Status)
	require.Equal(t, "sale_ended", r.errCode(t))
}

func TestAdminStock(t *testing.T) {
	h := MustHarness(t)
	sale := h.MustWarmSale(10)
	sid := strconv.FormatInt(sale.ID, 10)
	stockKey := redisgateway.SaleKeys(sale.ID).Stock
	require.Equal(t, 202, h.reserve(sale.ID, h.MustToken(testenv.UniqueUser(), ""), "request-0001").Status)
	// One unit held: out of Redis's stock, and out of the buckets since
	// the database recorded the hold.
	require.EqualValues(t, 9, h.redisInt(stockKey))
	require.EqualValues(t, 9, h.dbStock(sale.ID))

	r := h.do("POST", "/admin/v1/sales/"+sid+"/stock", h.admin, `{"delta":5}`)
	require.Equal(t, 200, r.Status, string(r.Body))
	require.EqualValues(t, 15, r.json(t)["stock_total"])
	require.EqualValues(t, 14, h.redisInt(stockKey))
	require.EqualValues(t, 14, h.dbStock(sale.ID))

	r = h.do("POST", "/admin/v1/sales/"+sid+"/stock", h.admin, `{"delta":-4}`)
	require.Equal(t, 200, r.Status, string(r.Body))
	require.EqualValues(t, 10, h.redisInt(stockKey))
	require.EqualValues(t, 10, h.dbStock(sale.ID))

	// Beyond the unsold units (the held one cannot be withdrawn).
	r = h.do("POST", "/admin/v1/sales/"+sid+"/stock", h.admin, `{"delta":-11}`)
	require.Equal(t, 409, r.Status)
	require.Equal(t, "insufficient_stock", r.errCode(t))
	require.EqualValues(t, 10, h.redisInt(stockKey))
	require.EqualValues(t, 10, h.dbStock(sale.ID))

	r = h.do("POST", "/admin/v1/sales/"+sid+"/stock", h.admin, `{"delta":-10}`)
	require.Equal(t, 200, r.Status, string(r.Body))
	require.EqualValues(t, 0, h.redisInt(stockKey))
	require.EqualValues(t, 0, h.dbStock(sale.ID))

	// Out of range: 400 invalid_request (never a 503 from an overflowing
	// column), and nothing changes.
	for _, delta := range []string{"2147483648", "-2147483649", "9223372036854775807", "10000001", "-10000001", "10000000"} {
		r = h.do("POST", "/admin/v1/sales/"+sid+"/stock", h.admin, `{"delta":`+delta+`}`)
		require.Equal(t, 400, r.Status, "delta %s: %s", delta, r.Body)
		require.Equal(t, "invalid_request", r.errCode(t))
		require.Empty(t, r.Header.Get("Retry-After"))
	}
	require.EqualValues(t, 0, h.redisInt(stockKey))
	require.EqualValues(t, 0, h.dbStock(sale.ID))
	got, err := h.st.GetSale(context.Background(), sale.ID)
	require.NoError(t, err)
	require.EqualValues(t, 1, got.StockTotal)
}

// TestAdminCreateSaleAnswersTheStoredRow: what the create answer says is
// what every later read serves (a NUL in the title, nanoseconds in a time).
func TestAdminCreateSaleAnswersTheStoredRow(t *testing.T) {
	h := MustHarness(t)
	starts := time.Now().UTC().Add(-time.Minute).Truncate(time.Second).Add(123456789 * time.Nanosecond)
	ends := starts.Add(time.Hour)
	body := `{"goods_id":7,"title":"nul\u0000 title","price_cents":0,"stock":3,"starts_at":"` + starts.Format(time.RFC3339Nano) + `","ends_at":"` + ends.Format(time.RFC3339Nano) + `"}`
	r := h.do("POST", "/admin/v1/sales", h.admin, body)
	require.Equal(t, 201, r.Status, string(r.Body))
	created := r.json(t)
	id := int64(created["sale_id"].(float64))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = h.rdb.Del(ctx, redisgateway.SaleKeys(id).All()...).Err()
	})
	stored, err := h.st.GetSale(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, stored.StartsAt.UTC().Format(time.RFC3339Nano), created["starts_at"])
	require.Equal(t, stored.EndsAt.UTC().Format(time.RFC3339Nano), created["ends_at"])
	require.Equal(t, stored.Title, created["title"])
	read := h.do("GET", "/api/v1/sales/"+strconv.FormatInt(id, 10), "", "").json(t)
	for _, k := range []string{"title", "starts_at", "ends_at", "price_cents", "stock_total", "goods_id"} {
		require.Equal(t, read[k], created[k], k)
	}
}

func TestPublicEndpoints(t *testing.T) {
	h := MustHarness(t)
	r := h.do("GET", "/healthz", "", "")
	require.Equal(t, 200, r.Status)
	require.Equal(t, "ok", r.json(t)["status"])
	require.NotEmpty(t, r.Header.Get("Date"))
	require.Equal(t, 200, h.do("GET", "/readyz", "", "").Status)
	sale := h.MustWarmSale(4)
	r = h.do("GET", "/api/v1/sales/"+strconv.FormatInt(sale.ID, 10), "", "")
	require.Equal(t, 200, r.Status)
	v := r.json(t)
	require.EqualValues(t, 4, v["stock_left"])
	require.Equal(t, "live", v["state"])
	require.Equal(t, 202, h.reserve(sale.ID, h.MustToken(testenv.UniqueUser(), ""), "request-0001").Status)
	m := h.do("GET", "/metrics", "", "")
	require.Equal(t, 200, m.Status)
	require.Contains(t, string(m.Body), `seckill_filter_total{layer="redis",outcome="ok"}`)
	require.Contains(t, string(m.Body), "go_goroutines")
	o := h.do("GET", "/openapi.yaml", "", "")
	require.Equal(t, 200, o.Status)
	require.True(t, strings.HasPrefix(string(o.Body), "openapi: 3"))
}

func TestReadyzWithoutMySQL(t *testing.T) {
	h := MustHarness(t)
	st := testenv.MustStore(t)
	app := New(Deps{Config: h.cfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Services: backend.Build(backend.Deps{Config: h.cfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Store: st, Redis: redisgateway.NewClient(h.rdb)})})
	t.Cleanup(func() { _ = app.Shutdown() })
	require.NoError(t, st.Close())
	req, err := newRequest("GET", "/readyz")
	require.NoError(t, err)
	resp, err := app.Test(req, 5000)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 503, resp.StatusCode)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.JSONEq(t, `{"status":"unavailable","missing":["mysql"]}`, string(b))
}

// TestReservationReadsAndClosedWorkflow: the owner reads a hold from Redis,
// then the database row; payment and cancel on a reservation without a
// running workflow are answered from the database.
func TestReservationReadsAndClosedWorkflow(t *testing.T) {
	h := MustHarness(t)
	tc := testenv.MustTemporal(t)
	app := New(Deps{Config: h.cfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Services: backend.Build(backend.Deps{Config: h.cfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Store: h.st, Redis: redisgateway.NewClient(h.rdb), Temporal: tc})})
	t.Cleanup(func() { _ = app.Shutdown() })
	h2 := *h
	h2.app = app
	sale := h.MustWarmSale(3)
	uid := testenv.UniqueUser()
	user := h.MustToken(uid, "")
	r := h.reserve(sale.ID, user, "request-0001")
	require.Equal(t, 202, r.Status)
	token := r.json(t)["token"].(string)

	r = h.do("GET", "/api/v1/reservations/"+token, user, "")
	require.Equal(t, 200, r.Status, string(r.Body))
	require.Equal(t, "QUEUED", r.json(t)["status"])
	require.EqualValues(t, sale.PriceCents, r.json(t)["amount_cents"])

	// Move it along in the database as the workflow would, and mark it
	// ordered in Redis, then paid.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := h.st.RecordReservation(ctx, domain.OrderInput{Token: token, SaleID: sale.ID, UserID: uid, RequestID: "request-0001", Path: domain.PathRedis})
	require.NoError(t, err)
	_, err = h.st.PlaceOrder(ctx, token)
	require.NoError(t, err)
	_, err = h.scripts.Advance(ctx, h.rdb, sale.ID, token, domain.TokenOrdered, domain.TokenHeld)
	require.NoError(t, err)
	r = h.do("GET", "/api/v1/reservations/"+token, user, "")
	require.Equal(t, 200, r.Status)
	v := r.json(t)
	require.Equal(t, "PENDING_PAYMENT", v["status"])
	require.NotEmpty(t, v["order_no"])
	require.NotEmpty(t, v["pay_by"])

	list := h.do("GET", "/api/v1/me/reservations?sale_id="+strconv.FormatInt(sale.ID, 10), user, "").json(t)
	require.Len(t, list["reservations"], 1)

	_, err = h.st.MarkPaid(ctx, token, "pay-ref-1")
	require.NoError(t, err)

	// No workflow runs for this token: the database answers.
	pay := func(ref string) response {
		req, err := newRequestBody("POST", "/api/v1/reservations/"+token+"/payment", user, `{"payment_ref":"`+ref+`"}`)
		require.NoError(t, err)
		return doApp(t, app, req)
	}
	r = pay("pay-ref-1")
	require.Equal(t, 200, r.Status, string(r.Body))
	require.Equal(t, "PAID", r.json(t)["status"])
	r = pay("pay-ref-2")
	require.Equal(t, 409, r.Status, string(r.Body))
	require.Equal(t, "not_payable", r.errCode(t))
	req, err := newRequestBody("POST", "/api/v1/reservations/"+token+"/cancel", user, "")
	require.NoError(t, err)
	r = doApp(t, app, req)
	require.Equal(t, 409, r.Status, string(r.Body))
	require.Equal(t, "not_cancellable", r.errCode(t))
}

// With ADMIN_ADDR the operators' routes and /metrics are on their own
// listener alone: the public one answers them 404 (a bad token included:
// nothing says they exist), the admin one serves them.
func TestAdminListenerSplit(t *testing.T) {
	h := MustHarness(t, func(c *config.Config) { c.AdminAddr = "127.0.0.1:0" })
	require.NotNil(t, h.server.Admin)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = h.server.ServeAdmin(ln) }()
	t.Cleanup(func() { _ = h.server.Admin.Shutdown() })
	admin := h.MustToken(1, authtoken.RoleAdmin)

	require.Equal(t, http.StatusNotFound, h.do(http.MethodGet, "/metrics", "", "").Status)
	r := h.do(http.MethodGet, "/admin/v1/refunds", admin, "")
	require.Equal(t, http.StatusNotFound, r.Status, string(r.Body))
	require.Equal(t, http.StatusNotFound, h.do(http.MethodGet, "/admin/v1/refunds", "bad-token", "").Status)
	require.Equal(t, http.StatusOK, h.do(http.MethodGet, "/healthz", "", "").Status)

	base := "http://" + ln.Addr().String()
	get := func(path, token string) int {
		req, err := http.NewRequest(http.MethodGet, base+path, nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusOK, get("/metrics", ""))
	require.Equal(t, http.StatusOK, get("/admin/v1/refunds", admin))
	require.Equal(t, http.StatusUnauthorized, get("/admin/v1/refunds", ""))
}
