package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/store"
	"github.com/seckill/seckill/test/testsale"
)

// The joins of a sale made since a join number, in join order, without
// those a hand-over served (a reservation names the join's number).
func TestWaitlistJoinsSinceANumber(t *testing.T) {
	st := testenv.MustStore(t)
	sale := testenv.MustSale(t, st, 5)
	c := ctx(t)
	older, served, newer := testenv.UniqueUser(), testenv.UniqueUser(), testenv.UniqueUser()
	for _, j := range []store.WaitJoin{{UserID: newer, Joined: 300}, {UserID: older, Joined: 100}, {UserID: served, Joined: 200}} {
		require.NoError(t, testsale.ErrOf(st.RecordWaitlistJoin(c, sale.ID, j)))
	}
	req := domain.WaitlistRequestID(200)
	in := domain.RedisHoldInput(domain.DeriveToken([]byte("k"), sale.ID, served, req), sale.ID, served, req)
	rec, err := st.RecordRedisHold(c, in, sale.ModeEpoch, 1, true)
	require.NoError(t, err)
	require.True(t, rec.Promised())

	all, err := st.WaitingJoins(c, sale.ID)
	require.NoError(t, err)
	require.Equal(t, []store.WaitJoin{{UserID: older, Joined: 100}, {UserID: newer, Joined: 300}}, all)
	since, err := st.WaitingJoinsSince(c, sale.ID, 150)
	require.NoError(t, err)
	require.Equal(t, []store.WaitJoin{{UserID: newer, Joined: 300}}, since)
	none, err := st.WaitingJoinsSince(c, sale.ID, 301)
	require.NoError(t, err)
	require.Empty(t, none)
}
