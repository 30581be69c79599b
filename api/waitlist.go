package api

import (
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/seckill/seckill/salecache"
	"github.com/seckill/seckill/wire"
)

// POST /api/v1/sales/{sale_id}/waitlist
func (s *server) joinWaitlist(c *fiber.Ctx) error {
	e, err := s.cachedSale(c)
	if err != nil {
		return s.gateFailed(c, "waitlist: sale", err)
	}
	pos, err := s.svc.Waitlist.Join(c.UserContext(), e, principal(c).UserID, time.Now())
	if err != nil {
		return sendErr(c, err)
	}
	return c.JSON(wire.WaitlistPosition{SaleID: e.Sale().ID, Position: pos})
}

// GET /api/v1/sales/{sale_id}/waitlist
func (s *server) getWaitlistPosition(c *fiber.Ctx) error {
	e, err := s.cachedSale(c)
	if err != nil {
		return s.gateFailed(c, "waitlist: sale", err)
	}
	saleID := e.Sale().ID
	pos, err := s.svc.Waitlist.Position(c.UserContext(), saleID, principal(c).UserID)
	if err != nil {
		return sendErr(c, err)
	}
	return c.JSON(wire.WaitlistPosition{SaleID: saleID, Position: pos})
}

// DELETE /api/v1/sales/{sale_id}/waitlist
func (s *server) leaveWaitlist(c *fiber.Ctx) error {
	e, err := s.cachedSale(c)
	if err != nil {
		return s.gateFailed(c, "waitlist: sale", err)
	}
	if err := s.svc.Waitlist.Leave(c.UserContext(), e.Sale().ID, principal(c).UserID); err != nil {
		return sendErr(c, err)
	}
	return c.SendStatus(fiber.StatusNoContent)
}

// cachedSale is the cache entry of the path's sale (404 when unknown).
func (s *server) cachedSale(c *fiber.Ctx) (*salecache.Entry, error) {
	id, err := saleIDParam(c, "sale_id")
	if err != nil {
		return nil, err
	}
	return s.svc.Cache.Get(c.UserContext(), id)
}
