package sales_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/salecache"
	"github.com/seckill/seckill/sales"
	"github.com/seckill/seckill/store"
)

// viewOperator is the operators' use cases on st, with a cache of its own.
func viewOperator(t *testing.T, st *store.Store) (*sales.Operator, *salecache.Cache) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	client := redisgateway.NewClient(testenv.MustRedis(t))
	cache := salecache.New(st, client, time.Second, quiet)
	return sales.NewOperator(sales.OperatorDeps{Store: st, Redis: client, Cache: cache, Logger: quiet}), cache
}

// Detail reads the sale from the database (not the cache, which may be
// behind) with its reservations by status and its refunds, and says why
// the sale workflow's report is missing; an unknown sale is 404.
func TestOperatorDetail(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := testenv.MustStore(t)
	op, cache := viewOperator(t, st)
	sale := testenv.MustSale(t, st, 5)
	_, err := cache.Get(ctx, sale.ID)
	require.NoError(t, err)
	_, err = st.SetSaleControl(ctx, sale.ID, domain.ControlPaused)
	require.NoError(t, err)
	user := testenv.UniqueUser()
	tok := domain.DeriveToken(tokenKey, sale.ID, user, "detail-1")
	_, err = st.RecordReservation(ctx, domain.OrderInput{Token: tok, SaleID: sale.ID, UserID: user, RequestID: "detail-1",
		Path: domain.PathRedis})
	require.NoError(t, err)
	_, err = st.RecordRefund(ctx, store.Refund{Token: tok, SaleID: sale.ID, UserID: user, PaymentRef: "pay-1", AmountCents: 1999})
	require.NoError(t, err)

	d, err := op.Detail(ctx, sale.ID)
	require.NoError(t, err)
	require.Equal(t, domain.ControlPaused, d.Sale.Control, "the database's sale, not the cache's")
	require.Equal(t, int64(5), d.StockLeft)
	var orders int64
	for _, n := range d.Orders {
		orders += n
	}
	require.Equal(t, int64(1), orders, "%v", d.Orders)
	require.Equal(t, int64(1), d.Refunds)
	require.Nil(t, d.Report)
	require.Equal(t, "temporal is not configured", d.ReportError)

	_, err = op.Detail(ctx, 1<<40)
	require.Equal(t, domain.ENotFound, domain.ErrorCode(err), "%v", err)
}

// Recache brings a change made in the database into the cache at once;
// with the database gone, the operators' listing is 503 and Recache
// leaves the cache.
func TestOperatorRecache(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := testenv.MustStore(t)
	op, cache := viewOperator(t, st)
	sale := testenv.MustSale(t, st, 2)
	e, err := cache.Get(ctx, sale.ID)
	require.NoError(t, err)
	_, err = st.SetSaleControl(ctx, sale.ID, domain.ControlStopped)
	require.NoError(t, err)
	require.Equal(t, domain.ControlActive, e.Sale().Control, "the cache is behind")
	op.Recache(ctx, sale.ID)
	e, err = cache.Get(ctx, sale.ID)
	require.NoError(t, err)
	require.Equal(t, domain.ControlStopped, e.Sale().Control)

	closed, err := store.Open(ctx, testenv.MySQLDSN())
	require.NoError(t, err)
	require.NoError(t, closed.Close())
	down, downCache := viewOperator(t, closed)
	_, err = sales.NewListing(sales.ListingDeps{Store: closed, Cache: downCache, TokenKey: tokenKey, Logger: quietLogger()}).Operators(ctx, "", "")
	require.Equal(t, domain.EUnavailable, domain.ErrorCode(err), "%v", err)
	down.Recache(ctx, sale.ID)
	require.Empty(t, downCache.Sales())
}
