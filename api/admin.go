package api

import (
	"context"
	"errors"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/gate"
	"github.com/seckill/seckill/internal/reqid"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/orders"
	"github.com/seckill/seckill/sales"
	"github.com/seckill/seckill/store"
)

const adminTimeout = 10 * time.Second

// MaxStock is the largest stock of a sale, at creation and after any
// adjustment (the contract's 1..10000000).
const MaxStock = 10_000_000

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
	case r.Stock == nil || *r.Stock < 1 || *r.Stock > MaxStock:
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
	if err := s.st.CreateSaleOnce(ctx, sale, writeRef(c)); err != nil {
		s.log(c).Error("create sale", "err", err)
		return unavailable(c, 1, "could not create the sale")
	}
	// The answer is the stored row, not the request: what the database
	// kept (time precision, text) is what every later read serves.
	if stored, err := s.st.GetSale(ctx, sale.ID); err == nil {
		sale = stored
	} else {
		s.log(c).Warn("create sale: read back; answering from the request", "sale_id", sale.ID, "err", err)
	}
	s.cache.Put(sale)
	s.onSaleCreated(ctx, sale)
	s.log(c).Info("sale created", "sale_id", sale.ID, "stock", sale.StockTotal)
	return c.Status(fiber.StatusCreated).JSON(sale.View(time.Now(), sale.StockTotal, 0))
}

// onSaleCreated starts the sale's SaleWorkflow (warm-up ahead of the
// opening, reconciliation, tear-down) without holding up the answer; when
// Temporal is down the worker's sweeper starts it later.
func (s *server) onSaleCreated(reqCtx context.Context, sale *domain.Sale) {
	if s.temporal == nil {
		return
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		ctx, cancel := context.WithTimeout(reqid.With(context.Background(), reqid.From(reqCtx)), 10*time.Second)
		defer cancel()
		if err := orders.StartSale(ctx, s.temporal, s.cfg.TaskQueue, domain.SaleInput{SaleID: sale.ID}); err != nil {
			s.ctxLog(ctx).Warn("start sale workflow; the worker's sweeper will", "sale_id", sale.ID, "err", err)
		}
	}()
}

// adminSale loads the sale of the path, answering 404 for an unknown one.
func (s *server) adminSale(ctx context.Context, c *fiber.Ctx) (*domain.Sale, error) {
	id, err := saleIDParam(c, "sale_id")
	if err != nil {
		return nil, err
	}
	sale, err := s.st.GetSale(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, domain.Errorf(domain.ENotFound, "no such sale")
	}
	if err != nil {
		s.log(c).Error("admin: get sale", "sale_id", id, "err", err)
		return nil, domain.Unavailable("database unavailable")
	}
	return sale, nil
}

