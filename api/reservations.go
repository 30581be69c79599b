package api

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/orders"
	"github.com/seckill/seckill/status"
)

const (
	updateTimeout = 10 * time.Second
	dbTimeout     = 5 * time.Second
	listLimit     = 100
)

var errNoReservation = domain.ErrNoReservation

// tokenParam reads a well-formed reservation token from the path, else 404.
func tokenParam(c *fiber.Ctx) (string, int64, error) {
	tok := c.Params("token")
	saleID, ok := domain.ParseToken(tok)
	if !ok {
		return "", 0, errNoReservation
	}
	return strings.Clone(tok), saleID, nil
}

// redisHold reads a token's Redis state; ok is false when Redis does not
// know it or cannot answer now.
func (s *server) redisHold(ctx context.Context, saleID int64, token string) (state string, userID int64, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RedisTimeout)
	defer cancel()
	state, userID, found, err := s.rdb.TokenHold(ctx, saleID, token)
	if err != nil {
		s.ctxLog(ctx).Warn("read token state", "sale_id", saleID, "err", err)
		return "", 0, false
	}
	return state, userID, found
}

// GET /api/v1/reservations/{token}: answered from Redis and the
// in-process cache (status.go); only the owner sees it.
func (s *server) getReservation(c *fiber.Ctx) error {
	p := principal(c)
	token, saleID, err := tokenParam(c)
	if err != nil {
		return sendErr(c, err)
	}
	v, err := s.reads.Read(c.UserContext(), p.UserID, token, saleID)
	if err != nil {
		return sendErr(c, err)
	}
	if v.Body != nil {
		c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
		return c.Send(v.Body)
	}
	return c.JSON(v.View)
}

// GET /api/v1/me/reservations?sale_id=: of one sale, answered from Redis
// like a status read (status.Reader.List); across sales, or when Redis cannot
// answer, from the database.
func (s *server) listReservations(c *fiber.Ctx) error {
	p := principal(c)
	saleID, err := optionalSaleID(c)
	if err != nil {
		return sendErr(c, err)
	}
	if saleID > 0 {
		if views, ok := s.reads.List(c.UserContext(), p.UserID, saleID, listLimit); ok {
			return c.JSON(fiber.Map{"reservations": views})
		}
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), dbTimeout)
	defer cancel()
	rs, err := s.st.ListReservations(ctx, p.UserID, saleID, listLimit)
	if err != nil {
		s.log(c).Warn("list reservations", "err", err)
		return unavailable(c, 1, "reservation store unavailable")
	}
	views := make([]domain.ReservationView, len(rs))
	for i, r := range rs {
		views[i] = r.View()
	}
	return c.JSON(fiber.Map{"reservations": views})
}

type payRequest struct {
	PaymentRef *string `json:"payment_ref"`
}

// ownReservation checks the caller owns the token (database row or Redis
// hold) and returns it; a token the database does not know yet is a
// HeldReservation with the token's Redis state.
func (s *server) ownReservation(ctx context.Context, p Principal, token string, saleID int64) (*domain.Reservation, error) {
	r, err := status.Stored(ctx, s.st, token)
	if err != nil {
		return nil, domain.Unavailable("reservation store unavailable")
	}
	if r != nil {
		if r.UserID != p.UserID {
			return nil, errNoReservation
		}
		return r, nil
	}
	if state, owner, ok := s.redisHold(ctx, saleID, token); ok && owner == p.UserID {
		r := domain.HeldReservation(token, saleID, owner)
		r.TokenState = state
		return r, nil
	}
	return nil, errNoReservation
}

