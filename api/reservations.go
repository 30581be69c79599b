package api

import (
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/wire"
)

// listLimit is the most a list answers.
const listLimit = 100

// tokenParam reads a well-formed reservation token from the path, else 404.
func tokenParam(c *fiber.Ctx) (string, int64, error) {
	tok := c.Params("token")
	saleID, ok := domain.ParseToken(tok)
	if !ok {
		return "", 0, domain.ErrNoReservation
	}
	return strings.Clone(tok), saleID, nil
}

// GET /api/v1/reservations/{token}: answered from Redis and the
// in-process cache (status.Reader); only the owner sees it.
func (s *server) getReservation(c *fiber.Ctx) error {
	p := principal(c)
	token, saleID, err := tokenParam(c)
	if err != nil {
		return sendErr(c, err)
	}
	v, err := s.svc.Reads.Read(c.UserContext(), p.UserID, token, saleID)
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
		if views, ok := s.svc.Reads.List(c.UserContext(), p.UserID, saleID, listLimit); ok {
			return c.JSON(wire.ReservationList{Reservations: views})
		}
	}
	views, err := s.svc.Orders.List(c.UserContext(), p.UserID, saleID, listLimit)
	if err != nil {
		return sendErr(c, err)
	}
	return c.JSON(wire.ReservationList{Reservations: views})
}

type payRequest struct {
	PaymentRef *string `json:"payment_ref"`
}

// POST /api/v1/reservations/{token}/payment
func (s *server) pay(c *fiber.Ctx) error {
	received := time.Now()
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
	v, err := s.svc.Orders.Pay(c.UserContext(), principal(c).UserID, token, saleID, domain.PayRequest{PaymentRef: *req.PaymentRef, ReceivedAt: received})
	if err != nil {
		return sendErr(c, err)
	}
	return c.JSON(v)
}

// POST /api/v1/reservations/{token}/cancel
func (s *server) cancel(c *fiber.Ctx) error {
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
	v, err := s.svc.Orders.Cancel(c.UserContext(), principal(c).UserID, token, saleID)
	if err != nil {
		return sendErr(c, err)
	}
	return c.JSON(v)
}

// GET /api/v1/sales/{sale_id}
func (s *server) getSale(c *fiber.Ctx) error {
	id, err := saleIDParam(c, "sale_id")
	if err != nil {
		return sendErr(c, err)
	}
	e, err := s.svc.Cache.Get(c.UserContext(), id)
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
	id, ok := domain.ParseID(raw)
	if !ok {
		return 0, domain.Errorf(domain.EInvalid, "sale_id must be a positive integer")
	}
	return id, nil
}
