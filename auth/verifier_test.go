package auth

import (
	"testing"
	"time"

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
