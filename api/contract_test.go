package api

import (
	"context"
	"crypto/rsa"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
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
	keys := redisgateway.SaleKeys(sale.ID)
	f := contractFixture{sid: strconv.FormatInt(sale.ID, 10), uid: testenv.UniqueUser(), secret: h.cfg.JWTSecret,
		exp: time.Now().Add(time.Hour).Unix(), admin: h.admin, rsaKey: mustRSAKey(t)}
	f.resPath = "/api/v1/sales/" + f.sid + "/reservations"
	f.user = h.MustToken(f.uid, "")
	f.sub = strconv.FormatInt(f.uid, 10)
	other := h.MustToken(testenv.UniqueUser(), "")

	// A reservation of another user, to probe ownership.
	r := h.reserve(sale.ID, other, "others-request")
	require.Equal(t, 202, r.Status)
	f.othersToken = r.json(t)["token"].(string)
	stockBefore, inboxBefore := h.redisInt(keys.Stock), h.xlen(keys.Inbox)

	f.unsigned = "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0." + strings.TrimRight(
		strings.Split(signed(t, jwt.SigningMethodHS256, f.secret, jwt.MapClaims{"sub": f.sub, "exp": f.exp}), ".")[1], "=") + "."
	f.big = `{"request_id":"` + strings.Repeat("a", 9000) + `"}`
	f.fakeToken = f.sid + "-" + strings.Repeat("0", 32)

	cases := append(contractInputCases(f), contractAuthCases(t, f)...)
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
	require.NotContains(t, bl, f.uid)
}

// contractFixture is what TestContractErrors's requests are made of.
type contractFixture struct {
	sid, resPath, sub, user, admin, othersToken, fakeToken, unsigned, big string
	uid, exp                                                              int64
	secret                                                                []byte
	rsaKey                                                                *rsa.PrivateKey
}

// contractCase is a request and the error the contract answers it with.
type contractCase struct {
	name, method, path, token, body string
	status                          int
	code                            string
}

// contractInputCases: malformed bodies, ids and routes, wrong methods.
func contractInputCases(f contractFixture) []contractCase {
	return []contractCase{
		{"broken json", "POST", f.resPath, f.user, `{"request_id":`, 400, domain.EInvalid},
		{"not an object", "POST", f.resPath, f.user, `[1,2]`, 400, domain.EInvalid},
		{"empty body", "POST", f.resPath, f.user, ``, 400, domain.EInvalid},
		{"two values", "POST", f.resPath, f.user, `{"request_id":"abcdefgh"}{}`, 400, domain.EInvalid},
		{"trailing garbage", "POST", f.resPath, f.user, `{"request_id":"abcdefgh"} x`, 400, domain.EInvalid},
		{"unknown field", "POST", f.resPath, f.user, `{"request_id":"abcdefgh","user_id":1}`, 400, domain.EInvalid},
		{"request id number", "POST", f.resPath, f.user, `{"request_id":12345678}`, 400, domain.EInvalid},
		{"request id null", "POST", f.resPath, f.user, `{"request_id":null}`, 400, domain.EInvalid},
		{"request id missing", "POST", f.resPath, f.user, `{"quantity":1}`, 400, domain.EInvalid},
		{"quantity 0", "POST", f.resPath, f.user, `{"request_id":"abcdefgh","quantity":0}`, 400, domain.EInvalid},
		{"quantity 2", "POST", f.resPath, f.user, `{"request_id":"abcdefgh","quantity":2}`, 400, domain.EInvalid},
		{"quantity string", "POST", f.resPath, f.user, `{"request_id":"abcdefgh","quantity":"1"}`, 400, domain.EInvalid},
		{"quantity float", "POST", f.resPath, f.user, `{"request_id":"abcdefgh","quantity":1.5}`, 400, domain.EInvalid},
		{"quantity null", "POST", f.resPath, f.user, `{"request_id":"abcdefgh","quantity":null}`, 400, domain.EInvalid},
		{"request id space", "POST", f.resPath, f.user, `{"request_id":"abc defgh"}`, 400, domain.EInvalid},
		{"request id quote", "POST", f.resPath, f.user, `{"request_id":"abc\"defgh"}`, 400, domain.EInvalid},
		{"request id too short", "POST", f.resPath, f.user, `{"request_id":"abcdefg"}`, 400, domain.EInvalid},
		{"request id too long", "POST", f.resPath, f.user, `{"request_id":"` + strings.Repeat("a", 65) + `"}`, 400, domain.EInvalid},
		{"request id unicode", "POST", f.resPath, f.user, `{"request_id":"abcdéfgh"}`, 400, domain.EInvalid},
		{"huge body", "POST", f.resPath, f.user, f.big, 413, domain.ETooLarge},
		{"non-numeric sale", "POST", "/api/v1/sales/abc/reservations", f.user, `{"request_id":"abcdefgh"}`, 404, domain.ENotFound},
		{"zero sale", "POST", "/api/v1/sales/0/reservations", f.user, `{"request_id":"abcdefgh"}`, 404, domain.ENotFound},
		{"negative sale", "POST", "/api/v1/sales/-1/reservations", f.user, `{"request_id":"abcdefgh"}`, 404, domain.ENotFound},
		{"leading zero sale", "POST", "/api/v1/sales/0" + f.sid + "/reservations", f.user, `{"request_id":"abcdefgh"}`, 404, domain.ENotFound},
		{"overflowing sale", "POST", "/api/v1/sales/99999999999999999999/reservations", f.user, `{"request_id":"abcdefgh"}`, 404, domain.ENotFound},
		{"unknown sale", "POST", "/api/v1/sales/9000000000000000000/reservations", f.user, `{"request_id":"abcdefgh"}`, 404, domain.ENotFound},
		{"unknown sale view", "GET", "/api/v1/sales/9000000000000000000", "", "", 404, domain.ENotFound},
		{"non-numeric sale view", "GET", "/api/v1/sales/x1", "", "", 404, domain.ENotFound},
		{"unknown route", "GET", "/api/v1/nothing", "", "", 404, domain.ENotFound},
		{"unknown root route", "GET", "/nothing", "", "", 404, domain.ENotFound},
		{"wrong method reservations", "GET", f.resPath, f.user, "", 405, domain.EMethodNotAllowed},
		{"wrong method sale", "DELETE", "/api/v1/sales/" + f.sid, f.user, "", 405, domain.EMethodNotAllowed},
		{"wrong method healthz", "POST", "/healthz", "", "", 405, domain.EMethodNotAllowed},
		{"wrong method blacklist", "POST", "/admin/v1/blacklist/5", f.admin, "", 405, domain.EMethodNotAllowed},
	}
}

