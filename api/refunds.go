package api

import (
	"context"

	"github.com/gofiber/fiber/v2"

	"github.com/seckill/seckill/store"
)

// GET /admin/v1/refunds?sale_id=: recorded refunds, newest first (of one
// sale when sale_id is given), at most listLimit.
func (s *server) listRefunds(c *fiber.Ctx) error {
	saleID, err := optionalSaleID(c)
	if err != nil {
		return sendErr(c, err)
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), dbTimeout)
	defer cancel()
	rs, err := s.st.ListRefunds(ctx, saleID, listLimit)
	if err != nil {
		s.log(c).Warn("list refunds", "err", err)
		return unavailable(c, 1, "refund store unavailable")
	}
	if rs == nil {
		rs = []store.Refund{}
	}
	return c.JSON(fiber.Map{"refunds": rs})
}
