package api

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/paysig"
	"github.com/seckill/seckill/status"
	"github.com/seckill/seckill/store"
)

// WebhookWindow is how far X-Timestamp may be from the server's clock: an
// old signed request replayed later is refused.
const WebhookWindow = 5 * time.Minute

// settleWait bounds how long the webhook waits for a reservation whose
// release (or another payment) is being recorded to settle.
const settleWait = 5 * time.Second

// Refund reasons, stored and answered.
const (
	ReasonExpired   = "reservation_expired"
	ReasonCancelled = "reservation_cancelled"
	ReasonFailed    = "reservation_failed"
	ReasonDuplicate = "duplicate_payment"
)

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

// RefundRequired is the webhook's answer to a payment that must be given
// back: it never became a sale.
type RefundRequired struct {
	Status            string                   `json:"status"` // always "REFUND_REQUIRED"
	Token             string                   `json:"token"`
	SaleID            int64                    `json:"sale_id"`
	PaymentRef        string                   `json:"payment_ref"`
	AmountCents       int64                    `json:"amount_cents"`
	Reason            string                   `json:"reason"`
	ReservationStatus domain.ReservationStatus `json:"reservation_status"`
	RefundID          int64                    `json:"refund_id"`
	RecordedAt        time.Time                `json:"recorded_at"`
}

// StatusRefundRequired is RefundRequired.Status.
const StatusRefundRequired = "REFUND_REQUIRED"

// POST /webhooks/payments: the provider confirms a payment. Signed, not
// authenticated by JWT; otherwise the user's payment call.
func (s *server) paymentWebhook(c *fiber.Ctx) error {
	received := time.Now()
	body := c.BodyRaw()
	if err := verifyWebhook(s.cfg.PaymentSecrets(), c.Get("X-Timestamp"), c.Get("X-Signature"), body, time.Now()); err != nil {
		return sendErr(c, err)
	}
	var req webhookRequest
	if len(body) > 0 && !isJSONContentType(c.Request().Header.ContentType()) {
		return sendError(c, domain.EUnsupportedMediaType, "request body must be application/json")
	}
	if err := decodeStrict(body, &req); err != nil {
		return sendErr(c, err)
	}
	if req.PaymentRef == nil || !domain.ValidPaymentRef(*req.PaymentRef) {
		return sendError(c, domain.EInvalid, "payment_ref must be 1..64 of A-Z a-z 0-9 _ -")
	}
	if req.AmountCents == nil || *req.AmountCents < 0 {
		// 0 is a free sale's amount: it settles like any other.
		return sendError(c, domain.EInvalid, "amount_cents must be a non-negative integer")
	}
	if req.Token == nil {
		return sendError(c, domain.EInvalid, "token is required")
	}
	token, ref, amount := *req.Token, *req.PaymentRef, *req.AmountCents
	saleID, ok := domain.ParseToken(token)
	if !ok {
		return sendErr(c, errNoReservation)
	}
	ctx := c.UserContext()

	r, err := status.Stored(ctx, s.st, token)
	if err != nil {
		s.log(c).Warn("webhook: read reservation", "token", token, "err", err)
		return unavailable(c, 1, "reservation store unavailable")
	}
	if r == nil {
		if state, _, ok := s.redisHold(ctx, saleID, token); ok && state == domain.TokenHeld {
			return sendError(c, domain.ENotPayable, "the order is not created yet; retry later")
		}
		return sendErr(c, errNoReservation)
	}
	due, err := s.amountDue(ctx, r)
	if err != nil {
		return sendErr(c, err)
	}
	if amount != due {
		s.log(c).Warn("webhook: amount mismatch", "token", token, "payment_ref", ref, "amount_cents", amount, "due_cents", due)
		return sendError(c, domain.EAmountMismatch, "amount_cents does not match the order's amount")
	}
	if done, err := s.answerSettled(c, r, ref, amount); done {
		return err
	}
	v, err := s.payToken(ctx, token, domain.PayRequest{PaymentRef: ref, ReceivedAt: received})
	if err == nil {
		return c.JSON(v)
	}
	if domain.ErrorCode(err) != domain.ENotPayable {
		return sendErr(c, err)
	}
	// The workflow refused: the window closed, a release or another
	// payment is being recorded. Decide from the database once it settles.
	r, err = s.awaitSettled(ctx, token)
	if err != nil {
		return sendErr(c, err)
	}
	if done, err := s.answerSettled(c, r, ref, amount); done {
		return err
	}
	if r.Status == domain.StatusPendingPayment {
		return unavailable(c, 1, "the reservation is changing state; retry")
	}
	return sendErr(c, domain.ErrNotPayable)
}

