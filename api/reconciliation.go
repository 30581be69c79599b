package api

import (
	"github.com/gofiber/fiber/v2"

	"github.com/seckill/seckill/domain"
)

// GET /admin/v1/sales/{sale_id}/reconciliation[?repair=true]
//
// A fresh two-pass reconciliation (backend.Services.Reconcile): it only
// reports unless repair=true.
func (s *server) reconciliation(c *fiber.Ctx) error {
	var repair bool
	switch c.Query("repair") {
	case "", "false", "0":
	case "true", "1":
		repair = true
	default:
		return sendError(c, domain.EInvalid, "repair: true or false")
	}
	id, err := saleIDParam(c, "sale_id")
	if err != nil {
		return sendErr(c, err)
	}
	rep, err := s.svc.Reconcile(c.UserContext(), id, repair)
	if err != nil {
		return sendErr(c, err)
	}
	return c.JSON(rep)
}
