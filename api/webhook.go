package api

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/paysig"
	"github.com/seckill/seckill/internal/strictjson"
)

// WebhookWindow is how far X-Timestamp may be from the server's clock: an
// old signed request replayed later is refused.
const WebhookWindow = 5 * time.Minute

// webhookHeaders checks the signature headers before any byte of the body
// is read: the timestamp within the window and the signature's format. It
// returns the signature's bytes. Every failure is the same 401 to the
// caller; the message says which.
func webhookHeaders(ts, sig string, now time.Time) ([]byte, error) {
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || ts == "" || ts[0] == '+' {
		return nil, domain.Errorf(domain.EUnauthorized, "missing or malformed X-Timestamp")
	}
	if d := now.Sub(time.Unix(unix, 0)); d > WebhookWindow || d < -WebhookWindow {
		return nil, domain.Errorf(domain.EUnauthorized, "X-Timestamp is outside the 5-minute window")
	}
	hexSig, ok := strings.CutPrefix(sig, paysig.Prefix)
	if !ok || len(hexSig) != 2*sha256.Size {
		return nil, domain.Errorf(domain.EUnauthorized, "missing or malformed X-Signature")
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil {
		return nil, domain.Errorf(domain.EUnauthorized, "missing or malformed X-Signature")
	}
	return got, nil
}

// verifyWebhook checks the headers, then the HMAC of the body (at most
// BodyLimit bytes) under each secret (the current one, then the previous
// one during a rotation).
func verifyWebhook(secrets [][]byte, ts, sig string, body []byte, now time.Time) error {
	if len(secrets) == 0 || len(secrets[0]) == 0 {
		return domain.Errorf(domain.EUnauthorized, "payment webhook not configured")
	}
	got, err := webhookHeaders(ts, sig, now)
	if err != nil {
		return err
	}
	if len(body) > BodyLimit {
		return domain.Errorf(domain.ETooLarge, "request body over 8 KiB")
	}
	for _, secret := range secrets {
		if len(secret) == 0 {
			continue
		}
		if hmac.Equal(got, paysig.Sum(secret, ts, body)) {
			return nil
		}
	}
	return domain.Errorf(domain.EUnauthorized, "bad signature")
}

type webhookRequest struct {
	Token       *string `json:"token"`
	PaymentRef  *string `json:"payment_ref"`
	AmountCents *int64  `json:"amount_cents"`
}

// decodeWebhook checks the signature, then decodes the body: a payment's
// token, reference and amount.
func (s *server) decodeWebhook(c *fiber.Ctx) (req webhookRequest, saleID int64, err error) {
	body := c.BodyRaw()
	if err := verifyWebhook(s.cfg.PaymentSecrets(), c.Get("X-Timestamp"), c.Get("X-Signature"), body, time.Now()); err != nil {
		return req, 0, err
	}
	if len(body) > 0 && !strictjson.IsJSONContentType(c.Request().Header.ContentType()) {
		return req, 0, domain.Errorf(domain.EUnsupportedMediaType, "request body must be application/json")
	}
	if err := strictjson.Decode(body, &req); err != nil {
		return req, 0, err
	}
	if req.PaymentRef == nil || !domain.ValidPaymentRef(*req.PaymentRef) {
		return req, 0, domain.Errorf(domain.EInvalid, "payment_ref must be 1..64 of A-Z a-z 0-9 _ -")
	}
	if req.AmountCents == nil || *req.AmountCents < 0 {
		// 0 is a free sale's amount: it settles like any other.
		return req, 0, domain.Errorf(domain.EInvalid, "amount_cents must be a non-negative integer")
	}
	if req.Token == nil {
		return req, 0, domain.Errorf(domain.EInvalid, "token is required")
	}
	saleID, ok := domain.ParseToken(*req.Token)
	if !ok {
		return req, 0, domain.ErrNoReservation
	}
	return req, saleID, nil
}

// POST /webhooks/payments: the provider confirms a payment. Signed, not
// authenticated by JWT; otherwise the user's payment call.
func (s *server) paymentWebhook(c *fiber.Ctx) error {
	received := time.Now()
	req, saleID, err := s.decodeWebhook(c)
	if err != nil {
		return sendErr(c, err)
	}
	conf, err := s.svc.Orders.Confirm(c.UserContext(), *req.Token, saleID, *req.PaymentRef, *req.AmountCents, received)
	switch {
	case err != nil:
		return sendErr(c, err)
	case conf.Refund != nil:
		return c.JSON(conf.Refund)
	}
	return c.JSON(conf.View)
}
