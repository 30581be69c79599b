package api

import (
	"context"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/gate"
	"github.com/seckill/seckill/internal/idempotency"
)

const adminTimeout = 10 * time.Second

type createSaleRequest struct {
	GoodsID              *int64     `json:"goods_id"`
	Title                *string    `json:"title"`
	PriceCents           *int64     `json:"price_cents"`
	Stock                *int64     `json:"stock"`
	Buckets              *int       `json:"buckets"`
	StartsAt             *time.Time `json:"starts_at"`
	EndsAt               *time.Time `json:"ends_at"`
	PaymentWindowSeconds *int       `json:"payment_window_seconds"`
	PerUserLimit         *int       `json:"per_user_limit"`
	ChallengeDifficulty  *int64     `json:"challenge_difficulty"`
}

func invalidField(field, rule string) error {
	return domain.Errorf(domain.EInvalid, "%s: %s", field, rule)
}

// saleFromRequest validates every field, naming the first bad one.
func saleFromRequest(r *createSaleRequest) (*domain.Sale, error) {
	s := &domain.Sale{Buckets: 16, PaymentWindowSeconds: 900, PerUserLimit: 1}
	switch {
	case r.GoodsID == nil || *r.GoodsID <= 0:
		return nil, invalidField("goods_id", "required, a positive integer")
	case r.Title == nil || len(*r.Title) == 0 || len(*r.Title) > 200:
		return nil, invalidField("title", "required, 1..200 bytes")
	case r.PriceCents == nil || *r.PriceCents < 0:
		return nil, invalidField("price_cents", "required, a non-negative integer")
	case r.Stock == nil || *r.Stock < 1 || *r.Stock > domain.MaxStock:
		return nil, invalidField("stock", "required, 1..10000000")
	case r.Buckets != nil && (*r.Buckets < 1 || *r.Buckets > 1024):
		return nil, invalidField("buckets", "1..1024")
	case r.StartsAt == nil:
		return nil, invalidField("starts_at", "required, RFC 3339")
	case r.EndsAt == nil:
		return nil, invalidField("ends_at", "required, RFC 3339")
	case !r.EndsAt.After(*r.StartsAt):
		return nil, invalidField("ends_at", "must be after starts_at")
	case r.PaymentWindowSeconds != nil && (*r.PaymentWindowSeconds < 1 || *r.PaymentWindowSeconds > 86400):
		return nil, invalidField("payment_window_seconds", "1..86400")
	case r.PerUserLimit != nil && *r.PerUserLimit != 1:
		return nil, invalidField("per_user_limit", "only 1 is supported")
	case r.ChallengeDifficulty != nil && (*r.ChallengeDifficulty < 0 || *r.ChallengeDifficulty > gate.MaxDifficulty):
		return nil, invalidField("challenge_difficulty", "0..10000000")
	}
	s.GoodsID, s.Title, s.PriceCents, s.StockTotal = *r.GoodsID, *r.Title, *r.PriceCents, *r.Stock
	s.StartsAt, s.EndsAt = r.StartsAt.UTC(), r.EndsAt.UTC()
	if r.Buckets != nil {
		s.Buckets = *r.Buckets
	}
	if r.PaymentWindowSeconds != nil {
		s.PaymentWindowSeconds = *r.PaymentWindowSeconds
	}
	if r.ChallengeDifficulty != nil {
		s.ChallengeDifficulty = *r.ChallengeDifficulty
	}
	return s, nil
}

// POST /admin/v1/sales
func (s *server) createSale(c *fiber.Ctx) error {
	var req createSaleRequest
	if err := decodeBody(c, &req); err != nil {
		return sendErr(c, err)
	}
	sale, err := saleFromRequest(&req)
	if err != nil {
		return sendErr(c, err)
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), adminTimeout)
	defer cancel()
	if sale, err = s.operator.Create(ctx, sale, idempotency.Ref(c)); err != nil {
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
	redisStock, err := s.operator.Warmup(ctx, id)
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
		v, err := s.operator.SetControl(ctx, id, to)
		if err != nil {
			return sendErr(c, err)
		}
		return c.JSON(v)
	}
}

type stockRequest struct {
	Delta *int64 `json:"delta"`
}

// POST /admin/v1/sales/{sale_id}/stock
func (s *server) adjustStock(c *fiber.Ctx) error {
	id, err := saleIDParam(c, "sale_id")
	if err != nil {
		return sendErr(c, err)
	}
	var req stockRequest
	if err := decodeBody(c, &req); err != nil {
		return sendErr(c, err)
	}
	if req.Delta == nil || *req.Delta == 0 || *req.Delta < -domain.MaxStock || *req.Delta > domain.MaxStock {
		return sendError(c, domain.EInvalid, "delta: required, a non-zero integer within -10000000..10000000")
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), adminTimeout)
	defer cancel()
	v, err := s.operator.AdjustStock(ctx, id, *req.Delta, idempotency.Ref(c))
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
		if err := s.operator.Blacklist(ctx, uid, on); err != nil {
			return sendErr(c, err)
		}
		return c.SendStatus(fiber.StatusNoContent)
	}
}
