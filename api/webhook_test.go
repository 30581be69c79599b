package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/paysig"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

// webhook posts a provider call with the given timestamp and signature
// ("" sig: signed correctly with the harness's secret).
func (h *harness) webhook(body, ts, sig string) response {
	h.tb.Helper()
	if sig == "" {
		sig = paysig.Sign(h.cfg.PaymentSecret, ts, []byte(body))
	}
	req, err := http.NewRequest("POST", h.base+"/webhooks/payments", strings.NewReader(body))
	require.NoError(h.tb, err)
	req.Header.Set("Content-Type", "application/json")
	if ts != "-" {
		req.Header.Set("X-Timestamp", ts)
	}
	if sig != "-" {
		req.Header.Set("X-Signature", sig)
	}
	resp, err := h.http.Do(req)
	require.NoError(h.tb, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(h.tb, err)
	return response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// mustOrder records a reservation in the database and places its order,
// as the workflow would, for a fresh user; no workflow runs for it.
func (h *harness) mustOrder(sale *domain.Sale, requestID string) (token string, user int64) {
	h.tb.Helper()
	user = testenv.UniqueUser()
	token = domain.DeriveToken(h.cfg.TokenKey, sale.ID, user, requestID)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := h.st.RecordReservation(ctx, domain.OrderInput{Token: token, SaleID: sale.ID, UserID: user, RequestID: requestID, Path: domain.PathRedis})
	require.NoError(h.tb, err)
	_, err = h.st.PlaceOrder(ctx, token)
	require.NoError(h.tb, err)
	return token, user
}

func payBody(token, ref string, amount int64) string {
	b, _ := json.Marshal(map[string]any{"token": token, "payment_ref": ref, "amount_cents": amount})
	return string(b)
}

func TestWebhookRefusesBadSignaturesStaleTimestampsAndWrongAmounts(t *testing.T) {
	h := MustTemporalHarness(t)
	sale := testenv.MustSale(t, h.st, 5)
	token, _ := h.mustOrder(sale, "webhook-table-1")
	now := time.Now()
	ts := strconv.FormatInt(now.Unix(), 10)
	good := payBody(token, "prov-1", sale.PriceCents)
	otherSig := paysig.Sign([]byte("another-secret"), ts, []byte(good))

	cases := []struct {
		name, body, ts, sig string
		status              int
		code                string
	}{
		{"no signature", good, ts, "-", 401, "unauthorized"},
		{"no timestamp", good, "-", "sha256=00", 401, "unauthorized"},
		{"signature with another secret", good, ts, otherSig, 401, "unauthorized"},
		{"signature without prefix", good, ts, strings.TrimPrefix(paysig.Sign(h.cfg.PaymentSecret, ts, []byte(good)), "sha256="), 401, "unauthorized"},
		{"signature not hex", good, ts, "sha256=zz", 401, "unauthorized"},
		{"body changed after signing", payBody(token, "prov-1", 1), ts, paysig.Sign(h.cfg.PaymentSecret, ts, []byte(good)), 401, "unauthorized"},
		{"timestamp changed after signing", good, strconv.FormatInt(now.Unix()-1, 10), paysig.Sign(h.cfg.PaymentSecret, ts, []byte(good)), 401, "unauthorized"},
		{"timestamp 6 minutes old", good, strconv.FormatInt(now.Add(-6*time.Minute).Unix(), 10), "", 401, "unauthorized"},
		{"timestamp 6 minutes ahead", good, strconv.FormatInt(now.Add(6*time.Minute).Unix(), 10), "", 401, "unauthorized"},
		{"timestamp not a number", good, "yesterday", "", 401, "unauthorized"},
		{"wrong amount", payBody(token, "prov-1", sale.PriceCents+1), ts, "", 409, "amount_mismatch"},
		{"unknown field", `{"token":"` + token + `","payment_ref":"p","amount_cents":1,"x":1}`, ts, "", 400, "invalid_request"},
		{"bad payment_ref", payBody(token, "bad ref", sale.PriceCents), ts, "", 400, "invalid_request"},
		{"no amount", `{"token":"` + token + `","payment_ref":"prov-1"}`, ts, "", 400, "invalid_request"},
		{"unknown token", payBody("not-a-token", "prov-1", sale.PriceCents), ts, "", 404, "not_found"},
		{"well-formed token of no reservation", payBody(domain.DeriveToken(h.cfg.TokenKey, sale.ID, 1, "never-reserved"), "prov-1", sale.PriceCents), ts, "", 404, "not_found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := h.webhook(tc.body, tc.ts, tc.sig)
			require.Equal(t, tc.status, r.Status, string(r.Body))
			require.Equal(t, tc.code, r.errCode(t))
		})
	}

	// None of the refusals changed anything.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := h.st.GetReservation(ctx, token)
	require.NoError(t, err)
	require.Equal(t, domain.StatusPendingPayment, res.Status)
	n, err := h.st.CountRefunds(ctx, sale.ID)
	require.NoError(t, err)
	require.Zero(t, n)
}

func TestWebhookLatePaymentIsRecordedForRefundNeverSold(t *testing.T) {
	h := MustTemporalHarness(t)
	sale := testenv.MustSale(t, h.st, 5)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ts := func() string { return strconv.FormatInt(time.Now().Unix(), 10) }

	expired, _ := h.mustOrder(sale, "webhook-late-expired")
	_, err := h.st.ReleaseOrder(ctx, expired, domain.StatusExpired)
	require.NoError(t, err)
	cancelled, _ := h.mustOrder(sale, "webhook-late-cancel")
	_, err = h.st.ReleaseOrder(ctx, cancelled, domain.StatusCancelled)
	require.NoError(t, err)
	paid, _ := h.mustOrder(sale, "webhook-late-paid")
	_, err = h.st.MarkPaid(ctx, paid, "prov-paid")
	require.NoError(t, err)

	for _, tc := range []struct {
		token, ref, reason string
		status             domain.ReservationStatus
	}{
		{expired, "prov-exp", domain.ReasonExpired, domain.StatusExpired},
		{cancelled, "prov-can", domain.ReasonCancelled, domain.StatusCancelled},
		{paid, "prov-paid-again", domain.ReasonDuplicate, domain.StatusPaid},
	} {
		for range 2 { // the provider's retry is answered the same and recorded once
			r := h.webhook(payBody(tc.token, tc.ref, sale.PriceCents), ts(), "")
			require.Equal(t, 200, r.Status, string(r.Body))
			var got domain.RefundRequired
			require.NoError(t, json.Unmarshal(r.Body, &got))
			require.Equal(t, domain.StatusRefundRequired, got.Status)
			require.Equal(t, tc.token, got.Token)
			require.Equal(t, tc.ref, got.PaymentRef)
			require.Equal(t, sale.PriceCents, got.AmountCents)
			require.Equal(t, tc.reason, got.Reason)
			require.Equal(t, tc.status, got.ReservationStatus)
			require.NotZero(t, got.RefundID)
		}
		res, err := h.st.GetReservation(ctx, tc.token)
		require.NoError(t, err)
		require.Equal(t, tc.status, res.Status, "a late payment never becomes a sale")
	}

	// The accepted payment again is a replay, not a refund.
	r := h.webhook(payBody(paid, "prov-paid", sale.PriceCents), ts(), "")
	require.Equal(t, 200, r.Status, string(r.Body))
	require.Equal(t, "PAID", r.json(t)["status"])

	snap, err := h.st.ReadSnapshot(ctx, sale.ID)
	require.NoError(t, err)
	require.Equal(t, int64(3), snap.Refunds)
	require.Equal(t, int64(1), snap.Statuses[domain.StatusPaid])

	requireRefundListing(t, h, sale.ID)
}

// requireRefundListing: the admin listing shows the sale's three refunds,
// newest first; users may not see it.
func requireRefundListing(t *testing.T, h *harness, saleID int64) {
	path := "/admin/v1/refunds?sale_id=" + strconv.FormatInt(saleID, 10)
	list := h.do("GET", path, h.admin, "")
	require.Equal(t, 200, list.Status, string(list.Body))
	var body struct {
		Refunds []struct {
			RefundID    int64  `json:"refund_id"`
			Token       string `json:"token"`
			SaleID      int64  `json:"sale_id"`
			UserID      int64  `json:"user_id"`
			PaymentRef  string `json:"payment_ref"`
			AmountCents int64  `json:"amount_cents"`
			Reason      string `json:"reason"`
			CreatedAt   string `json:"created_at"`
		} `json:"refunds"`
	}
	require.NoError(t, json.Unmarshal(list.Body, &body))
	require.Len(t, body.Refunds, 3)
	require.Equal(t, "prov-paid-again", body.Refunds[0].PaymentRef)
	require.Equal(t, domain.ReasonExpired, body.Refunds[2].Reason)
	require.Equal(t, saleID, body.Refunds[2].SaleID)
	require.NotZero(t, body.Refunds[2].UserID)
	_, err := time.Parse(time.RFC3339, body.Refunds[2].CreatedAt)
	require.NoError(t, err)

	require.Equal(t, 403, h.do("GET", path, h.MustToken(testenv.UniqueUser(), ""), "").Status)
	require.Equal(t, 400, h.do("GET", "/admin/v1/refunds?sale_id=x", h.admin, "").Status)
}

func TestDevLoginOnlyInDevelopmentMode(t *testing.T) {
	h := MustHarness(t)
	r := h.do("POST", "/dev/login", "", `{"user_id":42}`)
	require.Equal(t, 200, r.Status, string(r.Body))
	tok := r.json(t)["token"].(string)
	p, err := auth.VerifyToken(h.cfg.JWTSecret, tok)
	require.NoError(t, err)
	require.Equal(t, auth.Principal{UserID: 42}, p)
	require.Equal(t, 400, h.do("POST", "/dev/login", "", `{"user_id":0}`).Status)
	require.Equal(t, 400, h.do("POST", "/dev/login", "", `{"user_id":1,"role":"admin"}`).Status)

	prod := MustHarness(t, func(c *config.Config) { c.Env = "production" })
	r = prod.do("POST", "/dev/login", "", `{"user_id":42}`)
	require.Equal(t, 404, r.Status)
	require.Equal(t, "not_found", r.errCode(t))
}

func TestStorefrontIsServed(t *testing.T) {
	h := MustHarness(t)
	sale := testenv.MustSale(t, h.st, 1)
	r := h.do("GET", "/?sale="+strconv.FormatInt(sale.ID, 10), "", "")
	require.Equal(t, 200, r.Status)
	require.Contains(t, r.Header.Get("Content-Type"), "text/html")
	require.Contains(t, r.Header.Get("Content-Security-Policy"), "default-src 'self'")
	require.Contains(t, string(r.Body), `<script src="/web/app.js"`)
	js := h.do("GET", "/web/app.js", "", "")
	require.Equal(t, 200, js.Status)
	require.Contains(t, js.Header.Get("Content-Type"), "javascript")
	css := h.do("GET", "/web/style.css", "", "")
	require.Equal(t, 200, css.Status)
	require.Contains(t, css.Header.Get("Content-Type"), "text/css")
	missing := h.do("GET", "/web/nope.js", "", "")
	require.Equal(t, 404, missing.Status)
	require.Equal(t, "not_found", missing.errCode(t))

	// Without ?sale= it is the same page (it lists the sales itself), not
	// a redirect.
	landing := h.do("GET", "/", "", "")
	require.Equal(t, 200, landing.Status)
	require.Equal(t, string(r.Body), string(landing.Body))
}

func TestCORSOnlyForConfiguredOrigins(t *testing.T) {
	preflight := func(h *harness, origin string) http.Header {
		req, err := http.NewRequest("OPTIONS", h.base+"/api/v1/sales/1/reservations", nil)
		require.NoError(t, err)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "authorization,content-type")
		resp, err := h.http.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.Header
	}
	h := MustHarness(t, func(c *config.Config) { c.CORSOrigins = []string{"https://shop.example"} })
	got := preflight(h, "https://shop.example")
	require.Equal(t, "https://shop.example", got.Get("Access-Control-Allow-Origin"))
	require.Contains(t, strings.ToLower(got.Get("Access-Control-Allow-Headers")), "authorization")
	require.Empty(t, preflight(h, "https://evil.example").Get("Access-Control-Allow-Origin"))

	// Outside development mode no origin is allowed unless configured.
	t.Setenv("SECKILL_ENV", "production")
	t.Setenv("SECKILL_JWT_SECRET", strings.Repeat("j", 32))
	t.Setenv("SECKILL_ADMIN_JWT_SECRET", strings.Repeat("a", 32))
	t.Setenv("SECKILL_PAYMENT_SECRET", strings.Repeat("p", 32))
	t.Setenv("SECKILL_TOKEN_KEY", strings.Repeat("k", 32))
	t.Setenv("SECKILL_CORS_ORIGINS", "")
	prodCfg, err := config.Load()
	require.NoError(t, err)
	require.Empty(t, prodCfg.CORSOrigins)
	none := MustHarness(t, func(c *config.Config) { c.CORSOrigins = prodCfg.CORSOrigins })
	require.Empty(t, preflight(none, "https://shop.example").Get("Access-Control-Allow-Origin"))
}
