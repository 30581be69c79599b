package auth

import (
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/authtoken"
)

func TestAdminTokensComeOnlyFromTheAdminSigner(t *testing.T) {
	userSecret, adminSecret := []byte("user-signer-secret"), []byte("admin-signer-secret")
	keys := Secrets{User: [][]byte{userSecret}, Admin: [][]byte{adminSecret}}
	mint := func(secret []byte, role string) string {
		tok, err := authtoken.Mint(secret, 7, role, time.Hour)
		require.NoError(t, err)
		return tok
	}
	v, err := NewVerifier(keys, 16)
	require.NoError(t, err)
	now := time.Now()

	p, err := v.Verify(mint(adminSecret, authtoken.RoleAdmin), now)
	require.NoError(t, err)
	require.True(t, p.Admin)
	p, err = v.Verify(mint(userSecret, authtoken.RoleUser), now)
	require.NoError(t, err)
	require.False(t, p.Admin)

	// The user signer claiming admin, and the admin signer minting a user
	// token, are both refused.
	_, err = v.Verify(mint(userSecret, authtoken.RoleAdmin), now)
	require.ErrorIs(t, err, errBadToken)
	_, err = v.Verify(mint(adminSecret, authtoken.RoleUser), now)
	require.ErrorIs(t, err, errBadToken)
}

// routeCase is a token, the principal or error Verify gives it, and
// whether it is verified by the own keys alone (else through the cache).
type routeCase struct {
	raw  string
	want Principal // Expires not compared
	err  error
	own  bool
}

// routeCases are tokens of every signer, during a rotation of both own
// secrets, with every refusal.
func routeCases(t *testing.T, s Secrets, idp testProvider, dropped []byte) map[string]routeCase {
	mintAs := func(secret []byte, user int64, role string, ttl time.Duration) string {
		tok, err := authtoken.Mint(secret, user, role, ttl)
		require.NoError(t, err)
		return tok
	}
	// otherHeader signs HS256 with a header the own tokens are not minted
	// with: the own keys verify it, through the cache's way.
	otherHeader := func(secret []byte, role string) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "8", "exp": time.Now().Add(time.Hour).Unix(), "role": role})
		tok.Header["kid"] = "own"
		raw, err := tok.SignedString(secret)
		require.NoError(t, err)
		return raw
	}
	user, previousUser, admin, previousAdmin := s.User[0], s.User[1], s.Admin[0], s.Admin[1]
	return map[string]routeCase{
		"own user":                       {mintAs(user, 5, authtoken.RoleUser, time.Hour), Principal{UserID: 5}, nil, true},
		"own user without role":          {mintAs(user, 5, "", time.Hour), Principal{UserID: 5}, nil, true},
		"own user, previous secret":      {mintAs(previousUser, 6, authtoken.RoleUser, time.Hour), Principal{UserID: 6}, nil, true},
		"own admin":                      {mintAs(admin, 1, authtoken.RoleAdmin, time.Hour), Principal{UserID: 1, Admin: true, Subject: "secret:1"}, nil, true},
		"own admin, previous secret":     {mintAs(previousAdmin, 2, authtoken.RoleAdmin, time.Hour), Principal{UserID: 2, Admin: true, Subject: "secret:2"}, nil, true},
		"user signer claims admin":       {mintAs(user, 5, authtoken.RoleAdmin, time.Hour), Principal{}, errBadToken, true},
		"previous user signer, admin":    {mintAs(previousUser, 5, authtoken.RoleAdmin, time.Hour), Principal{}, errBadToken, true},
		"admin signer, user role":        {mintAs(admin, 5, authtoken.RoleUser, time.Hour), Principal{}, errBadToken, true},
		"admin signer, no role":          {mintAs(previousAdmin, 5, "", time.Hour), Principal{}, errBadToken, true},
		"dropped secret":                 {mintAs(dropped, 5, authtoken.RoleUser, time.Hour), Principal{}, errBadToken, true},
		"dropped secret, admin":          {mintAs(dropped, 1, authtoken.RoleAdmin, time.Hour), Principal{}, errBadToken, true},
		"own tampered":                   {tamper(mintAs(user, 5, "", time.Hour)), Principal{}, errBadToken, true},
		"own expired":                    {mintAs(user, 5, "", -time.Minute), Principal{}, errBadToken, true},
		"HS256, other header":            {otherHeader(user, "user"), Principal{UserID: 8}, nil, false},
		"HS256, other header, admin":     {otherHeader(user, "admin"), Principal{}, errBadToken, false},
		"HS256, other header, admin key": {otherHeader(admin, "admin"), Principal{UserID: 8, Admin: true, Subject: "secret:8"}, nil, false},
		"provider user":                  {idp.user(t, 9, time.Hour, nil), Principal{UserID: 9}, nil, false},
		"provider user, role admin":      {idp.user(t, 9, time.Hour, jwt.MapClaims{"role": "admin"}), Principal{}, errBadToken, false},
		"provider user, operators' role": {idp.user(t, 9, time.Hour, jwt.MapClaims{"groups": testOperatorsRole.Value}), Principal{}, errBadToken, false},
		"provider user, expired":         {idp.user(t, 9, -time.Minute, nil), Principal{}, errBadToken, false},
		"operator":                       {idp.operator(t, "alice", testOperatorsRole.Value), Principal{Admin: true, Subject: "alice"}, nil, false},
		"operator without the role":      {idp.operator(t, "bob", "staff"), Principal{}, ErrNotAdmin, false},
	}
}

// The own tokens, user and admin, are verified by the own keys each time
// and never remembered; the identity providers' verified tokens are
// remembered; every refusal holds on either way, and is never remembered.
func TestVerifierCachesOnlyProviderTokens(t *testing.T) {
	idp := newTestProvider(t)
	s := Secrets{
		User:  [][]byte{[]byte("user-secret-after-rotation"), []byte("user-secret-before-rotation")},
		Admin: [][]byte{[]byte("admin-secret-after-rotation"), []byte("admin-secret-before-rotation")},
		IdP:   idp.users, Operators: idp.operators,
	}
	// Room for every case in each shard: with one entry a shard (64 for
	// 64 shards) two remembered tokens of one shard would evict each other.
	v, counts := countedVerifier(t, s, 64*maxShards)
	for name, c := range routeCases(t, s, idp, []byte("user-secret-dropped-long-ago")) {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, c.own, hasOwnHeader(c.raw))
			held, own, check := v.cache.len(), counts.own.Load(), counts.check.Load()
			for range 3 {
				p, err := v.Verify(c.raw, time.Now())
				if c.err != nil {
					require.ErrorIs(t, err, c.err)
					require.Equal(t, Principal{}, p)
					continue
				}
				require.NoError(t, err)
				require.False(t, p.Expires.IsZero())
				p.Expires = time.Time{}
				require.Equal(t, c.want, p)
			}
			remembered := c.err == nil && !c.own
			switch {
			case c.own:
				require.Equal(t, own+3, counts.own.Load(), "verified each time")
				require.Equal(t, check, counts.check.Load())
			case remembered:
				require.Equal(t, check+1, counts.check.Load(), "verified once, then remembered")
			default:
				require.Equal(t, check+3, counts.check.Load(), "refused each time")
			}
			if remembered {
				held++
			}
			require.Equal(t, held, v.cache.len())
		})
	}
}