// POST /admin/v1/sales/{sale_id}/warmup
func (s *server) warmup(c *fiber.Ctx) error {
	ctx, cancel := context.WithTimeout(c.UserContext(), adminTimeout)
	defer cancel()
	sale, err := s.adminSale(ctx, c)
	if err != nil {
		return sendErr(c, err)
	}
	outcome, redisStock, err := sales.Warmup(ctx, s.st, s.rdb, s.temporal, sale.ID)
	if err != nil {
		s.log(c).Error("warmup", "sale_id", sale.ID, "err", err)
		return unavailable(c, 1, "warm-up failed; retry")
	}
	if outcome == lua.WarmupAlreadyLive {
		return sendError(c, domain.EAlreadyLive, "the sale has taken reservations; warm-up would reset it")
	}
	e := s.cache.Put(sale)
	e.Warmed(redisStock)
	s.log(c).Info("sale warmed", "sale_id", sale.ID, "redis_stock", redisStock)
	return c.JSON(fiber.Map{"sale_id": sale.ID, "redis_stock": redisStock})
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
		sale, err := sales.SetControl(ctx, s.st, s.rdb, id, to)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return sendError(c, domain.ENotFound, "no such sale")
		case errors.Is(err, sales.ErrRedisBehind):
			// Committed: the database holds the decision; this instance
			// enforces it at once from its cache, others within a second,
			// and Redis follows (here in the background, and by the worker).
			s.log(c).Warn("set sale control in redis; following", "sale_id", id, "err", err)
			s.follow(func(ctx context.Context) error { return sales.FollowControl(ctx, s.st, s.rdb, id) })
		case err != nil:
			s.log(c).Error("set sale control", "sale_id", id, "err", err)
			return unavailable(c, 1, "database unavailable")
		}
		e := s.cache.Put(sale)
		s.log(c).Info("sale control", "sale_id", id, "control", to)
		return c.JSON(sale.View(time.Now(), e.StockLeft(), e.Waiting()))
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
	if req.Delta == nil || *req.Delta == 0 || *req.Delta < -MaxStock || *req.Delta > MaxStock {
		return sendError(c, domain.EInvalid, "delta: required, a non-zero integer within -10000000..10000000")
	}
	delta := *req.Delta
	ctx, cancel := context.WithTimeout(c.UserContext(), adminTimeout)
	defer cancel()
	before, err := s.adminSale(ctx, c)
	if err != nil {
		return sendErr(c, err)
	}
	if before.StockTotal+delta > MaxStock {
		return sendError(c, domain.EInvalid, "delta: the stock would exceed 10000000")
	}
	err = sales.AdjustStock(ctx, s.st, s.rdb, id, delta, writeRef(c))
	if err != nil && err != store.ErrInsufficient {
		// A bare refusal is an answer; anything else is logged (also a
		// refused withdrawal whose units did not go back to Redis).
		s.log(c).Error("adjust stock", "sale_id", id, "delta", delta, "err", err)
	}
	switch {
	case errors.Is(err, store.ErrInsufficient):
		return sendErr(c, store.ErrInsufficient)
	case errors.Is(err, sales.ErrRedisBehind):
		// Committed: the answer is 200, and Redis follows from the
		// pending row (here in the background, and by the worker).
		s.follow(func(ctx context.Context) error {
			if _, err := sales.FollowStock(ctx, s.st, s.rdb, id); err != nil {
				return err
			}
			s.cache.DropMark(id)
			return nil
		})
	case errors.Is(err, sales.ErrRedis):
		return unavailable(c, 1, "redis unavailable")
	case err != nil:
		return unavailable(c, 1, "database unavailable")
	}
	if delta > 0 {
		s.cache.DropMark(id)
	}
	sale, err := s.st.GetSale(ctx, id)
	if err != nil {
		// Committed: answer from what was read before, moved by delta.
		s.log(c).Warn("get sale after adjust; answering from the earlier read", "sale_id", id, "err", err)
		sale, sale.StockTotal = before, before.StockTotal+delta
	}
	e := s.cache.Put(sale)
	e.SetStock(s.cache.ReadStock(ctx, id))
	s.log(c).Info("stock adjusted", "sale_id", id, "delta", delta)
	return c.JSON(sale.View(time.Now(), e.StockLeft(), e.Waiting()))
}

// follow retries fn in the background until it succeeds (or followFor
// passes, or the server stops: the worker's follower goes on), so a short
// Redis pause heals without an operator.
func (s *server) follow(fn func(ctx context.Context) error) {
	s.bg.Go(func() {
		deadline := time.Now().Add(followFor)
		for wait := 100 * time.Millisecond; time.Now().Before(deadline); wait = min(2*wait, 5*time.Second) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			err := fn(ctx)
			cancel()
			if err == nil {
				return
			}
			select {
			case <-s.stop:
				return
			case <-time.After(wait):
			}
		}
	})
}

// followFor bounds the API's own retries of a pending stock addition.
const followFor = 2 * time.Minute

// PUT|DELETE /admin/v1/blacklist/{user_id}
func (s *server) blacklist(on bool) fiber.Handler {
	return func(c *fiber.Ctx) error {
		uid, ok := parsePositiveID(c.Params("user_id"))
		if !ok {
			return sendError(c, domain.ENotFound, "no such user")
		}
		ctx, cancel := context.WithTimeout(c.UserContext(), adminTimeout)
		defer cancel()
		if err := s.st.SetBlacklisted(ctx, uid, on); err != nil {
			s.log(c).Error("blacklist", "user_id", uid, "err", err)
			return unavailable(c, 1, "database unavailable")
		}
		s.cache.SetBlacklisted(uid, on)
		return c.SendStatus(fiber.StatusNoContent)
	}
}
