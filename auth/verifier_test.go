package auth

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/authtoken"
)

func TestVerifierCachesOnlyWhatVerified(t *testing.T) {
	secret := []byte("cache-test-secret")
	tok, err := authtoken.Mint(secret, 42, authtoken.RoleUser, time.Hour)
	require.NoError(t, err)
	v := NewVerifier(Secrets{User: [][]byte{secret}}, 2)
	now := time.Now()

	p, err := v.Verify(tok, now)
	require.NoError(t, err)
	require.EqualValues(t, 42, p.UserID)
	p, err = v.Verify(tok, now)
	require.NoError(t, err, "served from the cache")
	require.EqualValues(t, 42, p.UserID)

	// Past its exp the cached token is refused.
	_, err = v.Verify(tok, now.Add(2*time.Hour))
	require.ErrorIs(t, err, errBadToken)

	// A token that differs in one byte of its signature is verified anew.
	// Not the last character: its low bits are base64 padding, which a
	// lenient decoder ignores, so changing them may leave the signature.
	i := len(tok) - 5
	c := byte('A')
	if tok[i] == 'A' {
		c = 'B'
	}
	tampered := tok[:i] + string(c) + tok[i+1:]
	_, err = v.Verify(tampered, now)
	require.ErrorIs(t, err, errBadToken)

	// The bound holds: a full cache starts over.
	for i := int64(1); i <= 5; i++ {
		other, err := authtoken.Mint(secret, i, authtoken.RoleUser, time.Hour)
		require.NoError(t, err)
		_, err = v.Verify(other, now)
		require.NoError(t, err)
		require.LessOrEqual(t, cachedTokens(v), 2)
	}
}

func cachedTokens(v *Verifier) int {
	n := 0
	v.entries.Range(func(any, any) bool { n++; return true })
	return n
}

// BenchmarkVerifierBurst verifies distinct users' tokens from 256
// goroutines, as a burst's first requests do: every one misses and writes.
// Compare its ns/op across commits (the ratio is the figure, not the time).
func BenchmarkVerifierBurst(b *testing.B) {
	secret := []byte("bench-secret")
	toks := make([]string, 4096)
	for i := range toks {
		tok, err := authtoken.Mint(secret, int64(i+1), authtoken.RoleUser, time.Hour)
		require.NoError(b, err)
		toks[i] = tok
	}
	// Smaller than the token set: the bound keeps clearing it, so most
	// calls miss, as distinct users do.
	v := NewVerifier(Secrets{User: [][]byte{secret}}, len(toks)/4)
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

func TestAdminTokensComeOnlyFromTheAdminSigner(t *testing.T) {
	userSecret, adminSecret := []byte("user-signer-secret"), []byte("admin-signer-secret")
	keys := Secrets{User: [][]byte{userSecret}, Admin: [][]byte{adminSecret}}
	mint := func(secret []byte, role string) string {
		tok, err := authtoken.Mint(secret, 7, role, time.Hour)
		require.NoError(t, err)
		return tok
	}
	v := NewVerifier(keys, 16)
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
