package api

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/store"
)

const (
	updateTimeout = 10 * time.Second
	dbTimeout     = 5 * time.Second
	listLimit     = 100
)

var errNoReservation = domain.Errorf(domain.ENotFound, "no such reservation")

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
	v, err := s.rdb.HGet(ctx, lua.SaleKeys(saleID).Tokens, token).Result()
	if err != nil {
		if !errors.Is(err, redis.Nil) {
			s.logger.Warn("read token state", "sale", saleID, "err", err)
		}
		return "", 0, false
	}
	return lua.TokenState(v)
}

// dbReservation reads a reservation row; (nil, nil) when there is none.
func (s *server) dbReservation(ctx context.Context, token string) (*domain.Reservation, error) {
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	r, err := s.st.GetReservation(ctx, token)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return r, nil
}

// GET /api/v1/reservations/{token}: answered from Redis and the
// in-process cache (status.go); only the owner sees it.
func (s *server) getReservation(c *fiber.Ctx) error {
	p := principal(c)
	token, saleID, err := tokenParam(c)
	if err != nil {
		return sendErr(c, err)
	}
	if limited, err := s.statusReadLimited(c, p.UserID); limited {
		return err
	}
	v, _, err := s.statusView(c.UserContext(), p.UserID, token, saleID)
	if err != nil {
		return s.sendMaybeUnavailable(c, err)
	}
	return c.JSON(v)
}

