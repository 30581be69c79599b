package lua_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/lua"
)

// TestStatusRecord: a record is written with the sale's epoch, announced
// on the sale's channel, never moves back to a lower rank, is void once
// the sale's epoch changes (a rebuild) and is not written for a sale whose
// keys are gone; it is part of the sale's keys, so tear-down removes it.
func TestStatusRecord(t *testing.T) {
	f := mustWarmSale(t, 3)
	c := ctx(t)
	sub := f.rdb.PSubscribe(c, lua.EventChannelPattern)
	defer sub.Close()
	_, err := sub.Receive(c) // the subscription's confirmation
	require.NoError(t, err)

	payBy := time.UnixMilli(time.Now().Add(10 * time.Minute).UnixMilli()).UTC()
	pending := lua.StatusRecord{Seq: 2, UserID: 42, Status: "PENDING_PAYMENT", OrderNo: "o-1", AmountCents: 500, PayBy: payBy}
	changed, err := f.scripts.WriteStatus(c, f.rdb, f.saleID, "tok", pending)
	require.NoError(t, err)
	require.True(t, changed)
	msg, err := sub.ReceiveMessage(c)
	require.NoError(t, err)
	require.Equal(t, lua.EventChannel(f.saleID), msg.Channel)
	require.Equal(t, "tok", msg.Payload)
	id, ok := lua.SaleOfEventChannel(msg.Channel)
	require.True(t, ok)
	require.Equal(t, f.saleID, id)

	got, err := f.scripts.ReadStatus(c, f.rdb, f.saleID, "tok")
	require.NoError(t, err)
	require.NotNil(t, got.Record)
	pending.Epoch = 1
	require.Equal(t, pending, *got.Record)

	paid := pending
	paid.Seq, paid.Status = 3, "PAID"
	changed, err = f.scripts.WriteStatus(c, f.rdb, f.saleID, "tok", paid)
	require.NoError(t, err)
	require.True(t, changed)
	changed, err = f.scripts.WriteStatus(c, f.rdb, f.saleID, "tok", pending)
	require.NoError(t, err)
	require.False(t, changed, "a late writer never moves the record back")
	got, err = f.scripts.ReadStatus(c, f.rdb, f.saleID, "tok")
	require.NoError(t, err)
	require.Equal(t, "PAID", got.Record.Status)

	require.NoError(t, f.rdb.HSet(c, f.keys.Meta, "epoch", 2).Err())
	got, err = f.scripts.ReadStatus(c, f.rdb, f.saleID, "tok")
	require.NoError(t, err)
	require.Nil(t, got.Record, "a record of an older epoch is void")

	require.Contains(t, f.keys.All(), f.keys.Status)
	require.NoError(t, f.rdb.Del(c, f.keys.All()...).Err())
	changed, err = f.scripts.WriteStatus(c, f.rdb, f.saleID, "tok", paid)
	require.NoError(t, err)
	require.False(t, changed)
	n, err := f.rdb.Exists(c, f.keys.Status).Result()
	require.NoError(t, err)
	require.Zero(t, n, "no record for a torn-down sale")
}
