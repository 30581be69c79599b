package redisgateway_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/redisgateway"
)

// candidates offers the waitlist's head a unit each, as the API does.
func (f *fixture) candidates(tb testing.TB, c *redisgateway.Client, skip map[int64]bool) []redisgateway.HandOverCandidate {
	tb.Helper()
	head, err := c.WaitlistHead(ctx(tb), f.saleID, 8)
	require.NoError(tb, err)
	out := make([]redisgateway.HandOverCandidate, len(head))
	for i, w := range head {
		req := domain.WaitlistRequestID(w.Joined)
		out[i] = redisgateway.HandOverCandidate{UserID: w.UserID, RequestID: req, Token: domain.DeriveToken([]byte("k"), f.saleID, w.UserID, req), Skip: skip[w.UserID]}
	}
	return out
}

func (f *fixture) position(tb testing.TB, c *redisgateway.Client, user int64) int64 {
	tb.Helper()
	pos, err := c.WaitlistPosition(ctx(tb), f.saleID, user)
	require.NoError(tb, err)
	return pos
}

// Once a sale sold out, a unit back in stock goes to the longest-waiting
// user as a Redis hold like a 202's (token held, buyer mark, inbox entry),
// never to an open reservation while anyone waits; a blacklisted waiter
// leaves without one; an empty waitlist puts units back on open sale.
func TestWaitlistTakesReturnedUnitsFirstInFirstOut(t *testing.T) {
	f := mustWarmSale(t, 2)
	c := redisgateway.NewClient(f.rdb)
	a, b := f.reserve(t, 1, "req-a"), f.reserve(t, 2, "req-b")
	require.Equal(t, redisgateway.OutcomeOK, a.Outcome)
	require.Equal(t, redisgateway.OutcomeOK, b.Outcome)
	for i, user := range []int64{3, 4, 3} {
		pos, _, err := c.JoinWaitlist(ctx(t), f.saleID, user)
		require.NoError(t, err)
		require.Equal(t, []int64{1, 2, 1}[i], pos, "joining again keeps the place")
	}
	_, _, err := c.JoinWaitlist(ctx(t), f.saleID, 1)
	require.ErrorIs(t, err, domain.ErrAlreadyHolds)

	released, err := f.scripts.Release(ctx(t), f.rdb, f.saleID, 1, a.Token, true, false)
	require.NoError(t, err)
	require.True(t, released)
	require.Equal(t, redisgateway.OutcomeSoldOut, f.reserve(t, 5, "req-e").Outcome, "the returned unit is the waitlist's")
	joined, err := c.WaitlistJoined(ctx(t), f.saleID, 3)
	require.NoError(t, err)
	later, err := c.WaitlistJoined(ctx(t), f.saleID, 4)
	require.NoError(t, err)
	require.Greater(t, later, joined, "join numbers grow")

	handed, _, err := c.HandOver(ctx(t), f.saleID, 1, f.candidates(t, c, nil))
	require.NoError(t, err)
	require.Len(t, handed, 1, "one unit, to the head")
	require.Equal(t, int64(3), handed[0].UserID)
	require.Equal(t, domain.WaitlistRequestID(joined), handed[0].RequestID)
	state, err := f.rdb.HGet(ctx(t), f.keys.Tokens, handed[0].Token).Result()
	require.NoError(t, err)
	require.Equal(t, "held:3", state)
	isBuyer, err := f.rdb.SIsMember(ctx(t), f.keys.Buyers, "3").Result()
	require.NoError(t, err)
	require.True(t, isBuyer)
	entries, err := f.rdb.XRange(ctx(t), f.keys.Inbox, "-", "+").Result()
	require.NoError(t, err)
	require.Equal(t, handed[0].Token, redisgateway.ParseInboxEntry(entries[len(entries)-1]).Token, "the relay starts it like any hold")
	require.Zero(t, f.position(t, c, 3), "served: off the waitlist")
	require.Equal(t, int64(1), f.position(t, c, 4))

	again, _, err := c.HandOver(ctx(t), f.saleID, 1, f.candidates(t, c, nil))
	require.NoError(t, err)
	require.Empty(t, again, "no stock, nothing more")

	_, err = f.scripts.Release(ctx(t), f.rdb, f.saleID, 2, b.Token, true, false)
	require.NoError(t, err)
	handed, left, err := c.HandOver(ctx(t), f.saleID, 1, f.candidates(t, c, map[int64]bool{4: true}))
	require.NoError(t, err)
	require.Empty(t, handed, "a blacklisted waiter gets nothing")
	require.Len(t, left, 1, "and is reported as left, so the caller forgets the join")
	require.Equal(t, int64(4), left[0].UserID)
	require.Equal(t, domain.WaitlistRequestID(later), left[0].RequestID)
	require.Zero(t, f.position(t, c, 4), "and leaves")
	require.Equal(t, redisgateway.OutcomeOK, f.reserve(t, 5, "req-e2").Outcome, "nobody waits: the unit is on open sale")
}

