package api

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/store"
)

// testIdP is an identity provider: an ES256 key generated here, its
// public half served as a JWKS.
type testIdP struct {
	key *ecdsa.PrivateKey
	url string
}

func newTestIdP(t *testing.T) *testIdP {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	x, y := make([]byte, 32), make([]byte, 32)
	key.X.FillBytes(x)
	key.Y.FillBytes(y)
	b64 := base64.RawURLEncoding.EncodeToString
	body, err := json.Marshal(map[string]any{"keys": []map[string]string{
		{"kty": "EC", "kid": "idp-1", "alg": "ES256", "crv": "P-256", "x": b64(x), "y": b64(y)}}})
	require.NoError(t, err)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return &testIdP{key: key, url: srv.URL}
}

func (p *testIdP) sign(t *testing.T, claims jwt.MapClaims) string {
	t.Helper()
	if _, ok := claims["exp"]; !ok {
		claims["exp"] = time.Now().Add(time.Hour).Unix()
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, claims)
	tok.Header["kid"] = "idp-1"
	s, err := tok.SignedString(p.key)
	require.NoError(t, err)
	return s
}

// lockedBuffer collects the API's log lines (JSON) across goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines are the log lines whose msg is msg.
func (b *lockedBuffer) lines(t *testing.T, msg string) []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, l := range bytes.Split(b.buf.Bytes(), []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal(l, &m), "%s", l)
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

const (
	usersIssuer = "https://idp.test"
	usersAud    = "seckill"
	opsIssuer   = "https://idp.test/operators"
	opsAud      = "seckill-admin"
)

