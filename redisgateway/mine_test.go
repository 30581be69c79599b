package redisgateway_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/redisgateway"
)

func tokensOf(u redisgateway.UserReservations) []string {
	out := make([]string, len(u.Tokens))
	for i, t := range u.Tokens {
		out[i] = t.Token
	}
	return out
}

// TestUserIndex: the reserve script lists each hold under its user, in hold
// order (a replay adds nothing), and the read returns each token with its
// hold state and status record; the index is complete only for the epoch
// warm-up started it in, in Redis mode, while every hold was indexed (not
// after a hold by an older reserve script, nor once the index was lost),
// and it is one of the sale's keys.
func TestUserIndex(t *testing.T) {
	f := mustWarmSale(t, 5)
	c := ctx(t)
	got, err := f.scripts.ReadUserReservations(c, f.rdb, f.saleID, 7)
	require.NoError(t, err)
	require.True(t, got.Complete, "a warmed sale without reservations is listed")
	require.Empty(t, got.Tokens)

	first := f.reserve(t, 7, "req-1")
	require.Equal(t, redisgateway.OutcomeOK, first.Outcome)
	require.Equal(t, redisgateway.OutcomeReplay, f.reserve(t, 7, "req-1").Outcome)
	require.Equal(t, redisgateway.OutcomeOK, f.reserve(t, 8, "req-1").Outcome)
	_, err = f.scripts.Release(c, f.rdb, f.saleID, 7, first.Token, true, false)
	require.NoError(t, err)
	second := f.reserve(t, 7, "req-2")
	require.Equal(t, redisgateway.OutcomeOK, second.Outcome)
	rec := redisgateway.StatusRecord{Seq: 3, UserID: 7, Status: "CANCELLED", AmountCents: 100}
	_, err = f.scripts.WriteStatus(c, f.rdb, f.saleID, first.Token, rec)
	require.NoError(t, err)

	got, err = f.scripts.ReadUserReservations(c, f.rdb, f.saleID, 7)
	require.NoError(t, err)
	require.True(t, got.Complete)
	require.Equal(t, []string{first.Token, second.Token}, tokensOf(got), "hold order, the replay not twice")
	// Several users in one call: each answer is that user's read.
	many, err := f.scripts.ReadUsersReservations(c, f.rdb, f.saleID, []int64{8, 9, 7})
	require.NoError(t, err)
	require.Len(t, many, 3)
	eight, err := f.scripts.ReadUserReservations(c, f.rdb, f.saleID, 8)
	require.NoError(t, err)
	require.Len(t, eight.Tokens, 1)
	require.Equal(t, eight, many[0])
	require.Equal(t, redisgateway.UserReservations{Complete: true}, many[1], "a user without reservations")
	require.Equal(t, got, many[2])
	require.Equal(t, domain.TokenReleased, got.Tokens[0].TokenState)
	require.NotNil(t, got.Tokens[0].Record)
	require.Equal(t, "CANCELLED", got.Tokens[0].Record.Status)
	require.Equal(t, domain.TokenHeld, got.Tokens[1].TokenState)
	require.Equal(t, int64(7), got.Tokens[1].Owner)
	require.Nil(t, got.Tokens[1].Record)

	requireIncompleteWhenTheIndexCannotTell(t, f)
}

// requireIncompleteWhenTheIndexCannotTell: user 7's read is incomplete
// after a hold by an older reserve script, in database mode, in a new
// epoch, once the index was lost and once the sale is torn down; complete
// again once each is undone.
func requireIncompleteWhenTheIndexCannotTell(t *testing.T, f *fixture) {
	c := ctx(t)
	// A hold taken by an older release's reserve script, which counts it
	// in the reserved counter but does not index it.
	require.NoError(t, f.rdb.Incr(c, f.keys.Reserved).Err())
	got, err := f.scripts.ReadUserReservations(c, f.rdb, f.saleID, 7)
	require.NoError(t, err)
	require.False(t, got.Complete, "a hold the index missed")
	require.NoError(t, f.rdb.Decr(c, f.keys.Reserved).Err())

	for name, edit := range map[string][2]string{
		"database mode": {"mode", string(domain.ModeDatabase)},
		"a new epoch":   {"epoch", "2"},
	} {
		old, err := f.rdb.HGet(c, f.keys.Meta, edit[0]).Result()
		require.NoError(t, err)
		require.NoError(t, f.rdb.HSet(c, f.keys.Meta, edit[0], edit[1]).Err())
		got, err = f.scripts.ReadUserReservations(c, f.rdb, f.saleID, 7)
		require.NoError(t, err)
		require.False(t, got.Complete, name)
		require.NoError(t, f.rdb.HSet(c, f.keys.Meta, edit[0], old).Err())
	}
	got, err = f.scripts.ReadUserReservations(c, f.rdb, f.saleID, 7)
	require.NoError(t, err)
	require.True(t, got.Complete)

	index, err := f.rdb.HGetAll(c, f.keys.Mine).Result()
	require.NoError(t, err)
	require.NoError(t, f.rdb.Del(c, f.keys.Mine).Err())
	f.reserve(t, 10, "req-1")
	got, err = f.scripts.ReadUserReservations(c, f.rdb, f.saleID, 7)
	require.NoError(t, err)
	require.False(t, got.Complete, "the index lost (and a hold indexed since)")
	require.NoError(t, f.rdb.HSet(c, f.keys.Mine, index).Err())
	require.NoError(t, f.rdb.Decr(c, f.keys.Reserved).Err())
	got, err = f.scripts.ReadUserReservations(c, f.rdb, f.saleID, 7)
	require.NoError(t, err)
	require.True(t, got.Complete)

	require.Contains(t, f.keys.All(), f.keys.Mine)
	require.NoError(t, f.rdb.Del(c, f.keys.All()...).Err())
	got, err = f.scripts.ReadUserReservations(c, f.rdb, f.saleID, 7)
	require.NoError(t, err)
	require.False(t, got.Complete, "a torn-down sale")
}

