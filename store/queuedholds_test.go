package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

// The QUEUED Redis holds recorded since a time are read in pages by token,
// from the sale's QUEUED rows alone (its placed and ended reservations and
// older holds are not read), by the (sale, status) index.
func TestQueuedRedisHoldsSinceATime(t *testing.T) {
	st := testenv.MustStore(t)
	sale := testenv.MustSale(t, st, 10)
	other := testenv.MustSale(t, st, 10)
	base := testenv.UniqueUser() * 1000
	var want []string
	for i := range 5 {
		in := redisHold(sale, base+int64(i), fmt.Sprintf("queued-%04d", i))
		counted, err := recordHold(t, st, in, sale.ModeEpoch)
		require.NoError(t, err)
		require.True(t, counted)
		want = append(want, in.Token)
	}
	old := redisHold(sale, base+5, "queued-old")
	placed := redisHold(sale, base+6, "queued-placed")
	elsewhere := redisHold(other, base+7, "queued-other")
	for _, in := range []domain.OrderInput{old, placed} {
		counted, err := recordHold(t, st, in, sale.ModeEpoch)
		require.NoError(t, err)
		require.True(t, counted)
	}
	counted, err := recordHold(t, st, elsewhere, other.ModeEpoch)
	require.NoError(t, err)
	require.True(t, counted)
	_, err = st.DB.ExecContext(ctx(t), "UPDATE reservations SET created_at = created_at - INTERVAL 10 MINUTE WHERE token = ?", old.Token)
	require.NoError(t, err)
	_, err = st.DB.ExecContext(ctx(t), "UPDATE reservations SET status = ? WHERE token = ?", string(domain.StatusPendingPayment), placed.Token)
	require.NoError(t, err)

	since := time.Now().Add(-time.Minute)
	var got []string
	after := ""
	for page := 0; ; page++ {
		require.Less(t, page, 5, "pages of two end")
		holds, err := st.QueuedRedisHolds(ctx(t), sale.ID, since, -time.Minute, after, 2)
		require.NoError(t, err)
		for _, in := range holds {
			require.Equal(t, domain.PathRedis, in.Path)
			require.Equal(t, sale.ID, in.SaleID)
			got = append(got, in.Token)
		}
		if len(holds) < 2 {
			break
		}
		after = holds[len(holds)-1].Token
	}
	require.ElementsMatch(t, want, got, "the sale's QUEUED holds since the time, each once")
	require.IsIncreasing(t, got, "in token order")

	plan := explain(t, st, st.QueuedRedisHoldsStatement(sale.ID, since, 0, "", 1000))
	require.Equal(t, "reservations_sale_status", plan["key"], "the (sale, status) index: %v", plan)
	require.Equal(t, "const,const", plan["ref"], "the sale's QUEUED rows only: %v", plan)
}

// The holds' upper bound is on the database's clock: a hold recorded less
// than untilAgo before its now is not read, one recorded earlier is.
func TestQueuedRedisHoldsUntilABoundBeforeTheDatabasesNow(t *testing.T) {
	st := testenv.MustStore(t)
	sale := testenv.MustSale(t, st, 10)
	base := testenv.UniqueUser() * 1000
	early := redisHold(sale, base, "until-early")
	late := redisHold(sale, base+1, "until-late")
	for _, in := range []domain.OrderInput{early, late} {
		counted, err := recordHold(t, st, in, sale.ModeEpoch)
		require.NoError(t, err)
		require.True(t, counted)
	}
	_, err := st.DB.ExecContext(ctx(t), "UPDATE reservations SET created_at = created_at - INTERVAL 30 SECOND WHERE token = ?", early.Token)
	require.NoError(t, err)

	holds, err := st.QueuedRedisHolds(ctx(t), sale.ID, time.Now().Add(-time.Minute), 10*time.Second, "", 10)
	require.NoError(t, err)
	require.Len(t, holds, 1, "only the hold recorded at least 10 s before the database's now")
	require.Equal(t, early.Token, holds[0].Token)
	holds, err = st.QueuedRedisHolds(ctx(t), sale.ID, time.Now().Add(-time.Minute), -time.Second, "", 10)
	require.NoError(t, err)
	require.Len(t, holds, 2, "a bound after the database's now reads both")
}
