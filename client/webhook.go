package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/paysig"
)

// PaymentNotice is the body a payment provider posts to /webhooks/payments.
type PaymentNotice struct {
	Token       string `json:"token"`
	PaymentRef  string `json:"payment_ref"`
	AmountCents int64  `json:"amount_cents"`
}

// PaymentAnswer is the webhook's 200: the paid reservation, or a payment
// recorded for a refund.
type PaymentAnswer struct {
	Reservation *domain.ReservationView
	Refund      *domain.RefundRequired
}

// PaymentWebhook posts n as the payment provider does, signed with secret
// (SECKILL_PAYMENT_SECRET) at the current time; the same notice again
// answers the same, so it is retried.
func (c *Client) PaymentWebhook(ctx context.Context, secret []byte, n PaymentNotice) (PaymentAnswer, error) {
	body, err := json.Marshal(n)
	if err != nil {
		return PaymentAnswer{}, fmt.Errorf("POST %s: encode body: %w", WebhookPath, err)
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	a, err := c.send(ctx, call{method: http.MethodPost, path: WebhookPath, body: json.RawMessage(body), noAuth: true, idempotent: true,
		header: map[string]string{"X-Timestamp": ts, "X-Signature": paysig.Sign(secret, ts, body)}})
	if err != nil {
		return PaymentAnswer{}, err
	}
	var probe struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(a.body, &probe); err != nil {
		return PaymentAnswer{}, fmt.Errorf("POST %s: decode body: %w", WebhookPath, err)
	}
	var out PaymentAnswer
	target := any(&out.Reservation)
	if probe.Status == domain.StatusRefundRequired {
		target = &out.Refund
	}
	if err := json.Unmarshal(a.body, target); err != nil {
		return PaymentAnswer{}, fmt.Errorf("POST %s: decode body: %w", WebhookPath, err)
	}
	return out, nil
}
