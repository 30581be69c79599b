package auth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"maps"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/authtoken"
)

type testKey struct {
	kid    string
	method jwt.SigningMethod
	priv   crypto.Signer
}

func (k testKey) jwk() map[string]string {
	b64 := base64.RawURLEncoding.EncodeToString
	switch pub := k.priv.Public().(type) {
	case *rsa.PublicKey:
		return map[string]string{"kty": "RSA", "kid": k.kid, "alg": "RS256", "n": b64(pub.N.Bytes()), "e": b64(big.NewInt(int64(pub.E)).Bytes())}
	case *ecdsa.PublicKey:
		x, y := make([]byte, 32), make([]byte, 32)
		pub.X.FillBytes(x)
		pub.Y.FillBytes(y)
		return map[string]string{"kty": "EC", "kid": k.kid, "alg": "ES256", "crv": "P-256", "x": b64(x), "y": b64(y)}
	case ed25519.PublicKey:
		return map[string]string{"kty": "OKP", "kid": k.kid, "alg": "EdDSA", "crv": "Ed25519", "x": b64(pub)}
	}
	panic("unknown key type")
}

func newTestKeys(t testing.TB) []testKey {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	return []testKey{{"rsa-1", jwt.SigningMethodRS256, rsaKey}, {"ec-1", jwt.SigningMethodES256, ecKey}, {"ed-1", jwt.SigningMethodEdDSA, edKey}}
}

// jwksServer serves the public halves of the keys it is given.
type jwksServer struct {
	*httptest.Server
	body atomic.Value // []byte
}

func serveJWKS(t testing.TB, keys []testKey) *jwksServer {
	s := &jwksServer{}
	s.publish(t, keys)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(s.body.Load().([]byte))
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) publish(t testing.TB, keys []testKey) {
	set := make([]map[string]string, len(keys))
	for i, k := range keys {
		set[i] = k.jwk()
	}
	b, err := json.Marshal(map[string]any{"keys": set})
	require.NoError(t, err)
	s.body.Store(b)
}

func (k testKey) sign(t testing.TB, claims jwt.MapClaims) string {
	tok := jwt.NewWithClaims(k.method, claims)
	tok.Header["kid"] = k.kid
	s, err := tok.SignedString(k.priv)
	require.NoError(t, err)
	return s
}

func TestIdentityProviderTokens(t *testing.T) {
	keys := newTestKeys(t)
	srv := serveJWKS(t, keys)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	idp, err := NewIdentityProvider(ctx, srv.URL, "https://idp.example", "seckill", IdentityClaims{User: "uid", Role: "roles"}, 5*time.Second)
	require.NoError(t, err)
	adminSecret := []byte("admin-signer-secret")
	secrets := Secrets{User: [][]byte{[]byte("user-signer-secret")}, Admin: [][]byte{adminSecret}, IdP: idp}
	exp := time.Now().Add(time.Hour).Unix()
	good := func() jwt.MapClaims {
		return jwt.MapClaims{"uid": "42", "exp": exp, "iss": "https://idp.example", "aud": "seckill"}
	}
	with := func(k string, v any) jwt.MapClaims { c := good(); c[k] = v; return c }
	without := func(k string) jwt.MapClaims { c := good(); delete(c, k); return c }

	for _, k := range keys {
		p, _, err := secrets.check(k.sign(t, good()))
		require.NoError(t, err, k.kid)
		require.Equal(t, Principal{UserID: 42}, p, k.kid)
	}
	// The role claim is SECKILL_JWT_ROLE_CLAIM's ("roles" here): the
	// provider's own roles are users, "admin" among them is refused.
	for _, roles := range []any{"customer", []any{"customer", "vip"}} {
		p, _, err := secrets.check(keys[0].sign(t, with("roles", roles)))
		require.NoError(t, err, roles)
		require.Equal(t, Principal{UserID: 42}, p)
	}
	rsaKey := keys[0]
	refused := map[string]string{
		"wrong iss":      rsaKey.sign(t, with("iss", "https://evil.example")),
		"wrong aud":      rsaKey.sign(t, with("aud", "other")),
		"no iss":         rsaKey.sign(t, without("iss")),
		"no aud":         rsaKey.sign(t, without("aud")),
		"expired":        rsaKey.sign(t, with("exp", time.Now().Add(-time.Minute).Unix())),
		"no exp":         rsaKey.sign(t, without("exp")),
		"sub not uid":    rsaKey.sign(t, jwt.MapClaims{"sub": "42", "exp": exp, "iss": "https://idp.example", "aud": "seckill"}),
		"roles admin":    rsaKey.sign(t, with("roles", "admin")),
		"roles [admin]":  rsaKey.sign(t, with("roles", []any{"customer", "admin"})),
		"unknown kid":    testKey{"nobody", jwt.SigningMethodES256, mustECKey(t)}.sign(t, good()),
		"alg none":       noneToken(t, good()),
		"hs256 with jwk": hsWithPublicKey(t, rsaKey, good()),
	}
	for name, tok := range refused {
		_, _, err := secrets.check(tok)
		require.ErrorIs(t, err, errBadToken, name)
	}
	// Admin tokens still come from the admin secret alone.
	admin, err := authtoken.Mint(adminSecret, 1, authtoken.RoleAdmin, time.Hour)
	require.NoError(t, err)
	p, _, err := secrets.check(admin)
	require.NoError(t, err)
	require.True(t, p.Admin)
}