// identityHarness is the API with one identity provider signing both
// users' tokens and operators' (SECKILL_ADMIN_JWKS_URL = SECKILL_JWKS_URL),
// its log collected.
func identityHarness(t *testing.T) (*harness, *testIdP, *lockedBuffer) {
	idp := newTestIdP(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	users, err := auth.NewIdentityProvider(ctx, idp.url, usersIssuer, usersAud, auth.IdentityClaims{User: "sub", Role: "role"}, 5*time.Second)
	require.NoError(t, err)
	ops, err := auth.NewAdminProvider(ctx, idp.url, opsIssuer, opsAud, auth.RoleGrant{Claim: "roles", Value: "seckill-admin"}, 5*time.Second)
	require.NoError(t, err)
	logs := &lockedBuffer{}
	h := mustHarnessDeps(t, testenv.MustRedis(t), func(d *Deps) {
		d.Logger = slog.New(slog.NewJSONHandler(logs, nil))
		d.IdentityProvider, d.AdminIdentityProvider = users, ops
	})
	return h, idp, logs
}

func operatorClaims(sub string, roles any) jwt.MapClaims {
	return jwt.MapClaims{"sub": sub, "iss": opsIssuer, "aud": opsAud, "roles": roles}
}

func TestOperatorTokensFromTheIdentityProvider(t *testing.T) {
	h, idp, logs := identityHarness(t)
	sale := h.MustWarmSale(5)
	pause := "/admin/v1/sales/" + strconv.FormatInt(sale.ID, 10) + "/pause"
	alice := idp.sign(t, operatorClaims("alice@example.com", []any{"staff", "seckill-admin"}))

	r := h.do("POST", pause, alice, "")
	require.Equal(t, 200, r.Status, string(r.Body))
	r = h.reserve(sale.ID, h.MustToken(testenv.UniqueUser(), ""), "after-the-pause")
	require.Equal(t, 403, r.Status, string(r.Body))
	require.Equal(t, "sale_paused", r.errCode(t))

	refused := map[string]struct {
		token  string
		status int
		code   string
	}{
		"user token of the provider":  {idp.sign(t, jwt.MapClaims{"sub": "42", "iss": usersIssuer, "aud": usersAud}), 403, "forbidden"},
		"operator without the role":   {idp.sign(t, operatorClaims("bob", "staff")), 403, "forbidden"},
		"role, wrong audience":        {idp.sign(t, jwt.MapClaims{"sub": "eve", "iss": opsIssuer, "aud": "other", "roles": "seckill-admin"}), 401, "unauthorized"},
		"role, wrong issuer":          {idp.sign(t, jwt.MapClaims{"sub": "eve", "iss": "https://evil.test", "aud": opsAud, "roles": "seckill-admin"}), 401, "unauthorized"},
		"role, users' issuer and aud": {idp.sign(t, jwt.MapClaims{"sub": "42", "iss": usersIssuer, "aud": usersAud, "roles": "seckill-admin"}), 401, "unauthorized"},
		"operator, expired": {idp.sign(t, jwt.MapClaims{"sub": "alice@example.com", "iss": opsIssuer, "aud": opsAud, "roles": "seckill-admin",
			"exp": time.Now().Add(-time.Minute).Unix()}), 401, "unauthorized"},
	}
	for name, c := range refused {
		r := h.do("POST", pause, c.token, "")
		require.Equal(t, c.status, r.Status, "%s: %s", name, r.Body)
		require.Equal(t, c.code, r.errCode(t), name)
	}
	// An operator is no user: the user routes refuse the token.
	r = h.do("GET", "/api/v1/me/reservations", alice, "")
	require.Equal(t, 401, r.Status, string(r.Body))

	// The pause is recorded with its operator, once (the refusals wrote
	// nothing), and logged with it.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, err := h.st.AdminAudit(ctx, sale.ID, 10)
	require.NoError(t, err)
	var pauses []store.AdminWrite
	for _, w := range ws {
		if w.Action == "pause" {
			pauses = append(pauses, w)
		}
	}
	require.Len(t, pauses, 1, "%+v", ws)
	require.Equal(t, "alice@example.com", pauses[0].Operator)
	require.Equal(t, sale.ID, *pauses[0].SaleID)
	require.Equal(t, 200, pauses[0].Status)
	require.Equal(t, "POST "+pause, pauses[0].Summary)
	require.NotEmpty(t, pauses[0].RequestID)
	require.WithinDuration(t, time.Now(), pauses[0].At, time.Minute)

	var logged []map[string]any
	for _, l := range logs.lines(t, "admin write") {
		if l["action"] == "pause" {
			logged = append(logged, l)
		}
	}
	require.Len(t, logged, 1)
	require.Equal(t, "alice@example.com", logged[0]["operator"])
	require.EqualValues(t, sale.ID, logged[0]["sale_id"])
	require.Equal(t, pauses[0].RequestID, logged[0]["http_request_id"])
	// The service's own line names the operator too.
	control := logs.lines(t, "sale control")
	require.NotEmpty(t, control)
	require.Equal(t, "alice@example.com", control[len(control)-1]["operator"])
}

func TestAdminAuditNamesEachOperator(t *testing.T) {
	h, idp, _ := identityHarness(t)
	sale := h.MustWarmSale(5) // warmed by the shared secret's admin, user 1
	sid := strconv.FormatInt(sale.ID, 10)
	alice := idp.sign(t, operatorClaims("alice", "seckill-admin"))
	bob := idp.sign(t, operatorClaims("Bob Ødegård", []any{"seckill-admin"}))

	require.Equal(t, 200, h.do("POST", "/admin/v1/sales/"+sid+"/pause", alice, "").Status)
	require.Equal(t, 200, h.do("POST", "/admin/v1/sales/"+sid+"/resume", bob, "").Status)
	r := h.doWith("POST", "/admin/v1/sales/"+sid+"/stock", bob, `{"delta": 2}`, map[string]string{"Idempotency-Key": "bob-adds-2"})
	require.Equal(t, 200, r.Status, string(r.Body))
	// A repeat is answered from its key and records nothing more.
	r = h.doWith("POST", "/admin/v1/sales/"+sid+"/stock", bob, `{"delta": 2}`, map[string]string{"Idempotency-Key": "bob-adds-2"})
	require.Equal(t, 200, r.Status, string(r.Body))
	require.Equal(t, "true", r.Header.Get("Idempotent-Replayed"))
	// Keys are each operator's own: alice's same key is a write of hers.
	r = h.doWith("POST", "/admin/v1/sales/"+sid+"/stock", alice, `{"delta": 2}`, map[string]string{"Idempotency-Key": "bob-adds-2"})
	require.Equal(t, 200, r.Status, string(r.Body))
	require.Empty(t, r.Header.Get("Idempotent-Replayed"))
	require.Equal(t, int64(9), h.dbStock(sale.ID))
	// A refused write is not in the audit.
	require.Equal(t, 409, h.do("POST", "/admin/v1/sales/"+sid+"/stock", alice, `{"delta": -100}`).Status)

	r = h.do("GET", "/admin/v1/audit?sale_id="+sid, bob, "")
	require.Equal(t, 200, r.Status, string(r.Body))
	var got struct {
		Entries []struct {
			Operator string `json:"operator"`
			Action   string `json:"action"`
			SaleID   int64  `json:"sale_id"`
			Summary  string `json:"summary"`
			Status   int    `json:"status"`
		} `json:"entries"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &got))
	type entry struct{ operator, action string }
	var entries []entry
	for _, e := range got.Entries {
		require.Equal(t, sale.ID, e.SaleID)
		entries = append(entries, entry{e.Operator, e.Action})
	}
	require.Equal(t, []entry{{"alice", "adjust_stock"}, {"Bob Ødegård", "adjust_stock"}, {"Bob Ødegård", "resume"}, {"alice", "pause"}, {"secret:1", "warmup"}}, entries)
	require.Equal(t, `POST /admin/v1/sales/`+sid+`/stock {"delta": 2}`, got.Entries[1].Summary)

	// The audit is the operators': a user's token is refused, and a bad
	// filter is invalid.
	require.Equal(t, 403, h.do("GET", "/admin/v1/audit", h.MustToken(testenv.UniqueUser(), ""), "").Status)
	require.Equal(t, 400, h.do("GET", "/admin/v1/audit?limit=0", bob, "").Status)
	r = h.do("GET", "/admin/v1/audit?sale_id="+sid+"&limit=2", bob, "")
	require.Equal(t, 200, r.Status)
	require.NoError(t, json.Unmarshal(r.Body, &got))
	require.Len(t, got.Entries, 2)
}

// A sale created by an operator is audited with the sale it created.
func TestAdminAuditOfACreatedSale(t *testing.T) {
	h, idp, _ := identityHarness(t)
	carol := idp.sign(t, operatorClaims("carol", "seckill-admin"))
	starts := time.Now().UTC().Add(time.Hour).Format(time.RFC3339)
	ends := time.Now().UTC().Add(2 * time.Hour).Format(time.RFC3339)
	r := h.do("POST", "/admin/v1/sales", carol, `{"goods_id":7,"title":"phone","price_cents":4999,"stock":3,"starts_at":"`+starts+`","ends_at":"`+ends+`"}`)
	require.Equal(t, 201, r.Status, string(r.Body))
	id := int64(r.json(t)["sale_id"].(float64))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = h.st.MarkFinished(ctx, id)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, err := h.st.AdminAudit(ctx, id, 10)
	require.NoError(t, err)
	require.Len(t, ws, 1)
	require.Equal(t, "carol", ws[0].Operator)
	require.Equal(t, "create_sale", ws[0].Action)
	require.Equal(t, 201, ws[0].Status)
}
