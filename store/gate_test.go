package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testkit/testenv"
)

// A challenge is redeemed once; the sweep forgets it once it expired.
func TestRedeemChallengeOnceThenSweep(t *testing.T) {
	st := testenv.MustStore(t)
	ch := fmt.Sprintf("%064d", testenv.UniqueUser())
	expires := time.Now().Add(-time.Second)

	fresh, err := st.RedeemChallenge(ctx(t), ch, expires)
	require.NoError(t, err)
	require.True(t, fresh)
	fresh, err = st.RedeemChallenge(ctx(t), ch, expires)
	require.NoError(t, err)
	require.False(t, fresh, "redeemed before")

	n, err := st.SweepRedemptions(ctx(t), time.Now(), 1_000_000)
	require.NoError(t, err)
	require.GreaterOrEqual(t, n, int64(1))
	fresh, err = st.RedeemChallenge(ctx(t), ch, time.Now().Add(time.Minute))
	require.NoError(t, err)
	require.True(t, fresh, "swept once expired")
}