// POST /api/v1/reservations/{token}/payment
func (s *server) pay(c *fiber.Ctx) error {
	received := time.Now()
	p := principal(c)
	token, saleID, err := tokenParam(c)
	if err != nil {
		return sendErr(c, err)
	}
	var req payRequest
	if err := decodeBody(c, &req); err != nil {
		return sendErr(c, err)
	}
	if req.PaymentRef == nil || !domain.ValidPaymentRef(*req.PaymentRef) {
		return sendError(c, domain.EInvalid, "payment_ref must be 1..64 of A-Z a-z 0-9 _ -")
	}
	ref := *req.PaymentRef
	if _, err := s.ownReservation(c.UserContext(), p, token, saleID); err != nil {
		return sendErr(c, err)
	}
	v, err := s.payToken(c.UserContext(), token, domain.PayRequest{PaymentRef: ref, ReceivedAt: received})
	if err != nil {
		return sendErr(c, err)
	}
	return c.JSON(v)
}

// payToken records a payment on the reservation through its workflow's
// pay update (its ReceivedAt, when the API received it, lets the workflow
// take it a little after pay_by); once the workflow has closed, the
// database answers (the same ref on a PAID row is a replay). The user's
// payment call and the provider's webhook share it. Refusals are
// *domain.Error (not_payable, unavailable).
func (s *server) payToken(ctx context.Context, token string, req domain.PayRequest) (domain.ReservationView, error) {
	ref := req.PaymentRef
	st, err := s.update(ctx, token, "pay-"+ref, domain.UpdatePay, req)
	if domain.ErrorCode(err) == domain.ENotPayable && s.awaitAdopted(ctx, token) == domain.StatusPendingPayment {
		// A database-path order is PENDING_PAYMENT (and shown so) from its
		// transaction on, before its workflow has read it; the workflow
		// refuses while it still says QUEUED. Ask again now that it knows
		// (a refusal for another reason is given again).
		st, err = s.update(ctx, token, "pay-"+ref, domain.UpdatePay, req)
	}
	if errors.Is(err, orders.ErrClosed) && s.repairClosed(ctx, token) {
		// A new run took the reservation over, or it was released: ask
		// again, so the payment settles now (paid, or refused and then
		// recorded for a refund by the webhook).
		st, err = s.update(ctx, token, "pay-"+ref, domain.UpdatePay, req)
	}
	switch {
	case err == nil:
		s.reads.Settle(ctx, time.Now())
		return st.View(), nil
	case errors.Is(err, orders.ErrClosed):
		r, derr := status.Stored(ctx, s.st, token)
		if derr != nil {
			s.ctxLog(ctx).Warn("pay: read reservation", "token", token, "err", derr)
			return domain.ReservationView{}, domain.Unavailable("reservation store unavailable")
		}
		if r != nil && r.Status == domain.StatusPaid && r.PaymentRef == ref {
			return r.View(), nil
		}
		return domain.ReservationView{}, domain.ErrNotPayable
	}
	return domain.ReservationView{}, err
}

// POST /api/v1/reservations/{token}/cancel
func (s *server) cancel(c *fiber.Ctx) error {
	p := principal(c)
	token, saleID, err := tokenParam(c)
	if err != nil {
		return sendErr(c, err)
	}
	if body := c.BodyRaw(); len(strings.TrimSpace(string(body))) > 0 {
		var req struct{}
		if err := decodeBody(c, &req); err != nil {
			return sendErr(c, err)
		}
	}
	r, err := s.ownReservation(c.UserContext(), p, token, saleID)
	if err != nil {
		return sendErr(c, err)
	}
	if r.Status == domain.StatusQueued || r.Status == domain.StatusCancelled {
		ended, err := s.res.CancelQueued(c.UserContext(), p.UserID, saleID, token)
		if err != nil {
			return sendErr(c, err)
		}
		if ended != nil && ended.Status == domain.StatusCancelled {
			s.cache.DropMark(saleID) // the unit is back on sale
			s.reads.Settle(c.UserContext(), time.Now())
			return c.JSON(ended.View())
		}
		// The order was placed meanwhile: its workflow cancels it.
	}
	st, err := s.update(c.UserContext(), token, "cancel", domain.UpdateCancel, domain.CancelRequest{Reason: "user"})
	if errors.Is(err, orders.ErrClosed) && s.repairClosed(c.UserContext(), token) {
		// A live reservation whose workflow had closed (or not started
		// yet) has one now: ask it.
		st, err = s.update(c.UserContext(), token, "cancel", domain.UpdateCancel, domain.CancelRequest{Reason: "user"})
	}
	switch {
	case err == nil:
		if st.Status == domain.StatusCancelled {
			s.cache.DropMark(saleID) // the unit is back on sale
		}
		s.reads.Settle(c.UserContext(), time.Now())
		return c.JSON(st.View())
	case errors.Is(err, orders.ErrClosed):
		r, derr := status.Stored(c.UserContext(), s.st, token)
		if derr != nil {
			return unavailable(c, 1, "reservation store unavailable")
		}
		if r != nil && r.Status == domain.StatusCancelled {
			return c.JSON(r.View())
		}
		return sendErr(c, domain.ErrNotCancellable)
	}
	return sendErr(c, err)
}

