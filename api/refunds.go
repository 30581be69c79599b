package api

import (
	"github.com/gofiber/fiber/v2"

	"github.com/seckill/seckill/wire"
)

// GET /admin/v1/refunds?sale_id=: recorded refunds, newest first (of one
// sale when sale_id is given), at most listLimit.
func (s *server) listRefunds(c *fiber.Ctx) error {
	saleID, err := optionalSaleID(c)
	if err != nil {
		return sendErr(c, err)
	}
	rs, err := s.svc.Records.Refunds(c.UserContext(), saleID, listLimit)
	if err != nil {
		return sendErr(c, err)
	}
	return c.JSON(wire.RefundList{Refunds: rs})
}
