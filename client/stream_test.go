package client_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/paysig"
)

// The event stream yields each status event (comments and retry lines
// skipped) with its id, sends Last-Event-ID, and ends with io.EOF; a 204
// is a stream that is already over.
func TestEvents(t *testing.T) {
	var lastID atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lastID.Store(r.Header.Get("Last-Event-ID"))
		if r.Header.Get("Last-Event-ID") == "3" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "retry: 2000\n\n: keep-alive\n\n"+
			"id: 1\nevent: status\ndata: {\"token\":\"1-00\",\"sale_id\":1,\"status\":\"QUEUED\",\"amount_cents\":5}\n\n"+
			"id: 2\nevent: status\ndata: {\"token\":\"1-00\",\"sale_id\":1,\"status\":\"PENDING_PAYMENT\",\"amount_cents\":5}\n\n")
	}))
	t.Cleanup(srv.Close)
	c := client.New(srv.URL, "tok", 5*time.Second)
	ev, err := c.Events(t.Context(), "1-00", 0)
	require.NoError(t, err)
	first, err := ev.Next()
	require.NoError(t, err)
	require.Equal(t, client.Event{ID: 1, View: domain.ReservationView{Token: "1-00", SaleID: 1, Status: domain.StatusQueued, AmountCents: 5}}, first)
	second, err := ev.Next()
	require.NoError(t, err)
	require.Equal(t, int64(2), second.ID)
	require.Equal(t, domain.StatusPendingPayment, second.View.Status)
	_, err = ev.Next()
	require.ErrorIs(t, err, io.EOF)
	require.NoError(t, ev.Close())
	require.Empty(t, lastID.Load())

	over, err := c.Events(t.Context(), "1-00", 3)
	require.NoError(t, err)
	require.Equal(t, "3", lastID.Load())
	_, err = over.Next()
	require.ErrorIs(t, err, io.EOF)
	require.NoError(t, over.Close())
}

// The webhook is signed as the provider signs it, sends no bearer token,
// and tells a paid reservation from a refund.
func TestPaymentWebhook(t *testing.T) {
	secret := []byte(config.DevPaymentSecret)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get("Authorization") != "" || r.Header.Get("X-Signature") != paysig.Sign(secret, r.Header.Get("X-Timestamp"), body) {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":{"code":"unauthorized","message":"bad signature"}}`)
			return
		}
		if string(body) == `{"token":"1-00","payment_ref":"late","amount_cents":5}` {
			_, _ = io.WriteString(w, `{"status":"REFUND_REQUIRED","token":"1-00","refund_id":7,"reason":"reservation_expired"}`)
			return
		}
		_, _ = io.WriteString(w, `{"token":"1-00","sale_id":1,"status":"PAID","amount_cents":5}`)
	}))
	t.Cleanup(srv.Close)
	c := client.New(srv.URL, "tok", 5*time.Second)
	paid, err := c.PaymentWebhook(t.Context(), secret, client.PaymentNotice{Token: "1-00", PaymentRef: "ok", AmountCents: 5})
	require.NoError(t, err)
	require.Nil(t, paid.Refund)
	require.Equal(t, domain.StatusPaid, paid.Reservation.Status)
	late, err := c.PaymentWebhook(t.Context(), secret, client.PaymentNotice{Token: "1-00", PaymentRef: "late", AmountCents: 5})
	require.NoError(t, err)
	require.Nil(t, late.Reservation)
	require.EqualValues(t, 7, late.Refund.RefundID)
	_, err = c.PaymentWebhook(t.Context(), []byte("another secret"), client.PaymentNotice{Token: "1-00", PaymentRef: "ok", AmountCents: 5})
	require.Equal(t, domain.EUnauthorized, domain.ErrorCode(err))
}
