package store_test

import (
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/store"
)

func hashOf(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

// A key is owned once; repeats see it in flight, then its answer; another
// body is refused; a claim left in flight past staleAfter is taken over;
// the sweep deletes keys older than its cutoff.
func TestClaimKey(t *testing.T) {
	st := testenv.MustStore(t)
	scope := hashOf(fmt.Sprintf("claim-%d", testenv.UniqueUser()))
	body := hashOf("body")

	c, err := st.ClaimKey(ctx(t), scope, body, time.Hour)
	require.NoError(t, err)
	require.Equal(t, store.KeyClaim{Owned: true}, c)
	c, err = st.ClaimKey(ctx(t), scope, body, time.Hour)
	require.NoError(t, err)
	require.Equal(t, store.KeyClaim{}, c, "in flight")
	c, err = st.ClaimKey(ctx(t), scope, hashOf("other"), time.Hour)
	require.NoError(t, err)
	require.True(t, c.Reused)

	c, err = st.ClaimKey(ctx(t), scope, body, 0)
	require.NoError(t, err)
	require.True(t, c.Owned, "a stale claim is taken over")

	require.NoError(t, st.FinishKey(ctx(t), scope, 201, []byte(`{"ok":true}`)))
	c, err = st.ClaimKey(ctx(t), scope, body, 0)
	require.NoError(t, err)
	require.Equal(t, store.KeyClaim{Status: 201, Response: []byte(`{"ok":true}`)}, c)

	// Only this key is old enough for the sweep (others' tests share the table).
	_, err = st.DB.ExecContext(ctx(t), "UPDATE idempotency_keys SET created_at = ? WHERE scope = ?", time.Now().Add(-30*time.Hour).UTC(), scope)
	require.NoError(t, err)
	n, err := st.SweepKeys(ctx(t), time.Now().Add(-store.KeyKeep), 1_000_000)
	require.NoError(t, err)
	require.GreaterOrEqual(t, n, int64(1))
	c, err = st.ClaimKey(ctx(t), scope, hashOf("other"), time.Hour)
	require.NoError(t, err)
	require.True(t, c.Owned, "swept: the key is free again")
	require.NoError(t, st.ReleaseKey(ctx(t), scope))
	c, err = st.ClaimKey(ctx(t), scope, body, time.Hour)
	require.NoError(t, err)
	require.True(t, c.Owned, "released: the key is free again")
}