func TestIdentityProviderPicksUpARotatedKey(t *testing.T) {
	keys := newTestKeys(t)
	srv := serveJWKS(t, keys[:1])
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	idp, err := NewIdentityProvider(ctx, srv.URL, "https://idp.example", "seckill", IdentityClaims{User: "sub", Role: "role"}, 5*time.Second)
	require.NoError(t, err)
	claims := jwt.MapClaims{"sub": "7", "exp": time.Now().Add(time.Hour).Unix(), "iss": "https://idp.example", "aud": "seckill"}

	// The provider rotates to a key published after the API started: the
	// unknown key id triggers a refresh.
	srv.publish(t, keys[1:2])
	p, _, err := idp.verify(keys[1].sign(t, claims), nil)
	require.NoError(t, err)
	require.EqualValues(t, 7, p.UserID)
}

func TestIdentityProviderUnreachableAtStart(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	_, err := NewIdentityProvider(context.Background(), srv.URL, "i", "a", IdentityClaims{User: "sub", Role: "role"}, time.Second)
	require.ErrorContains(t, err, "fetch JWKS")
}

func mustECKey(t testing.TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	return k
}

func noneToken(t *testing.T, claims jwt.MapClaims) string {
	s, err := jwt.NewWithClaims(jwt.SigningMethodNone, claims).SignedString(jwt.UnsafeAllowNoneSignatureType)
	require.NoError(t, err)
	return s
}

// hsWithPublicKey is the algorithm-confusion attack: HS256 keyed by the
// provider's public key bytes.
func hsWithPublicKey(t *testing.T, k testKey, claims jwt.MapClaims) string {
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, claims)
	tok.Header["kid"] = k.kid
	s, err := tok.SignedString(k.priv.Public().(*rsa.PublicKey).N.Bytes())
	require.NoError(t, err)
	return s
}

// testProvider is an identity provider of users, and operators at the same
// JWKS, signing with one ES256 key.
type testProvider struct {
	users     *IdentityProvider
	operators *AdminProvider
	key       testKey
}

const (
	testOperatorsIssuer   = "https://idp.example/ops"
	testOperatorsAudience = "seckill-admin-api"
)

var testOperatorsRole = RoleGrant{Claim: "groups", Value: "seckill-admin"}

func newTestProvider(t testing.TB) testProvider {
	key := testKey{"ec-1", jwt.SigningMethodES256, mustECKey(t)}
	srv := serveJWKS(t, []testKey{key})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	users, err := NewIdentityProvider(ctx, srv.URL, "https://idp.example", "seckill", IdentityClaims{User: "sub", Role: "role"}, 5*time.Second)
	require.NoError(t, err)
	ops, err := NewAdminProvider(ctx, srv.URL, testOperatorsIssuer, testOperatorsAudience, testOperatorsRole, 5*time.Second)
	require.NoError(t, err)
	return testProvider{users: users, operators: ops, key: key}
}

// user signs a user token for user valid for ttl, with extra claims.
func (p testProvider) user(t testing.TB, user int64, ttl time.Duration, extra jwt.MapClaims) string {
	claims := jwt.MapClaims{"sub": strconv.FormatInt(user, 10), "exp": time.Now().Add(ttl).Unix(), "iss": "https://idp.example", "aud": "seckill"}
	maps.Copy(claims, extra)
	return p.key.sign(t, claims)
}

// operator signs an operator's token for sub with groups.
func (p testProvider) operator(t testing.TB, sub string, groups any) string {
	return p.key.sign(t, jwt.MapClaims{"sub": sub, "exp": time.Now().Add(time.Hour).Unix(), "iss": testOperatorsIssuer,
		"aud": testOperatorsAudience, "groups": groups})
}
