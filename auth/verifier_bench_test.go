package auth

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/authtoken"
	"github.com/seckill/seckill/internal/testkit/proc"
)

// benchTokens are a verifier's secrets, with an identity provider signing
// RS256, and tokens of each kind.
type benchTokens struct {
	secrets  Secrets
	own      []string // distinct users' own HS256 tokens
	admin    string   // an own admin token
	tampered string   // an own token with a changed signature
	idp      []string // distinct users' identity-provider tokens
}

func newBenchTokens(b *testing.B, own, idp int) *benchTokens {
	userSecret, adminSecret := []byte("bench-secret-of-thirty-two-bytes"), []byte("bench-admin-secret-of-32-bytes..")
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(b, err)
	key := testKey{"rsa-1", jwt.SigningMethodRS256, rsaKey}
	srv := serveJWKS(b, []testKey{key})
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	provider, err := NewIdentityProvider(ctx, srv.URL, "https://idp.example", "seckill", IdentityClaims{User: "sub", Role: "role"}, 5*time.Second)
	require.NoError(b, err)
	admin, err := authtoken.Mint(adminSecret, 1, authtoken.RoleAdmin, time.Hour)
	require.NoError(b, err)
	t := &benchTokens{
		secrets: Secrets{User: [][]byte{userSecret}, Admin: [][]byte{adminSecret}, IdP: provider},
		own:     make([]string, own),
		admin:   admin,
		idp:     make([]string, idp),
	}
	for i := range t.own {
		t.own[i] = mint(b, userSecret, int64(i+1)<<20, time.Hour)
	}
	t.tampered = tamper(t.own[0])
	exp := time.Now().Add(time.Hour).Unix()
	for i := range t.idp {
		t.idp[i] = key.sign(b, jwt.MapClaims{"sub": strconv.FormatInt(int64(i+1)<<21, 10), "exp": exp, "iss": "https://idp.example", "aud": "seckill"})
	}
	return t
}

// BenchmarkVerifier times Verifier.Verify on each kind of token and on a
// crowd mixing them, with the cache each case is about:
//
//   - own/*: the project's own tokens, one user repeating, an admin
//     repeating, distinct users cycled through a cache of a sixteenth of
//     them (each evicted long before it comes round), a tampered token;
//   - idp/hit, idp/miss: an identity provider's RS256 tokens, one
//     repeating, and distinct ones cycled through a cache too small to
//     keep any;
//   - crowd: seven requests in eight from own tokens of users each seen
//     once in a cycle four times the cache, one in eight from 64 provider
//     users repeating.
//
// cpu-ns/op, the process's CPU time per call, is the steadier figure on a
// machine shared with other work, which stretches ns/op but not CPU time.
func BenchmarkVerifier(b *testing.B) {
	t := newBenchTokens(b, 1<<14, 1<<9)
	const crowdIdP = 64
	crowd := func(i int) string {
		if i%8 == 7 {
			return t.idp[(i/8)%crowdIdP]
		}
		return t.own[i%len(t.own)]
	}
	for _, bc := range []struct {
		name  string
		cache int
		raw   func(i int) string
		ok    bool
	}{
		{"own/repeated", 1 << 17, func(int) string { return t.own[0] }, true},
		{"own/admin", 1 << 17, func(int) string { return t.admin }, true},
		{"own/distinct", len(t.own) / 16, func(i int) string { return t.own[i%len(t.own)] }, true},
		{"own/tampered", 1 << 17, func(int) string { return t.tampered }, false},
		{"idp/hit", 1 << 17, func(int) string { return t.idp[0] }, true},
		{"idp/miss", len(t.idp) / 16, func(i int) string { return t.idp[i%len(t.idp)] }, true},
		{"crowd", len(t.own) / 4, crowd, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			v, err := NewVerifier(t.secrets, bc.cache)
			require.NoError(b, err)
			now := time.Now()
			i := 0
			b.ReportAllocs()
			cpu0 := processCPU(b)
			for b.Loop() {
				if _, err := v.Verify(bc.raw(i), now); (err == nil) != bc.ok {
					b.Fatalf("token %d: %v", i, err)
				}
				i++
			}
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// processCPU is the CPU time the process has used.
func processCPU(b *testing.B) time.Duration {
	cpu, err := proc.SelfCPU()
	if err != nil {
		b.Fatal(err)
	}
	return cpu
}

// BenchmarkVerifierBurst verifies distinct users' own tokens from 256
// goroutines, as a burst's first requests do.
func BenchmarkVerifierBurst(b *testing.B) {
	secret := []byte("bench-secret-of-thirty-two-bytes")
	toks := make([]string, 4096)
	for i := range toks {
		toks[i] = mint(b, secret, int64(i+1), time.Hour)
	}
	v, err := NewVerifier(Secrets{User: [][]byte{secret}}, len(toks)/4)
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	var next atomic.Int64
	b.SetParallelism(128)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1)
			if _, err := v.Verify(toks[i%int64(len(toks))], now); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
