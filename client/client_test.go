package client_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/wire"
)

// The client against a real API and worker: an operator creates and warms
// a sale (a create repeated under its Idempotency-Key answers the same
// sale), a user reserves (a retry with the same request id answers the
// same token), follows the reservation's events until PENDING_PAYMENT,
// finds it in their list, pays, and is refused a cancel; another user
// cannot read it; the operator pauses, resumes, adds stock and reconciles;
// refusals come back as the contract's codes.
func TestClientAgainstTheAPI(t *testing.T) {
	env := testenv.ProcEnv(t, "client-"+fmt.Sprint(time.Now().UnixNano()), nil)
	api := testenv.MustAPI(t, "api", env)
	testenv.MustWorker(t, "worker", env)
	ctx := t.Context()
	admin := client.New(api.URL, testenv.MustToken(t, testenv.AdminUser), 15*time.Second)
	now := time.Now().UTC().Truncate(time.Second)
	ns := client.NewSale{GoodsID: 1, Title: "client test", PriceCents: 250, Stock: 2,
		StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour), PaymentWindowSeconds: 600}
	key := client.NewIdempotencyKey()
	sale, err := admin.CreateSale(ctx, ns, key)
	require.NoError(t, err)
	again, err := admin.CreateSale(ctx, ns, key)
	require.NoError(t, err)
	require.Equal(t, sale.SaleID, again.SaleID, "a repeat under the same key creates nothing")
	warmed, err := admin.Warmup(ctx, sale.SaleID)
	require.NoError(t, err)
	require.EqualValues(t, 2, warmed.RedisStock)

	buyer := client.New(api.URL, testenv.MustToken(t, testenv.UniqueUser()), 15*time.Second)
	a, err := buyer.Reserve(ctx, sale.SaleID, "client-req-1")
	require.NoError(t, err)
	require.Equal(t, domain.StatusQueued, a.Status)
	replay, err := buyer.Reserve(ctx, sale.SaleID, "client-req-1")
	require.NoError(t, err)
	require.Equal(t, a.Token, replay.Token, "a retry reaches the same reservation")
	_, err = admin.Warmup(ctx, sale.SaleID)
	require.Equal(t, domain.EAlreadyLive, domain.ErrorCode(err), "a sale taking reservations is not reset")

	followUntilPending(t, buyer, a.Token)
	mine, err := buyer.MyReservations(ctx, sale.SaleID)
	require.NoError(t, err)
	require.Len(t, mine, 1)
	require.Equal(t, a.Token, mine[0].Token)
	paid, err := buyer.Pay(ctx, a.Token, "client-pay-1")
	require.NoError(t, err)
	require.Equal(t, domain.StatusPaid, paid.Status)
	_, err = buyer.Cancel(ctx, a.Token)
	require.Equal(t, domain.ENotCancellable, domain.ErrorCode(err))

	other := client.New(api.URL, testenv.MustToken(t, testenv.UniqueUser()), 15*time.Second)
	_, err = other.Reservation(ctx, a.Token)
	require.Equal(t, domain.ENotFound, domain.ErrorCode(err))
	_, err = buyer.Reserve(ctx, sale.SaleID, "bad id")
	require.Equal(t, domain.EInvalid, domain.ErrorCode(err))
	_, err = buyer.Sale(ctx, 9_000_000_000_000)
	require.Equal(t, domain.ENotFound, domain.ErrorCode(err))
	_, err = buyer.Pause(ctx, sale.SaleID)
	require.Equal(t, domain.EForbidden, domain.ErrorCode(err), "a user token on /admin/*")

	operate(t, admin, other, sale.SaleID)
}

// followUntilPending reads the reservation's events until PENDING_PAYMENT.
func followUntilPending(t *testing.T, c *client.Client, token string) {
	t.Helper()
	events, err := c.Events(t.Context(), token, 0)
	require.NoError(t, err)
	defer func() { require.NoError(t, events.Close()) }()
	first, err := events.Next()
	require.NoError(t, err)
	require.Equal(t, token, first.View.Token)
	for ev := first; ev.View.Status != domain.StatusPendingPayment; {
		require.Equal(t, domain.StatusQueued, ev.View.Status)
		ev, err = events.Next()
		require.NoError(t, err)
	}
}

// operate runs the operator's sale controls: a paused sale refuses
// reservations, resume and stock bring it back, reconciliation agrees.
func operate(t *testing.T, admin, buyer *client.Client, saleID int64) {
	t.Helper()
	ctx := t.Context()
	_, err := admin.Pause(ctx, saleID)
	require.NoError(t, err)
	_, err = buyer.Reserve(ctx, saleID, "client-req-2")
	require.Equal(t, domain.ESalePaused, domain.ErrorCode(err))
	_, err = admin.Resume(ctx, saleID)
	require.NoError(t, err)
	key := client.NewIdempotencyKey()
	v, err := admin.AddStock(ctx, saleID, 3, key)
	require.NoError(t, err)
	require.EqualValues(t, 5, v.StockTotal)
	v, err = admin.AddStock(ctx, saleID, 3, key)
	require.NoError(t, err)
	require.EqualValues(t, 5, v.StockTotal, "a repeat under the same key adds nothing")
	rep, err := admin.Reconcile(ctx, saleID, false)
	require.NoError(t, err)
	require.Equal(t, saleID, rep.SaleID)
	require.EqualValues(t, 5, rep.StockTotal)
	stopped, err := admin.Stop(ctx, saleID)
	require.NoError(t, err)
	require.Equal(t, domain.StateEnded, stopped.State)
	_, err = buyer.Reserve(ctx, saleID, "client-req-3")
	require.Equal(t, domain.ESaleEnded, domain.ErrorCode(err))
	require.NoError(t, admin.Health(ctx))
	ready, err := admin.Ready(ctx)
	require.NoError(t, err)
	require.Equal(t, wire.Ready, ready.Status)
}
