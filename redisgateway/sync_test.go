package redisgateway_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/redisgateway"
)

// The sync scripts are the step and then the status record, in one call:
// the token's state, the fence, the journal, the stock and the buyer mark
// move as Advance and Release move them, and the record is written (only
// forward) and announced.
func TestSyncScriptsAreTheStepThenTheStatusRecord(t *testing.T) {
	f := mustWarmSale(t, 2)
	c := ctx(t)
	client := redisgateway.NewClient(f.rdb)
	a := f.reserve(t, 1, "request-01")
	b := f.reserve(t, 2, "request-02")
	sub := f.rdb.Subscribe(c, redisgateway.EventChannel(f.saleID))
	defer sub.Close()
	_, err := sub.Receive(c) // the subscription's confirmation
	require.NoError(t, err)
	requireRecord := func(token, state, status string, user int64) {
		t.Helper()
		msg, err := sub.ReceiveMessage(c)
		require.NoError(t, err)
		require.Equal(t, token, msg.Payload, "the record's change is announced")
		got, err := client.ReadStatus(c, f.saleID, token)
		require.NoError(t, err)
		require.Equal(t, state, got.TokenState)
		require.NotNil(t, got.Record)
		require.Equal(t, status, got.Record.Status)
		require.Equal(t, user, got.Record.UserID)
	}
	ordered := redisgateway.StatusRecord{Seq: 2, UserID: 1, Status: "PENDING_PAYMENT", OrderNo: "o-1", AmountCents: 500}
	moved, err := client.AdvanceWithStatus(c, f.saleID, a.Token, ordered, domain.TokenOrdered, domain.TokenHeld)
	require.NoError(t, err)
	require.True(t, moved)
	requireRecord(a.Token, domain.TokenOrdered, "PENDING_PAYMENT", 1)
	require.Equal(t, "1", f.rdb.Get(c, f.keys.Fence).Val(), "the step bumps the fence")
	require.EqualValues(t, 1, f.rdb.LLen(c, f.keys.Journal).Val(), "and is journalled")

	paid := ordered
	paid.Seq, paid.Status = 3, "PAID"
	moved, err = client.AdvanceWithStatus(c, f.saleID, a.Token, paid, domain.TokenPaid, domain.TokenHeld, domain.TokenOrdered)
	require.NoError(t, err)
	require.True(t, moved)
	requireRecord(a.Token, domain.TokenPaid, "PAID", 1)
	moved, err = client.AdvanceWithStatus(c, f.saleID, a.Token, ordered, domain.TokenOrdered, domain.TokenHeld)
	require.NoError(t, err)
	require.False(t, moved, "a late step moves nothing")
	got, err := client.ReadStatus(c, f.saleID, a.Token)
	require.NoError(t, err)
	require.Equal(t, "PAID", got.Record.Status, "nor the record")

	cancelled := redisgateway.StatusRecord{Seq: 3, UserID: 2, Status: "CANCELLED"}
	released, err := client.ReleaseWithStatus(c, f.saleID, 2, b.Token, true, false, cancelled)
	require.NoError(t, err)
	require.True(t, released)
	requireRecord(b.Token, domain.TokenReleased, "CANCELLED", 2)
	require.Equal(t, "1", f.rdb.Get(c, f.keys.Stock).Val(), "the released unit is back")
	require.False(t, f.rdb.SIsMember(c, f.keys.Buyers, 2).Val())
	require.True(t, f.rdb.SIsMember(c, f.keys.Buyers, 1).Val())
	released, err = client.ReleaseWithStatus(c, f.saleID, 2, b.Token, true, false, cancelled)
	require.NoError(t, err)
	require.False(t, released, "a second release does nothing")
	require.Equal(t, "1", f.rdb.Get(c, f.keys.Stock).Val())
	require.Equal(t, "5", f.rdb.Get(c, f.keys.Fence).Val(), "every step bumps the fence, the repeated ones too")
}