// Before the sale first sold out, the waitlist takes nothing: every unit
// sells openly (through the challenge and the lottery), and a waiter who
// bought meanwhile leaves the waitlist without a second unit.
func TestWaitlistWaitsForTheSaleToSellOut(t *testing.T) {
	f := mustWarmSale(t, 2)
	c := redisgateway.NewClient(f.rdb)
	_, _, err := c.JoinWaitlist(ctx(t), f.saleID, 3)
	require.NoError(t, err)
	_, _, err = c.JoinWaitlist(ctx(t), f.saleID, 4)
	require.NoError(t, err)
	handed, _, err := c.HandOver(ctx(t), f.saleID, 1, f.candidates(t, c, nil))
	require.NoError(t, err)
	require.Empty(t, handed, "not sold out yet")
	require.Equal(t, redisgateway.OutcomeOK, f.reserve(t, 3, "req-c").Outcome, "open sale while units were never sold")
	a := f.reserve(t, 1, "req-a")
	require.Equal(t, redisgateway.OutcomeOK, a.Outcome)
	_, err = f.scripts.Release(ctx(t), f.rdb, f.saleID, 1, a.Token, true, false)
	require.NoError(t, err)
	handed, left, err := c.HandOver(ctx(t), f.saleID, 1, f.candidates(t, c, nil))
	require.NoError(t, err)
	require.Len(t, handed, 1)
	require.Equal(t, int64(4), handed[0].UserID, "the waiter who bought meanwhile is skipped")
	require.Len(t, left, 1, "and reported as left")
	require.Equal(t, int64(3), left[0].UserID)
	require.Zero(t, f.position(t, c, 3))
}

// A join reports its number; the joins a Redis forgot are found missing
// and come back at their places (a user who is there already, or who holds
// a unit, is left as is), and a join after them comes after them.
func TestForgottenJoinsComeBackAtTheirPlaces(t *testing.T) {
	f := mustWarmSale(t, 1)
	c := redisgateway.NewClient(f.rdb)
	require.Equal(t, redisgateway.OutcomeOK, f.reserve(t, 1, "req-a").Outcome)
	var kept []redisgateway.Waiter
	for _, user := range []int64{2, 3, 4} {
		_, joined, err := c.JoinWaitlist(ctx(t), f.saleID, user)
		require.NoError(t, err)
		got, err := c.WaitlistJoined(ctx(t), f.saleID, user)
		require.NoError(t, err)
		require.Equal(t, got, joined, "the join reports its number")
		kept = append(kept, redisgateway.Waiter{UserID: user, Joined: joined})
	}
	// Redis forgets the waitlist (the last join number stays: the script
	// raises it past the restored ones either way).
	require.NoError(t, f.rdb.Del(ctx(t), redisgateway.SaleKeys(f.saleID).Waitlist, redisgateway.SaleKeys(f.saleID).WaitSeq).Err())
	_, _, err := c.JoinWaitlist(ctx(t), f.saleID, 3) // user 3 joined again meanwhile
	require.NoError(t, err)
	missing, err := c.WaitlistMissing(ctx(t), f.saleID, kept)
	require.NoError(t, err)
	require.Equal(t, []redisgateway.Waiter{kept[0], kept[2]}, missing, "users 2 and 4; 3 is there under a new number")
	n, err := c.RestoreWaitlist(ctx(t), f.saleID, append(kept, redisgateway.Waiter{UserID: 1, Joined: 1}))
	require.NoError(t, err)
	require.EqualValues(t, 2, n, "users 2 and 4; 3 is there, 1 holds a unit")
	for i, user := range []int64{2, 4, 3} {
		require.EqualValues(t, i+1, f.position(t, c, user))
	}
	pos, joined, err := c.JoinWaitlist(ctx(t), f.saleID, 5)
	require.NoError(t, err)
	require.EqualValues(t, 4, pos)
	require.Greater(t, joined, kept[2].Joined)
}

// A live reservation's replay key that Redis forgot is put back: a repeat
// of its request gets its token again; a field that is there is kept.
func TestAForgottenReplayKeyComesBack(t *testing.T) {
	f := mustWarmSale(t, 2)
	c := redisgateway.NewClient(f.rdb)
	first := f.reserve(t, 1, "req-first")
	require.Equal(t, redisgateway.OutcomeOK, first.Outcome)
	k := redisgateway.SaleKeys(f.saleID)
	require.NoError(t, f.rdb.HDel(ctx(t), k.Requests, redisgateway.RequestField(1, "req-first"), "t:"+first.Token).Err())
	restored, err := c.RestoreReplay(ctx(t), f.saleID, 1, "req-first", first.Token)
	require.NoError(t, err)
	require.True(t, restored)
	again := f.reserve(t, 1, "req-first")
	require.Equal(t, redisgateway.OutcomeReplay, again.Outcome)
	require.Equal(t, first.Token, again.Token)
	restored, err = c.RestoreReplay(ctx(t), f.saleID, 1, "req-first", "another-token")
	require.NoError(t, err)
	require.False(t, restored, "a request names one token for ever")
}
