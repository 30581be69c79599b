package api

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/authtoken"
)

func TestVerifiedTokensCacheOnlyWhatVerified(t *testing.T) {
	secret := []byte("cache-test-secret")
	tok, err := authtoken.Mint(secret, 42, authtoken.RoleUser, time.Hour)
	require.NoError(t, err)
	v := newVerifiedTokens(2)
	now := time.Now()

	p, err := v.verify([][]byte{secret}, tok, now)
	require.NoError(t, err)
	require.EqualValues(t, 42, p.UserID)
	p, err = v.verify([][]byte{secret}, tok, now)
	require.NoError(t, err, "served from the cache")
	require.EqualValues(t, 42, p.UserID)

	// Past its exp the cached token is refused.
	_, err = v.verify([][]byte{secret}, tok, now.Add(2*time.Hour))
	require.ErrorIs(t, err, errBadToken)

	// A token that differs in one byte of its signature is verified anew.
	last := "A"
	if tok[len(tok)-1] == 'A' {
		last = "B"
	}
	tampered := tok[:len(tok)-1] + last
	_, err = v.verify([][]byte{secret}, tampered, now)
	require.ErrorIs(t, err, errBadToken)

	// The bound holds: a full cache starts over.
	for i := int64(1); i <= 5; i++ {
		other, err := authtoken.Mint(secret, i, authtoken.RoleUser, time.Hour)
		require.NoError(t, err)
		_, err = v.verify([][]byte{secret}, other, now)
		require.NoError(t, err)
		require.LessOrEqual(t, len(v.entries), 2)
	}
}