// amountDue is what the reservation costs: its order's amount, or the sale's
// price before the order exists.
func (s *server) amountDue(ctx context.Context, r *domain.Reservation) (int64, error) {
	if r.AmountCents > 0 {
		return r.AmountCents, nil
	}
	e, err := s.cache.Get(ctx, r.SaleID)
	if err != nil {
		if domain.ErrorCode(err) == domain.ENotFound {
			return 0, err
		}
		s.ctxLog(ctx).Warn("webhook: sale lookup", "sale_id", r.SaleID, "err", err)
		return 0, domain.Unavailable("sale data unavailable")
	}
	return e.Sale().PriceCents, nil
}

// answerSettled answers a payment for a reservation that no longer awaits
// one: the same payment again (200 view) or one to refund.
func (s *server) answerSettled(c *fiber.Ctx, r *domain.Reservation, ref string, amount int64) (bool, error) {
	var reason string
	switch r.Status {
	case domain.StatusPaid:
		if r.PaymentRef == ref {
			return true, c.JSON(r.View())
		}
		reason = ReasonDuplicate
	case domain.StatusExpired:
		reason = ReasonExpired
	case domain.StatusCancelled:
		reason = ReasonCancelled
	case domain.StatusFailed:
		reason = ReasonFailed
	default:
		return false, nil
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), dbTimeout)
	defer cancel()
	rf, err := s.st.RecordRefund(ctx, store.Refund{
		Token: r.Token, SaleID: r.SaleID, UserID: r.UserID, PaymentRef: ref, AmountCents: amount, Reason: reason,
	})
	if err != nil {
		s.log(c).Error("webhook: record refund", "token", r.Token, "payment_ref", ref, "err", err)
		return true, unavailable(c, 1, "refund store unavailable; retry")
	}
	s.log(c).Info("payment to refund", "token", r.Token, "sale_id", r.SaleID, "payment_ref", ref,
		"amount_cents", rf.AmountCents, "reason", rf.Reason, "refund_id", rf.ID)
	return true, c.JSON(RefundRequired{
		Status: StatusRefundRequired, Token: rf.Token, SaleID: rf.SaleID, PaymentRef: rf.PaymentRef,
		AmountCents: rf.AmountCents, Reason: rf.Reason, ReservationStatus: r.Status,
		RefundID: rf.ID, RecordedAt: rf.CreatedAt,
	})
}

// awaitSettled polls the reservation until it leaves PENDING_PAYMENT or
// settleWait passes; it returns the last row read.
func (s *server) awaitSettled(ctx context.Context, token string) (*domain.Reservation, error) {
	deadline := time.Now().Add(settleWait)
	for {
		r, err := status.Stored(ctx, s.st, token)
		if err != nil {
			s.ctxLog(ctx).Warn("webhook: read reservation", "token", token, "err", err)
			return nil, domain.Unavailable("reservation store unavailable")
		}
		if r == nil {
			return nil, errNoReservation
		}
		if r.Status != domain.StatusPendingPayment || time.Now().After(deadline) {
			return r, nil
		}
		select {
		case <-ctx.Done():
			return r, nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}
