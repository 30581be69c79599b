package api

import (
	"context"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/idempotency"
)

const adminTimeout = 10 * time.Second

// POST /admin/v1/sales
func (s *server) createSale(c *fiber.Ctx) error {
	var spec domain.SaleSpec
	if err := decodeBody(c, &spec); err != nil {
		return sendErr(c, err)
	}
	sale, err := domain.NewSale(spec)
	if err != nil {
		return sendErr(c, err)
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), adminTimeout)
	defer cancel()
	if sale, err = s.svc.Operator.Create(ctx, sale, idempotency.Ref(c)); err != nil {
		return sendErr(c, err)
	}
	c.Locals(auditSaleKey{}, sale.ID)
	return c.Status(fiber.StatusCreated).JSON(sale.View(time.Now(), sale.StockTotal, 0))
}

// POST /admin/v1/sales/{sale_id}/warmup
func (s *server) warmup(c *fiber.Ctx) error {
	id, err := saleIDParam(c, "sale_id")
	if err != nil {
		return sendErr(c, err)
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), adminTimeout)
	defer cancel()
	redisStock, err := s.svc.Operator.Warmup(ctx, id)
	if err != nil {
		return sendErr(c, err)
	}
	return c.JSON(fiber.Map{"sale_id": id, "redis_stock": redisStock})
}

// POST /admin/v1/sales/{sale_id}/pause|resume|stop
func (s *server) control(to domain.SaleControl) fiber.Handler {
	return func(c *fiber.Ctx) error {
		id, err := saleIDParam(c, "sale_id")
		if err != nil {
			return sendErr(c, err)
		}
		ctx, cancel := context.WithTimeout(c.UserContext(), adminTimeout)
		defer cancel()
		v, err := s.svc.Operator.SetControl(ctx, id, to)
		if err != nil {
			return sendErr(c, err)
		}
		return c.JSON(v)
	}
}

// POST /admin/v1/sales/{sale_id}/stock
func (s *server) adjustStock(c *fiber.Ctx) error {
	id, err := saleIDParam(c, "sale_id")
	if err != nil {
		return sendErr(c, err)
	}
	var req domain.StockChange
	if err := decodeBody(c, &req); err != nil {
		return sendErr(c, err)
	}
	if err := req.Validate(); err != nil {
		return sendErr(c, err)
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), adminTimeout)
	defer cancel()
	v, err := s.svc.Operator.AdjustStock(ctx, id, *req.Delta, idempotency.Ref(c))
	if err != nil {
		return sendErr(c, err)
	}
	return c.JSON(v)
}

// PUT|DELETE /admin/v1/blacklist/{user_id}
func (s *server) blacklist(on bool) fiber.Handler {
	return func(c *fiber.Ctx) error {
		uid, ok := domain.ParseID(c.Params("user_id"))
		if !ok {
			return sendError(c, domain.ENotFound, "no such user")
		}
		ctx, cancel := context.WithTimeout(c.UserContext(), adminTimeout)
		defer cancel()
		if err := s.svc.Operator.Blacklist(ctx, uid, on); err != nil {
			return sendErr(c, err)
		}
		return c.SendStatus(fiber.StatusNoContent)
	}
}
