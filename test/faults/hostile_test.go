package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

func sign(tb testing.TB, method jwt.SigningMethod, key []byte, claims jwt.MapClaims) string {
	tb.Helper()
	s, err := jwt.NewWithClaims(method, claims).SignedString(key)
	require.NoError(tb, err)
	return "Bearer " + s
}

// rawCall sends a raw body with a raw Authorization header.
func rawCall(tb testing.TB, method, url, auth, body string) (int, []byte) {
	tb.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(tb, err)
	req.Header.Set("Content-Type", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := httpClient.Do(req)
	require.NoError(tb, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(tb, err)
	return resp.StatusCode, raw
}

// 8. About sixty malformed or hostile requests across every endpoint of a
// real API process: each gets the contract's 4xx and error body, and the
// sale's reconciliation is the same before and after.
func testHostileRequests(t *testing.T) {
	s := MustStack(t, stackOpts{})
	s.openWindows = true
	s.MustSale(2, 600)
	f := hostileFixture{sid: strconv.FormatInt(s.saleID, 10), secret: []byte(config.DevJWTSecret), exp: time.Now().Add(time.Hour).Unix(),
		uid: testenv.UniqueUser(), admin: bearer(t, -1), ok: `{"request_id":"hostile-1234"}`}
	base := s.api.URL

	// A paid reservation, a pending one, and the sale sold out.
	payer, holder := testenv.UniqueUser(), testenv.UniqueUser()
	code, body, err := s.reserve(payer, "hostile-payer")
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, code, "%v", body)
	f.paidToken = body["token"].(string)
	require.True(t, s.payWhenPending(payer, f.paidToken))
	code, body, err = s.reserve(holder, "hostile-holder")
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, code, "%v", body)
	f.heldToken = body["token"].(string)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		st, err := s.status(holder, f.heldToken)
		assert.NoError(c, err)
		assert.Equal(c, string(domain.StatusPendingPayment), st)
	}, 60*time.Second, 100*time.Millisecond)
	before := s.checkIdle("8 hostile requests (before)")

	f.sub = strconv.FormatInt(f.uid, 10)
	f.user = bearer(t, f.uid)
	f.payerAuth, f.holderAuth = bearer(t, payer), bearer(t, holder)
	f.res = "/api/v1/sales/" + f.sid + "/reservations"
	f.fake = f.sid + "-" + strings.Repeat("0", 32)
	cases := append(append(hostileHotPathCases(f), hostileAccountCases(t, f)...), hostileAdminCases(t, f)...)
	require.GreaterOrEqual(t, len(cases), 50)
	for _, tc := range cases {
		if tc.path == f.res && tc.method == "POST" {
			s.mu.Lock()
			s.requests++
			s.mu.Unlock()
		}
		code, raw := rawCall(t, tc.method, base+tc.path, tc.auth, tc.body)
		if !assert.Equal(t, tc.status, code, "%s: body %s", tc.name, raw) {
			continue
		}
		var eb map[string]map[string]any
		if assert.NoError(t, json.Unmarshal(raw, &eb), "%s: body %s", tc.name, raw) {
			assert.Len(t, eb, 1, "%s: only the error object: %s", tc.name, raw)
			assert.Equal(t, tc.code, eb["error"]["code"], "%s: %s", tc.name, raw)
			assert.NotEmpty(t, eb["error"]["message"], "%s", tc.name)
			assert.Len(t, eb["error"], 2, "%s: code and message only: %s", tc.name, raw)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bl, err := s.st.Blacklist(ctx)
	require.NoError(t, err)
	assert.NotContains(t, bl, f.uid, "no hostile request blacklisted anyone")
	after := s.checkIdle(fmt.Sprintf("8 hostile requests (%d)", len(cases)))
	assert.Equal(t, comparable(before), comparable(after), "reconciliation unchanged")
}

// hostileFixture is what the hostile requests are made of.
type hostileFixture struct {
	sid, res, sub, user, admin, payerAuth, holderAuth string
	paidToken, heldToken, fake, ok                    string
	uid, exp                                          int64
	secret                                            []byte
}

// hostileCase is a hostile request and the error it must get.
type hostileCase struct {
	name, method, path, auth, body string
	status                         int
	code                           string
}

// hostileHotPathCases attack the reservation hot path.
func hostileHotPathCases(f hostileFixture) []hostileCase {
	return []hostileCase{
		{"broken json", "POST", f.res, f.user, `{"request_id":`, 400, domain.EInvalid},
		{"array body", "POST", f.res, f.user, `[1]`, 400, domain.EInvalid},
		{"empty body", "POST", f.res, f.user, ``, 400, domain.EInvalid},
		{"two values", "POST", f.res, f.user, f.ok + `{}`, 400, domain.EInvalid},
		{"unknown field user_id", "POST", f.res, f.user, `{"request_id":"hostile-1234","user_id":1}`, 400, domain.EInvalid},
		{"request id number", "POST", f.res, f.user, `{"request_id":12345678}`, 400, domain.EInvalid},
		{"request id short", "POST", f.res, f.user, `{"request_id":"abc"}`, 400, domain.EInvalid},
		{"request id long", "POST", f.res, f.user, `{"request_id":"` + strings.Repeat("x", 65) + `"}`, 400, domain.EInvalid},
		{"request id injection", "POST", f.res, f.user, `{"request_id":"a'; DROP TABLE sales;--"}`, 400, domain.EInvalid},
		{"request id lua glob", "POST", f.res, f.user, `{"request_id":"*{sale:1}*"}`, 400, domain.EInvalid},
		{"request id NUL", "POST", f.res, f.user, `{"request_id":"abcd\u0000efgh"}`, 400, domain.EInvalid},
		{"quantity 2", "POST", f.res, f.user, `{"request_id":"hostile-1234","quantity":2}`, 400, domain.EInvalid},
		{"quantity -1", "POST", f.res, f.user, `{"request_id":"hostile-1234","quantity":-1}`, 400, domain.EInvalid},
		{"quantity huge", "POST", f.res, f.user, `{"request_id":"hostile-1234","quantity":1e400}`, 400, domain.EInvalid},
		{"deep nesting", "POST", f.res, f.user, strings.Repeat("[", 5000) + strings.Repeat("]", 5000), 413, domain.ETooLarge},
		{"oversized body", "POST", f.res, f.user, `{"request_id":"` + strings.Repeat("a", 9000) + `"}`, 413, domain.ETooLarge},
		{"sale id text", "POST", "/api/v1/sales/abc/reservations", f.user, f.ok, 404, domain.ENotFound},
		{"sale id negative", "POST", "/api/v1/sales/-" + f.sid + "/reservations", f.user, f.ok, 404, domain.ENotFound},
		{"sale id overflow", "POST", "/api/v1/sales/99999999999999999999999/reservations", f.user, f.ok, 404, domain.ENotFound},
		{"sale id hex", "POST", "/api/v1/sales/0x10/reservations", f.user, f.ok, 404, domain.ENotFound},
		{"sale unknown", "POST", "/api/v1/sales/9000000000000000000/reservations", f.user, f.ok, 404, domain.ENotFound},
		{"sold out", "POST", f.res, f.user, f.ok, 410, domain.ESoldOut},
		{"holder again", "POST", f.res, f.holderAuth, `{"request_id":"hostile-again"}`, 409, domain.EAlreadyPurchased},
		{"payer again", "POST", f.res, f.payerAuth, `{"request_id":"hostile-again"}`, 409, domain.EAlreadyPurchased},
	}
}

// hostileAccountCases: authentication before the body, reads, payment and
// cancel.
func hostileAccountCases(t *testing.T, f hostileFixture) []hostileCase {
	return []hostileCase{
		// authentication before the body
		{"no auth", "POST", f.res, "", f.ok, 401, domain.EUnauthorized},
		{"no auth broken body", "POST", f.res, "", `{{{`, 401, domain.EUnauthorized},
		{"basic auth", "POST", f.res, "Basic YWRtaW46YWRtaW4=", f.ok, 401, domain.EUnauthorized},
		{"bearer garbage", "POST", f.res, "Bearer a.b.c", f.ok, 401, domain.EUnauthorized},
		{"bearer empty", "POST", f.res, "Bearer ", f.ok, 401, domain.EUnauthorized},
		{"expired", "POST", f.res, sign(t, jwt.SigningMethodHS256, f.secret, jwt.MapClaims{"sub": f.sub, "exp": time.Now().Add(-time.Minute).Unix()}), f.ok, 401, domain.EUnauthorized},
		{"no exp", "POST", f.res, sign(t, jwt.SigningMethodHS256, f.secret, jwt.MapClaims{"sub": f.sub}), f.ok, 401, domain.EUnauthorized},
		{"wrong key", "POST", f.res, sign(t, jwt.SigningMethodHS256, []byte("not-the-secret"), jwt.MapClaims{"sub": f.sub, "exp": f.exp}), f.ok, 401, domain.EUnauthorized},
		{"HS384", "POST", f.res, sign(t, jwt.SigningMethodHS384, f.secret, jwt.MapClaims{"sub": f.sub, "exp": f.exp}), f.ok, 401, domain.EUnauthorized},
		{"negative sub", "POST", f.res, sign(t, jwt.SigningMethodHS256, f.secret, jwt.MapClaims{"sub": "-5", "exp": f.exp}), f.ok, 401, domain.EUnauthorized},
		{"sub with spaces", "POST", f.res, sign(t, jwt.SigningMethodHS256, f.secret, jwt.MapClaims{"sub": " 5", "exp": f.exp}), f.ok, 401, domain.EUnauthorized},
		{"role root", "POST", f.res, sign(t, jwt.SigningMethodHS256, f.secret, jwt.MapClaims{"sub": f.sub, "exp": f.exp, "role": "root"}), f.ok, 401, domain.EUnauthorized},
		// reads
		{"sale view text id", "GET", "/api/v1/sales/%2e%2e", "", "", 404, domain.ENotFound},
		{"sale view unknown", "GET", "/api/v1/sales/9000000000000000000", "", "", 404, domain.ENotFound},
		{"sale view wrong method", "PUT", "/api/v1/sales/" + f.sid, f.admin, "", 405, domain.EMethodNotAllowed},
		{"list bad sale id", "GET", "/api/v1/me/reservations?sale_id=1;DROP", f.user, "", 400, domain.EInvalid},
		{"list no auth", "GET", "/api/v1/me/reservations", "", "", 401, domain.EUnauthorized},
		{"reservation of another user", "GET", "/api/v1/reservations/" + f.heldToken, f.user, "", 404, domain.ENotFound},
		{"reservation unknown", "GET", "/api/v1/reservations/" + f.fake, f.user, "", 404, domain.ENotFound},
		{"reservation traversal", "GET", "/api/v1/reservations/..%2F..%2Fadmin", f.user, "", 404, domain.ENotFound},
		// payment and cancel
		{"pay another user's", "POST", "/api/v1/reservations/" + f.heldToken + "/payment", f.user, `{"payment_ref":"p-1"}`, 404, domain.ENotFound},
		{"pay bad ref", "POST", "/api/v1/reservations/" + f.heldToken + "/payment", f.holderAuth, `{"payment_ref":"a b"}`, 400, domain.EInvalid},
		{"pay unknown field", "POST", "/api/v1/reservations/" + f.heldToken + "/payment", f.holderAuth, `{"payment_ref":"p-1","amount_cents":0}`, 400, domain.EInvalid},
		{"pay paid with other ref", "POST", "/api/v1/reservations/" + f.paidToken + "/payment", f.payerAuth, `{"payment_ref":"another-ref"}`, 409, domain.ENotPayable},
		{"cancel paid", "POST", "/api/v1/reservations/" + f.paidToken + "/cancel", f.payerAuth, ``, 409, domain.ENotCancellable},
		{"cancel another user's", "POST", "/api/v1/reservations/" + f.heldToken + "/cancel", f.user, ``, 404, domain.ENotFound},
		{"cancel unknown field", "POST", "/api/v1/reservations/" + f.heldToken + "/cancel", f.holderAuth, `{"force":true}`, 400, domain.EInvalid},
		{"cancel wrong method", "GET", "/api/v1/reservations/" + f.heldToken + "/cancel", f.holderAuth, "", 405, domain.EMethodNotAllowed},
	}
}

// hostileAdminCases attack the admin routes.
func hostileAdminCases(t *testing.T, f hostileFixture) []hostileCase {
	return []hostileCase{
		{"user creates sale", "POST", "/admin/v1/sales", f.user, `{}`, 403, domain.EForbidden},
		{"user withdraws stock", "POST", "/admin/v1/sales/" + f.sid + "/stock", f.user, `{"delta":-1}`, 403, domain.EForbidden},
		{"user signer mints admin", "POST", "/admin/v1/sales/" + f.sid + "/pause", sign(t, jwt.SigningMethodHS256, f.secret, jwt.MapClaims{"sub": "1", "exp": f.exp, "role": "admin"}), ``, 401, domain.EUnauthorized},
		{"user pauses", "POST", "/admin/v1/sales/" + f.sid + "/pause", f.user, ``, 403, domain.EForbidden},
		{"user stops", "POST", "/admin/v1/sales/" + f.sid + "/stop", f.user, ``, 403, domain.EForbidden},
		{"user blacklists", "PUT", "/admin/v1/blacklist/" + f.sub, f.user, ``, 403, domain.EForbidden},
		{"user reconciles", "GET", "/admin/v1/sales/" + f.sid + "/reconciliation", f.user, ``, 403, domain.EForbidden},
		{"anonymous warmup", "POST", "/admin/v1/sales/" + f.sid + "/warmup", "", ``, 401, domain.EUnauthorized},
		{"create bad stock", "POST", "/admin/v1/sales", f.admin, `{"goods_id":1,"title":"x","price_cents":1,"stock":0,"starts_at":"2030-01-01T00:00:00Z","ends_at":"2030-01-02T00:00:00Z"}`, 400, domain.EInvalid},
		{"create ends before start", "POST", "/admin/v1/sales", f.admin, `{"goods_id":1,"title":"x","price_cents":1,"stock":1,"starts_at":"2030-01-02T00:00:00Z","ends_at":"2030-01-01T00:00:00Z"}`, 400, domain.EInvalid},
		{"warmup after first reservation", "POST", "/admin/v1/sales/" + f.sid + "/warmup", f.admin, ``, 409, domain.EAlreadyLive},
		{"withdraw sold units", "POST", "/admin/v1/sales/" + f.sid + "/stock", f.admin, `{"delta":-1}`, 409, domain.EInsufficient},
		{"zero delta", "POST", "/admin/v1/sales/" + f.sid + "/stock", f.admin, `{"delta":0}`, 400, domain.EInvalid},
		{"string delta", "POST", "/admin/v1/sales/" + f.sid + "/stock", f.admin, `{"delta":"1"}`, 400, domain.EInvalid},
		{"blacklist text id", "PUT", "/admin/v1/blacklist/root", f.admin, ``, 404, domain.ENotFound},
		{"blacklist wrong method", "POST", "/admin/v1/blacklist/" + f.sub, f.admin, ``, 405, domain.EMethodNotAllowed},
		{"unknown admin route", "GET", "/admin/v1/users", f.admin, ``, 404, domain.ENotFound},
		{"unknown route", "GET", "/.env", "", ``, 404, domain.ENotFound},
	}
}

// comparable is the part of a state that must not move.
func comparable(s State) map[string]any {
	out := map[string]any{"reservations": s.Reservations, "workflows": s.Workflows, "deducts": s.Deducts}
	if r := s.Report; r != nil {
		out["report"] = []any{r.StockTotal, r.RedisStock, r.DBStock, r.Orders, r.InFlight, r.Consistent, r.Discrepancies}
	}
	return out
}
