package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/store"
)

func TestRecordRefundOncePerPaymentAndCountInSnapshot(t *testing.T) {
	st := testenv.MustStore(t)
	sale := testenv.MustSale(t, st, 2)
	user := testenv.UniqueUser()
	in := mustQueued(t, st, sale, user, "refund-req-1")

	r := store.Refund{Token: in.Token, SaleID: sale.ID, UserID: user, PaymentRef: "pay-1", AmountCents: 1999, Reason: "reservation_expired"}
	first, err := st.RecordRefund(ctx(t), r)
	require.NoError(t, err)
	require.NotZero(t, first.ID)

	// A provider retry with another amount changes nothing: the first record stands.
	r.AmountCents = 1
	again, err := st.RecordRefund(ctx(t), r)
	require.NoError(t, err)
	require.Equal(t, first.ID, again.ID)
	require.Equal(t, int64(1999), again.AmountCents)

	r.PaymentRef = "pay-2"
	_, err = st.RecordRefund(ctx(t), r)
	require.NoError(t, err)

	list, err := st.ListRefunds(ctx(t), sale.ID, 10)
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, "pay-2", list[0].PaymentRef, "newest first")
	n, err := st.CountRefunds(ctx(t), sale.ID)
	require.NoError(t, err)
	require.Equal(t, int64(2), n)

	snap, err := st.ReadSnapshot(ctx(t), sale.ID)
	require.NoError(t, err)
	require.Equal(t, int64(2), snap.Refunds)
}