// repairClosed repairs a live reservation whose workflow has closed
// (reconcile's closed-workflow policy); it reports whether it did.
func (s *server) repairClosed(ctx context.Context, token string) bool {
	r := s.reconciler(s.logger)
	repaired, err := r.RepairToken(ctx, token)
	if err != nil {
		s.logger.Warn("repair of a closed workflow failed", "token", token, "err", err)
		return false
	}
	if repaired {
		s.awaitAdopted(ctx, token)
	}
	return repaired
}

// awaitAdopted waits (briefly) until the token's workflow has read its
// reservation: a new run answers QUEUED, and refuses a payment, until then.
// It returns the status the workflow then answers ("" when it did not).
func (s *server) awaitAdopted(ctx context.Context, token string) domain.ReservationStatus {
	if s.temporal == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for {
		st, err := orders.Status(ctx, s.temporal, token)
		if err == nil && st.Status != domain.StatusQueued {
			return st.Status
		}
		if errors.Is(err, orders.ErrClosed) {
			return "" // released and finished already
		}
		select {
		case <-ctx.Done():
			return ""
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// update runs an update on the reservation's workflow and waits for its
// result; Temporal's own failure is a 503.
func (s *server) update(ctx context.Context, token, updateID, name string, arg any) (domain.OrderState, error) {
	if s.temporal == nil {
		return domain.OrderState{}, domain.Unavailable("workflow service unavailable")
	}
	ctx, cancel := context.WithTimeout(ctx, updateTimeout)
	defer cancel()
	st, err := orders.Update(ctx, s.temporal, token, updateID, name, arg)
	var de *domain.Error
	if err != nil && !errors.Is(err, orders.ErrClosed) && !errors.As(err, &de) {
		s.ctxLog(ctx).Warn("order workflow update failed", "token", token, "err", err)
		return st, domain.Unavailable("workflow service unavailable, retry")
	}
	return st, err
}

// GET /api/v1/sales/{sale_id}
func (s *server) getSale(c *fiber.Ctx) error {
	id, err := saleIDParam(c, "sale_id")
	if err != nil {
		return sendErr(c, err)
	}
	e, err := s.cache.Get(c.UserContext(), id)
	if err != nil {
		return s.saleLookupError(c, err)
	}
	return c.JSON(e.View(time.Now()))
}

func (s *server) saleLookupError(c *fiber.Ctx, err error) error {
	if domain.ErrorCode(err) == domain.ENotFound {
		return sendErr(c, err)
	}
	s.log(c).Warn("sale lookup", "err", err)
	return unavailable(c, 1, "sale data unavailable")
}

// optionalSaleID reads the ?sale_id= filter: 0 when absent, a positive
// integer when given, else 400 invalid_request.
func optionalSaleID(c *fiber.Ctx) (int64, error) {
	raw := c.Query("sale_id")
	if raw == "" && !c.Context().QueryArgs().Has("sale_id") {
		return 0, nil
	}
	id, ok := parsePositiveID(raw)
	if !ok {
		return 0, domain.Errorf(domain.EInvalid, "sale_id must be a positive integer")
	}
	return id, nil
}