// GET /api/v1/me/reservations?sale_id=
func (s *server) listReservations(c *fiber.Ctx) error {
	p := principal(c)
	saleID, err := optionalSaleID(c)
	if err != nil {
		return sendErr(c, err)
	}
	if limited, err := s.statusReadLimited(c, p.UserID); limited {
		return err
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), dbTimeout)
	defer cancel()
	rs, err := s.st.ListReservations(ctx, p.UserID, saleID, listLimit)
	if err != nil {
		s.logger.Warn("list reservations", "err", err)
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

// ownReservation checks the caller owns the token (database row or Redis hold).
func (s *server) ownReservation(ctx context.Context, p Principal, token string, saleID int64) (*domain.Reservation, error) {
	r, err := s.dbReservation(ctx, token)
	if err != nil {
		return nil, domain.Errorf(domain.EUnavailable, "reservation store unavailable")
	}
	if r != nil {
		if r.UserID != p.UserID {
			return nil, errNoReservation
		}
		return r, nil
	}
	if _, owner, ok := s.redisHold(ctx, saleID, token); ok && owner == p.UserID {
		return nil, nil
	}
	return nil, errNoReservation
}

// POST /api/v1/reservations/{token}/payment
func (s *server) pay(c *fiber.Ctx) error {
	p := principal(c)
	token, saleID, err := tokenParam(c)
	if err != nil {
		return sendErr(c, err)
	}
	var req payRequest
	if err := decodeStrict(c.Body(), &req); err != nil {
		return sendErr(c, err)
	}
	if req.PaymentRef == nil || !domain.ValidPaymentRef(*req.PaymentRef) {
		return sendError(c, domain.EInvalid, "payment_ref must be 1..64 of A-Z a-z 0-9 _ -")
	}
	ref := *req.PaymentRef
	if _, err := s.ownReservation(c.UserContext(), p, token, saleID); err != nil {
		return s.sendMaybeUnavailable(c, err)
	}
	v, err := s.payToken(c.UserContext(), token, ref)
	if err != nil {
		return s.sendMaybeUnavailable(c, err)
	}
	return c.JSON(v)
}

// payToken records payment ref on the reservation through its workflow's
// pay update; once the workflow has closed, the database answers (the same
// ref on a PAID row is a replay). The user's payment call and the provider's
// webhook share it. Refusals are *domain.Error (not_payable, unavailable).
func (s *server) payToken(ctx context.Context, token, ref string) (domain.ReservationView, error) {
	st, err := s.update(ctx, token, "pay-"+ref, domain.UpdatePay, domain.PayRequest{PaymentRef: ref})
	switch {
	case err == nil:
		return stateView(st), nil
	case errors.Is(err, errWorkflowClosed):
		r, derr := s.dbReservation(ctx, token)
		if derr != nil {
			s.logger.Warn("pay: read reservation", "token", token, "err", derr)
			return domain.ReservationView{}, domain.Errorf(domain.EUnavailable, "reservation store unavailable")
		}
		if r != nil && r.Status == domain.StatusPaid && r.PaymentRef == ref {
			return r.View(), nil
		}
		return domain.ReservationView{}, domain.Errorf(domain.ENotPayable, "the reservation is not awaiting payment")
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
	if body := c.Body(); len(strings.TrimSpace(string(body))) > 0 {
		var req struct{}
		if err := decodeStrict(body, &req); err != nil {
			return sendErr(c, err)
		}
	}
	if _, err := s.ownReservation(c.UserContext(), p, token, saleID); err != nil {
		return s.sendMaybeUnavailable(c, err)
	}
	st, err := s.update(c.UserContext(), token, "cancel", domain.UpdateCancel, domain.CancelRequest{Reason: "user"})
	switch {
	case err == nil:
		if st.Status == domain.StatusCancelled {
			s.cache.dropMark(saleID) // the unit is back on sale
		}
		return c.JSON(stateView(st))
	case errors.Is(err, errWorkflowClosed):
		r, derr := s.dbReservation(c.UserContext(), token)
		if derr != nil {
			return unavailable(c, 1, "reservation store unavailable")
		}
		if r != nil && r.Status == domain.StatusCancelled {
			return c.JSON(r.View())
		}
		return sendError(c, domain.ENotCancellable, "the reservation can no longer be cancelled")
	}
	return s.sendMaybeUnavailable(c, err)
}

func (s *server) sendMaybeUnavailable(c *fiber.Ctx, err error) error {
	if domain.ErrorCode(err) == domain.EUnavailable {
		return unavailable(c, 1, domain.ErrorMessage(err))
	}
	return sendErr(c, err)
}

var errWorkflowClosed = errors.New("order workflow closed or not found")

// update runs an update on the reservation's workflow and waits for its result.
func (s *server) update(ctx context.Context, token, updateID, name string, arg any) (domain.OrderState, error) {
	var st domain.OrderState
	if s.temporal == nil {
		return st, domain.Errorf(domain.EUnavailable, "workflow service unavailable")
	}
	ctx, cancel := context.WithTimeout(ctx, updateTimeout)
	defer cancel()
	h, err := s.temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   domain.OrderWorkflowID(token),
		UpdateID:     updateID,
		UpdateName:   name,
		Args:         []any{arg},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = h.Get(ctx, &st)
	}
	if err == nil {
		return st, nil
	}
	return st, s.updateError(token, err)
}

// updateError classifies an update failure: a validator or handler refusal,
// a closed workflow (answered from the database), or Temporal unavailable.
func (s *server) updateError(token string, err error) error {
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) || strings.Contains(err.Error(), "workflow execution already completed") {
		return errWorkflowClosed
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		msg, typ := appErr.Message(), appErr.Type()
		switch {
		case strings.HasPrefix(msg, domain.ENotPayable) || typ == domain.ErrTypeNotPayable:
			return domain.Errorf(domain.ENotPayable, "the reservation is not awaiting payment")
		case strings.HasPrefix(msg, domain.ENotCancellable) || typ == domain.ErrTypeNotCancellable:
			return domain.Errorf(domain.ENotCancellable, "the reservation can no longer be cancelled")
		}
	}
	s.logger.Warn("order workflow update failed", "token", token, "err", err)
	return domain.Errorf(domain.EUnavailable, "workflow service unavailable, retry")
}

func stateView(st domain.OrderState) domain.ReservationView {
	r := domain.Reservation{Token: st.Token, SaleID: st.SaleID, Status: st.Status, OrderNo: st.OrderNo, AmountCents: st.AmountCents, PayBy: st.PayBy}
	return r.View()
}

// GET /api/v1/sales/{sale_id}
func (s *server) getSale(c *fiber.Ctx) error {
	id, err := saleIDParam(c, "sale_id")
	if err != nil {
		return sendErr(c, err)
	}
	e, err := s.cache.get(c.UserContext(), id)
	if err != nil {
		return s.saleLookupError(c, err)
	}
	return c.JSON(e.sale.Load().View(time.Now(), e.stockLeft.Load()))
}

func (s *server) saleLookupError(c *fiber.Ctx, err error) error {
	if domain.ErrorCode(err) == domain.ENotFound {
		return sendErr(c, err)
	}
	s.logger.Warn("sale lookup", "err", err)
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
