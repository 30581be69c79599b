package reservation

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/store"
)

// List answers a user's reservations from the database, newest first, of
// one sale or across sales, others' left out; with the database gone it
// is 503 unavailable.
func TestOrdersList(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := testenv.MustStore(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	o := NewOrders(OrdersDeps{Store: st, Logger: quiet})
	a, b := testenv.MustSale(t, st, 2), testenv.MustSale(t, st, 2)
	user, other := testenv.UniqueUser(), testenv.UniqueUser()
	record := func(saleID, userID int64, req string) string {
		tok := domain.DeriveToken([]byte("list-test-key"), saleID, userID, req)
		_, err := st.RecordReservation(ctx, domain.OrderInput{Token: tok, SaleID: saleID, UserID: userID, RequestID: req,
			Path: domain.PathRedis})
		require.NoError(t, err)
		return tok
	}
	first := record(a.ID, user, "list-1")
	time.Sleep(5 * time.Millisecond) // created_at orders them
	second := record(b.ID, user, "list-2")
	record(a.ID, other, "list-3")

	all, err := o.List(ctx, user, 0, 10)
	require.NoError(t, err)
	require.Len(t, all, 2)
	require.Equal(t, []string{second, first}, []string{all[0].Token, all[1].Token})

	ofA, err := o.List(ctx, user, a.ID, 10)
	require.NoError(t, err)
	require.Len(t, ofA, 1)
	require.Equal(t, first, ofA[0].Token)
	require.Equal(t, a.ID, ofA[0].SaleID)

	closed, err := store.Open(ctx, testenv.MySQLDSN())
	require.NoError(t, err)
	require.NoError(t, closed.Close())
	_, err = NewOrders(OrdersDeps{Store: closed, Logger: quiet}).List(ctx, user, 0, 10)
	require.Equal(t, domain.EUnavailable, domain.ErrorCode(err), "%v", err)
}
