package client_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testenv"
)

// The client against a real API and worker: an operator creates and warms
// a sale, a user reserves (a retry with the same request id answers the
// same token), reads the reservation until PENDING_PAYMENT, pays, and is
// refused a cancel; another user cannot read it; refusals come back as
// the contract's codes.
func TestClientAgainstTheAPI(t *testing.T) {
	env := testenv.ProcEnv(t, "client-"+fmt.Sprint(time.Now().UnixNano()), nil)
	api := testenv.MustAPI(t, "api", env)
	testenv.MustWorker(t, "worker", env)
	ctx := t.Context()
	admin := client.New(api.URL, testenv.MustToken(t, testenv.AdminUser), 15*time.Second)
	now := time.Now().UTC().Truncate(time.Second)
	sale, err := admin.CreateSale(ctx, client.NewSale{GoodsID: 1, Title: "client test", PriceCents: 250, Stock: 2,
		StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour), PaymentWindowSeconds: 600})
	require.NoError(t, err)
	require.NoError(t, admin.Warmup(ctx, sale.SaleID))

	user := testenv.UniqueUser()
	buyer := client.New(api.URL, testenv.MustToken(t, user), 15*time.Second)
	a, err := reserve(t, buyer, sale.SaleID, "client-req-1")
	require.NoError(t, err)
	require.Equal(t, domain.StatusQueued, a.Status)
	again, err := reserve(t, buyer, sale.SaleID, "client-req-1")
	require.NoError(t, err)
	require.Equal(t, a.Token, again.Token, "a retry reaches the same reservation")
	require.Equal(t, domain.EAlreadyLive, domain.ErrorCode(admin.Warmup(ctx, sale.SaleID)), "a sale taking reservations is not reset")

	require.Eventually(t, func() bool {
		v, err := buyer.Reservation(ctx, a.Token)
		return err == nil && v.Status == domain.StatusPendingPayment
	}, 60*time.Second, 100*time.Millisecond)
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
	v, err := buyer.Sale(ctx, sale.SaleID)
	require.NoError(t, err)
	require.EqualValues(t, 2, v.StockTotal)
}

// reserve is Reserve as the contract's client sends it: a 503 is sent
// again with the same request id after its Retry-After.
func reserve(t *testing.T, c *client.Client, saleID int64, requestID string) (domain.Accepted, error) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		a, err := c.Reserve(t.Context(), saleID, requestID)
		if domain.ErrorCode(err) != domain.EUnavailable || attempt == 5 {
			return a, err
		}
		time.Sleep(time.Second)
	}
}

// An error answer is its *domain.Error with the Retry-After; a body that
// is not the contract's keeps the status.
func TestErrorAnswers(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case client.ReservationsPath(1):
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":{"code":"unavailable","message":"reservation outcome unknown, retry with the same request_id"}}`))
		default:
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte("<html>bad gateway</html>"))
		}
	}))
	t.Cleanup(srv.Close)
	c := client.New(srv.URL, "tok", 5*time.Second)
	_, err := c.Reserve(t.Context(), 1, "req-00000001")
	var e *domain.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, domain.Error{Code: domain.EUnavailable, Message: "reservation outcome unknown, retry with the same request_id", RetryAfter: 3}, *e)
	_, err = c.Sale(t.Context(), 1)
	require.ErrorAs(t, err, &e)
	require.Equal(t, domain.Error{Code: domain.EInternal, Message: "status 502"}, *e)
}