// TestUserIndexNotStartedOnALiveSale: warm-up of a sale that already has
// live orders (or in database mode) does not start the index, so reads go
// to the database.
func TestUserIndexNotStartedOnALiveSale(t *testing.T) {
	for name, edit := range map[string]func(*redisgateway.WarmupArgs){
		"live orders":   func(a *redisgateway.WarmupArgs) { a.Buyers = []int64{3} },
		"database mode": func(a *redisgateway.WarmupArgs) { a.Mode = string(domain.ModeDatabase) },
	} {
		f := mustWarmSale(t, 5, edit)
		got, err := f.scripts.ReadUserReservations(ctx(t), f.rdb, f.saleID, 3)
		require.NoError(t, err)
		require.False(t, got.Complete, name)
	}
}

// TestUserIndexBound: a user cycling reserve -> release (a cancel or an
// expiry) keeps at most MineCap tokens in the index, then is marked and
// read from the database (incomplete), while other users stay listed and
// every hold is still counted, so the sale's index stays complete.
func TestUserIndexBound(t *testing.T) {
	f := mustWarmSale(t, 5)
	c := ctx(t)
	other := f.reserve(t, 8, "req-other")
	require.Equal(t, redisgateway.OutcomeOK, other.Outcome)
	maxLen := int64(0)
	for i := range 3 * redisgateway.MineCap {
		r := f.reserve(t, 7, fmt.Sprintf("req-%d", i))
		require.Equal(t, redisgateway.OutcomeOK, r.Outcome)
		released, err := f.scripts.Release(c, f.rdb, f.saleID, 7, r.Token, true, false)
		require.NoError(t, err)
		require.True(t, released)
		n, err := f.rdb.HStrLen(c, f.keys.Mine, "7").Result()
		require.NoError(t, err)
		maxLen = max(maxLen, n)
		got, err := f.scripts.ReadUserReservations(c, f.rdb, f.saleID, 7)
		require.NoError(t, err)
		if i < redisgateway.MineCap {
			require.True(t, got.Complete, "hold %d is within the cap", i+1)
			require.Len(t, got.Tokens, i+1)
		} else {
			require.False(t, got.Complete, "hold %d is past the cap: the database lists the user", i+1)
			require.Empty(t, got.Tokens)
		}
	}
	require.LessOrEqual(t, maxLen, int64(redisgateway.MineCap*(len(other.Token)+1)), "the user's entry stays within the cap")
	v, err := f.rdb.HGet(c, f.keys.Mine, "7").Result()
	require.NoError(t, err)
	require.Equal(t, "*", v)
	holds, err := f.rdb.HGet(c, f.keys.Mine, "_holds").Int64()
	require.NoError(t, err)
	require.Equal(t, int64(1+3*redisgateway.MineCap), holds, "every hold counted")
	eight, err := f.scripts.ReadUserReservations(c, f.rdb, f.saleID, 8)
	require.NoError(t, err)
	require.True(t, eight.Complete, "another user is still listed")
	require.Equal(t, []string{other.Token}, tokensOf(eight))
	// A replay past the cap still gets its token and changes nothing.
	require.Equal(t, redisgateway.OutcomeReplay, f.reserve(t, 7, "req-0").Outcome)
	v2, err := f.rdb.HGet(c, f.keys.Mine, "7").Result()
	require.NoError(t, err)
	require.Equal(t, "*", v2)
}