// contractAuthCases: missing or wrong credentials, another user's
// reservations, bad arguments to the reads and the admin routes.
func contractAuthCases(t *testing.T, f contractFixture) []contractCase {
	return []contractCase{
		{"no auth header", "POST", f.resPath, "", `{"request_id":"abcdefgh"}`, 401, domain.EUnauthorized},
		{"auth before body", "POST", f.resPath, "", `{broken`, 401, domain.EUnauthorized},
		{"garbage token", "POST", f.resPath, "not-a-jwt", `{"request_id":"abcdefgh"}`, 401, domain.EUnauthorized},
		{"expired", "POST", f.resPath, signed(t, jwt.SigningMethodHS256, f.secret, jwt.MapClaims{"sub": f.sub, "exp": time.Now().Add(-time.Minute).Unix()}), `{"request_id":"abcdefgh"}`, 401, domain.EUnauthorized},
		{"alg none", "POST", f.resPath, f.unsigned, `{"request_id":"abcdefgh"}`, 401, domain.EUnauthorized},
		{"other key", "POST", f.resPath, signed(t, jwt.SigningMethodHS256, []byte("another-secret"), jwt.MapClaims{"sub": f.sub, "exp": f.exp}), `{"request_id":"abcdefgh"}`, 401, domain.EUnauthorized},
		{"HS512", "POST", f.resPath, signed(t, jwt.SigningMethodHS512, f.secret, jwt.MapClaims{"sub": f.sub, "exp": f.exp}), `{"request_id":"abcdefgh"}`, 401, domain.EUnauthorized},
		{"RS256", "POST", f.resPath, signed(t, jwt.SigningMethodRS256, f.rsaKey, jwt.MapClaims{"sub": f.sub, "exp": f.exp}), `{"request_id":"abcdefgh"}`, 401, domain.EUnauthorized},
		{"no exp", "POST", f.resPath, signed(t, jwt.SigningMethodHS256, f.secret, jwt.MapClaims{"sub": f.sub}), `{"request_id":"abcdefgh"}`, 401, domain.EUnauthorized},
		{"numeric sub", "POST", f.resPath, signed(t, jwt.SigningMethodHS256, f.secret, jwt.MapClaims{"sub": f.uid, "exp": f.exp}), `{"request_id":"abcdefgh"}`, 401, domain.EUnauthorized},
		{"zero sub", "POST", f.resPath, signed(t, jwt.SigningMethodHS256, f.secret, jwt.MapClaims{"sub": "0", "exp": f.exp}), `{"request_id":"abcdefgh"}`, 401, domain.EUnauthorized},
		{"word sub", "POST", f.resPath, signed(t, jwt.SigningMethodHS256, f.secret, jwt.MapClaims{"sub": "alice", "exp": f.exp}), `{"request_id":"abcdefgh"}`, 401, domain.EUnauthorized},
		{"no sub", "POST", f.resPath, signed(t, jwt.SigningMethodHS256, f.secret, jwt.MapClaims{"exp": f.exp}), `{"request_id":"abcdefgh"}`, 401, domain.EUnauthorized},
		{"odd role", "POST", f.resPath, signed(t, jwt.SigningMethodHS256, f.secret, jwt.MapClaims{"sub": f.sub, "exp": f.exp, "role": "root"}), `{"request_id":"abcdefgh"}`, 401, domain.EUnauthorized},
		{"user on admin create", "POST", "/admin/v1/sales", f.user, `{}`, 403, domain.EForbidden},
		{"user on admin warmup", "POST", "/admin/v1/sales/" + f.sid + "/warmup", f.user, ``, 403, domain.EForbidden},
		{"user on admin stock", "POST", "/admin/v1/sales/" + f.sid + "/stock", f.user, `{"delta":-10}`, 403, domain.EForbidden},
		{"user on blacklist", "PUT", "/admin/v1/blacklist/" + f.sub, f.user, ``, 403, domain.EForbidden},
		{"user signer's admin token", "POST", "/admin/v1/sales/" + f.sid + "/pause", signed(t, jwt.SigningMethodHS256, f.secret, jwt.MapClaims{"sub": "1", "exp": f.exp, "role": "admin"}), ``, 401, domain.EUnauthorized},
		{"no auth on admin", "POST", "/admin/v1/sales/" + f.sid + "/pause", "", ``, 401, domain.EUnauthorized},
		{"another user's reservation", "GET", "/api/v1/reservations/" + f.othersToken, f.user, "", 404, domain.ENotFound},
		{"another user's payment", "POST", "/api/v1/reservations/" + f.othersToken + "/payment", f.user, `{"payment_ref":"p1"}`, 404, domain.ENotFound},
		{"another user's cancel", "POST", "/api/v1/reservations/" + f.othersToken + "/cancel", f.user, `{}`, 404, domain.ENotFound},
		{"malformed token", "GET", "/api/v1/reservations/not-a-token", f.user, "", 404, domain.ENotFound},
		{"unknown token", "GET", "/api/v1/reservations/" + f.fakeToken, f.user, "", 404, domain.ENotFound},
		{"bad payment ref", "POST", "/api/v1/reservations/" + f.othersToken + "/payment", f.user, `{"payment_ref":"a b"}`, 400, domain.EInvalid},
		{"cancel unknown field", "POST", "/api/v1/reservations/" + f.othersToken + "/cancel", f.user, `{"why":1}`, 400, domain.EInvalid},
		{"list bad sale id", "GET", "/api/v1/me/reservations?sale_id=abc", f.user, "", 400, domain.EInvalid},
		{"list zero sale id", "GET", "/api/v1/me/reservations?sale_id=0", f.user, "", 400, domain.EInvalid},
		{"admin bad blacklist id", "PUT", "/admin/v1/blacklist/abc", f.admin, "", 404, domain.ENotFound},
		{"admin zero delta", "POST", "/admin/v1/sales/" + f.sid + "/stock", f.admin, `{"delta":0}`, 400, domain.EInvalid},
		{"admin float delta", "POST", "/admin/v1/sales/" + f.sid + "/stock", f.admin, `{"delta":1.5}`, 400, domain.EInvalid},
		{"admin unknown sale pause", "POST", "/admin/v1/sales/9000000000000000000/pause", f.admin, "", 404, domain.ENotFound},
		{"admin create missing stock", "POST", "/admin/v1/sales", f.admin, `{"goods_id":1,"title":"x","price_cents":1,"starts_at":"2030-01-01T00:00:00Z","ends_at":"2030-01-02T00:00:00Z"}`, 400, domain.EInvalid},
	}
}
