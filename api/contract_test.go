package api

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lua"
)

func signed(tb testing.TB, method jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	tb.Helper()
	s, err := jwt.NewWithClaims(method, claims).SignedString(key)
	require.NoError(tb, err)
	return s
}

// TestContractErrors walks the contract's error cases; none changes state.
func TestContractErrors(t *testing.T) {
	h := MustHarness(t)
	sale := h.MustWarmSale(10)
	keys := lua.SaleKeys(sale.ID)
	sid := strconv.FormatInt(sale.ID, 10)
	resPath := "/api/v1/sales/" + sid + "/reservations"
	uid := testenv.UniqueUser()
	user := h.MustToken(uid, "")
	other := h.MustToken(testenv.UniqueUser(), "")
	secret := h.cfg.JWTSecret
	exp := time.Now().Add(time.Hour).Unix()
	sub := strconv.FormatInt(uid, 10)

	// A reservation of another user, to probe ownership.
	r := h.reserve(sale.ID, other, "others-request")
	require.Equal(t, 202, r.Status)
	othersToken := r.json(t)["token"].(string)
	stockBefore, inboxBefore := h.redisInt(keys.Stock), h.xlen(keys.Inbox)

	unsigned := "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0." + strings.TrimRight(
		strings.Split(signed(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": sub, "exp": exp}), ".")[1], "=") + "."
	rsaKey := mustRSAKey(t)
	big := `{"request_id":"` + strings.Repeat("a", 9000) + `"}`
	fakeToken := sid + "-" + strings.Repeat("0", 32)

	cases := []struct {
		name, method, path, token, body string
		status                          int
		code                            string
	}{
		{"broken json", "POST", resPath, user, `{"request_id":`, 400, domain.EInvalid},
		{"not an object", "POST", resPath, user, `[1,2]`, 400, domain.EInvalid},
		{"empty body", "POST", resPath, user, ``, 400, domain.EInvalid},
		{"two values", "POST", resPath, user, `{"request_id":"abcdefgh"}{}`, 400, domain.EInvalid},
		{"trailing garbage", "POST", resPath, user, `{"request_id":"abcdefgh"} x`, 400, domain.EInvalid},
		{"unknown field", "POST", resPath, user, `{"request_id":"abcdefgh","user_id":1}`, 400, domain.EInvalid},
		{"request id number", "POST", resPath, user, `{"request_id":12345678}`, 400, domain.EInvalid},
		{"request id null", "POST", resPath, user, `{"request_id":null}`, 400, domain.EInvalid},
		{"request id missing", "POST", resPath, user, `{"quantity":1}`, 400, domain.EInvalid},
		{"quantity 0", "POST", resPath, user, `{"request_id":"abcdefgh","quantity":0}`, 400, domain.EInvalid},
		{"quantity 2", "POST", resPath, user, `{"request_id":"abcdefgh","quantity":2}`, 400, domain.EInvalid},
		{"quantity string", "POST", resPath, user, `{"request_id":"abcdefgh","quantity":"1"}`, 400, domain.EInvalid},
		{"quantity float", "POST", resPath, user, `{"request_id":"abcdefgh","quantity":1.5}`, 400, domain.EInvalid},
		{"quantity null", "POST", resPath, user, `{"request_id":"abcdefgh","quantity":null}`, 400, domain.EInvalid},
		{"request id space", "POST", resPath, user, `{"request_id":"abc defgh"}`, 400, domain.EInvalid},
		{"request id quote", "POST", resPath, user, `{"request_id":"abc\"defgh"}`, 400, domain.EInvalid},
		{"request id too short", "POST", resPath, user, `{"request_id":"abcdefg"}`, 400, domain.EInvalid},
		{"request id too long", "POST", resPath, user, `{"request_id":"` + strings.Repeat("a", 65) + `"}`, 400, domain.EInvalid},
		{"request id unicode", "POST", resPath, user, `{"request_id":"abcdéfgh"}`, 400, domain.EInvalid},
		{"huge body", "POST", resPath, user, big, 413, domain.ETooLarge},
		{"non-numeric sale", "POST", "/api/v1/sales/abc/reservations", user, `{"request_id":"abcdefgh"}`, 404, domain.ENotFound},
		{"zero sale", "POST", "/api/v1/sales/0/reservations", user, `{"request_id":"abcdefgh"}`, 404, domain.ENotFound},
		{"negative sale", "POST", "/api/v1/sales/-1/reservations", user, `{"request_id":"abcdefgh"}`, 404, domain.ENotFound},
		{"leading zero sale", "POST", "/api/v1/sales/0" + sid + "/reservations", user, `{"request_id":"abcdefgh"}`, 404, domain.ENotFound},
		{"overflowing sale", "POST", "/api/v1/sales/99999999999999999999/reservations", user, `{"request_id":"abcdefgh"}`, 404, domain.ENotFound},
		{"unknown sale", "POST", "/api/v1/sales/9000000000000000000/reservations", user, `{"request_id":"abcdefgh"}`, 404, domain.ENotFound},
		{"unknown sale view", "GET", "/api/v1/sales/9000000000000000000", "", "", 404, domain.ENotFound},
		{"non-numeric sale view", "GET", "/api/v1/sales/x1", "", "", 404, domain.ENotFound},
		{"unknown route", "GET", "/api/v1/nothing", "", "", 404, domain.ENotFound},
		{"unknown root route", "GET", "/nothing", "", "", 404, domain.ENotFound},
		{"wrong method reservations", "GET", resPath, user, "", 405, domain.EMethodNotAllowed},
		{"wrong method sale", "DELETE", "/api/v1/sales/" + sid, user, "", 405, domain.EMethodNotAllowed},
		{"wrong method healthz", "POST", "/healthz", "", "", 405, domain.EMethodNotAllowed},
		{"wrong method blacklist", "POST", "/admin/v1/blacklist/5", h.admin, "", 405, domain.EMethodNotAllowed},
		{"no auth header", "POST", resPath, "", `{"request_id":"abcdefgh"}`, 401, domain.EUnauthorized},
		{"auth before body", "POST", resPath, "", `{broken`, 401, domain.EUnauthorized},
		{"garbage token", "POST", resPath, "not-a-jwt", `{"request_id":"abcdefgh"}`, 401, domain.EUnauthorized},
		{"expired", "POST", resPath, signed(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": sub, "exp": time.Now().Add(-time.Minute).Unix()}), `{"request_id":"abcdefgh"}`, 401, domain.EUnauthorized},
		{"alg none", "POST", resPath, unsigned, `{"request_id":"abcdefgh"}`, 401, domain.EUnauthorized},
		{"other key", "POST", resPath, signed(t, jwt.SigningMethodHS256, []byte("another-secret"), jwt.MapClaims{"sub": sub, "exp": exp}), `{"request_id":"abcdefgh"}`, 401, domain.EUnauthorized},
		{"HS512", "POST", resPath, signed(t, jwt.SigningMethodHS512, secret, jwt.MapClaims{"sub": sub, "exp": exp}), `{"request_id":"abcdefgh"}`, 401, domain.EUnauthorized},
		{"RS256", "POST", resPath, signed(t, jwt.SigningMethodRS256, rsaKey, jwt.MapClaims{"sub": sub, "exp": exp}), `{"request_id":"abcdefgh"}`, 401, domain.EUnauthorized},
		{"no exp", "POST", resPath, signed(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": sub}), `{"request_id":"abcdefgh"}`, 401, domain.EUnauthorized},
		{"numeric sub", "POST", resPath, signed(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": uid, "exp": exp}), `{"request_id":"abcdefgh"}`, 401, domain.EUnauthorized},
		{"zero sub", "POST", resPath, signed(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "0", "exp": exp}), `{"request_id":"abcdefgh"}`, 401, domain.EUnauthorized},
		{"word sub", "POST", resPath, signed(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "alice", "exp": exp}), `{"request_id":"abcdefgh"}`, 401, domain.EUnauthorized},
		{"no sub", "POST", resPath, signed(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"exp": exp}), `{"request_id":"abcdefgh"}`, 401, domain.EUnauthorized},
		{"odd role", "POST", resPath, signed(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": sub, "exp": exp, "role": "root"}), `{"request_id":"abcdefgh"}`, 401, domain.EUnauthorized},
		{"user on admin create", "POST", "/admin/v1/sales", user, `{}`, 403, domain.EForbidden},
		{"user on admin warmup", "POST", "/admin/v1/sales/" + sid + "/warmup", user, ``, 403, domain.EForbidden},
		{"user on admin stock", "POST", "/admin/v1/sales/" + sid + "/stock", user, `{"delta":-10}`, 403, domain.EForbidden},
		{"user on blacklist", "PUT", "/admin/v1/blacklist/" + sub, user, ``, 403, domain.EForbidden},
		{"user signer's admin token", "POST", "/admin/v1/sales/" + sid + "/pause", signed(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "1", "exp": exp, "role": "admin"}), ``, 401, domain.EUnauthorized},
		{"no auth on admin", "POST", "/admin/v1/sales/" + sid + "/pause", "", ``, 401, domain.EUnauthorized},
		{"another user's reservation", "GET", "/api/v1/reservations/" + othersToken, user, "", 404, domain.ENotFound},
		{"another user's payment", "POST", "/api/v1/reservations/" + othersToken + "/payment", user, `{"payment_ref":"p1"}`, 404, domain.ENotFound},
		{"another user's cancel", "POST", "/api/v1/reservations/" + othersToken + "/cancel", user, `{}`, 404, domain.ENotFound},
		{"malformed token", "GET", "/api/v1/reservations/not-a-token", user, "", 404, domain.ENotFound},
		{"unknown token", "GET", "/api/v1/reservations/" + fakeToken, user, "", 404, domain.ENotFound},
		{"bad payment ref", "POST", "/api/v1/reservations/" + othersToken + "/payment", user, `{"payment_ref":"a b"}`, 400, domain.EInvalid},
		{"cancel unknown field", "POST", "/api/v1/reservations/" + othersToken + "/cancel", user, `{"why":1}`, 400, domain.EInvalid},
		{"list bad sale id", "GET", "/api/v1/me/reservations?sale_id=abc", user, "", 400, domain.EInvalid},
		{"list zero sale id", "GET", "/api/v1/me/reservations?sale_id=0", user, "", 400, domain.EInvalid},
		{"admin bad blacklist id", "PUT", "/admin/v1/blacklist/abc", h.admin, "", 404, domain.ENotFound},
		{"admin zero delta", "POST", "/admin/v1/sales/" + sid + "/stock", h.admin, `{"delta":0}`, 400, domain.EInvalid},
		{"admin float delta", "POST", "/admin/v1/sales/" + sid + "/stock", h.admin, `{"delta":1.5}`, 400, domain.EInvalid},
		{"admin unknown sale pause", "POST", "/admin/v1/sales/9000000000000000000/pause", h.admin, "", 404, domain.ENotFound},
		{"admin create missing stock", "POST", "/admin/v1/sales", h.admin, `{"goods_id":1,"title":"x","price_cents":1,"starts_at":"2030-01-01T00:00:00Z","ends_at":"2030-01-02T00:00:00Z"}`, 400, domain.EInvalid},
	}
	require.GreaterOrEqual(t, len(cases), 40)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do(tc.method, tc.path, tc.token, tc.body)
			require.Equal(t, tc.status, r.Status, "body %s", r.Body)
			require.Equal(t, tc.code, r.errCode(t))
			require.NotEmpty(t, r.Header.Get("Date"), "every answer carries Date")
		})
	}
	require.Equal(t, stockBefore, h.redisInt(keys.Stock), "no error changed the stock")
	require.Equal(t, inboxBefore, h.xlen(keys.Inbox), "no error added to the inbox")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	bl, err := h.st.Blacklist(ctx)
	require.NoError(t, err)
	require.NotContains(t, bl, uid)
}
