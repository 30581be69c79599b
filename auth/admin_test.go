package auth

import (
	"context"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/authtoken"
)

// The operators' provider here shares its JWKS with the users' provider,
// as SECKILL_ADMIN_JWKS_URL may equal SECKILL_JWKS_URL: the issuer, the
// audience and the role claim tell an operator's token from a user's.
func TestAdminProviderTokens(t *testing.T) {
	keys := newTestKeys(t)
	srv := serveJWKS(t, keys)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	users, err := NewIdentityProvider(ctx, srv.URL, "https://idp.example", "seckill", IdentityClaims{User: "sub", Role: "role"}, 5*time.Second)
	require.NoError(t, err)
	ops, err := NewAdminProvider(ctx, srv.URL, "https://idp.example/ops", "seckill-admin-api", RoleGrant{Claim: "groups", Value: "seckill-admin"}, 5*time.Second)
	require.NoError(t, err)
	secrets := Secrets{User: [][]byte{[]byte("user-signer-secret")}, Admin: [][]byte{[]byte("admin-signer-secret")}, IdP: users, Operators: ops}
	exp := time.Now().Add(time.Hour).Unix()
	operator := func(groups any) jwt.MapClaims {
		return jwt.MapClaims{"sub": "alice@example.com", "exp": exp, "iss": "https://idp.example/ops", "aud": "seckill-admin-api", "groups": groups}
	}

	for _, groups := range []any{"seckill-admin", []any{"staff", "seckill-admin"}} {
		for _, k := range keys {
			p, _, err := secrets.check(k.sign(t, operator(groups)))
			require.NoError(t, err, "%s %v", k.kid, groups)
			require.Equal(t, Principal{Admin: true, Subject: "alice@example.com"}, p)
		}
	}
	// An operator's token without the role verifies but is no admin, and
	// names no user.
	for _, groups := range []any{nil, "staff", []any{"staff"}, "seckill-admin-x", []any{[]any{"seckill-admin"}}} {
		_, _, err := secrets.check(keys[0].sign(t, operator(groups)))
		require.ErrorIs(t, err, ErrNotAdmin, "%v", groups)
	}
	with := func(k string, v any) jwt.MapClaims { c := operator("seckill-admin"); c[k] = v; return c }
	refused := map[string]jwt.MapClaims{
		"wrong aud":        with("aud", "other"),
		"users' aud":       with("aud", "seckill"),
		"wrong iss":        with("iss", "https://evil.example"),
		"users' iss+aud":   with("iss", "https://idp.example"),
		"no sub":           with("sub", nil),
		"numeric sub":      with("sub", 7),
		"empty sub":        with("sub", ""),
		"expired":          with("exp", time.Now().Add(-time.Minute).Unix()),
		"users' aud, role": {"sub": "9", "exp": exp, "iss": "https://idp.example", "aud": "seckill", "groups": []any{"seckill-admin"}},
	}
	for name, claims := range refused {
		_, _, err := secrets.check(keys[0].sign(t, claims))
		require.ErrorIs(t, err, errBadToken, name)
	}
	// A user token of the same provider stays a user's.
	p, _, err := secrets.check(keys[0].sign(t, jwt.MapClaims{"sub": "9", "exp": exp, "iss": "https://idp.example", "aud": "seckill"}))
	require.NoError(t, err)
	require.Equal(t, Principal{UserID: 9}, p)

	// The shared secret still signs admin tokens, named as such.
	tok, err := authtoken.Mint([]byte("admin-signer-secret"), 3, authtoken.RoleAdmin, time.Hour)
	require.NoError(t, err)
	p, _, err = secrets.check(tok)
	require.NoError(t, err)
	require.Equal(t, Principal{UserID: 3, Admin: true, Subject: "secret:3"}, p)
}

func TestAdminProviderNeedsIssuerAudienceAndRole(t *testing.T) {
	srv := serveJWKS(t, newTestKeys(t)[:1])
	for _, c := range []struct {
		iss, aud string
		grant    RoleGrant
	}{
		{"", "a", RoleGrant{"roles", "seckill-admin"}},
		{"i", "", RoleGrant{"roles", "seckill-admin"}},
		{"i", "a", RoleGrant{"", "seckill-admin"}},
		{"i", "a", RoleGrant{"roles", ""}},
	} {
		_, err := NewAdminProvider(context.Background(), srv.URL, c.iss, c.aud, c.grant, time.Second)
		require.Error(t, err, "%+v", c)
	}
}

// Verify answers ErrNotAdmin for an operator's token without the role,
// and does not remember it.
func TestVerifierPassesOnNotAdmin(t *testing.T) {
	keys := newTestKeys(t)
	srv := serveJWKS(t, keys[:1])
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ops, err := NewAdminProvider(ctx, srv.URL, "i", "a", RoleGrant{Claim: "roles", Value: "seckill-admin"}, 5*time.Second)
	require.NoError(t, err)
	v, err := NewVerifier(Secrets{Operators: ops}, 16)
	require.NoError(t, err)
	tok := keys[0].sign(t, jwt.MapClaims{"sub": "bob", "exp": time.Now().Add(time.Hour).Unix(), "iss": "i", "aud": "a", "roles": "viewer"})
	_, err = v.Verify(tok, time.Now())
	require.ErrorIs(t, err, ErrNotAdmin)
	require.Zero(t, v.cache.len())
}
