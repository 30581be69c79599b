package api

import (
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/sales"
	"github.com/seckill/seckill/wire"
)

// listingMaxAge is how long a shared cache may keep a storefront page:
// its stock may lag by a second anyway.
const listingMaxAge = "public, max-age=1"

// GET /api/v1/sales?status=&sort=&cursor=&limit=: a page of the sales a
// buyer can see (started and upcoming), each as GET /api/v1/sales/{id}
// shows it, with the next page's cursor.
func (s *server) listStorefront(c *fiber.Ctx) error {
	if err := queryOnce(c, "status", "sort", "cursor", "limit"); err != nil {
		return sendErr(c, err)
	}
	q := sales.PageQuery{Status: c.Query("status"), Sort: c.Query("sort"), Cursor: c.Query("cursor"), Limit: c.Query("limit")}
	page, err := s.svc.Listing.Storefront(c.UserContext(), q, time.Now())
	if err != nil {
		return sendErr(c, err)
	}
	c.Set(fiber.HeaderCacheControl, listingMaxAge)
	return c.JSON(wire.SalePage{Sales: page.Sales, NextCursor: page.NextCursor})
}

// queryOnce refuses a query parameter of names given more than once:
// which one counts would be a guess.
func queryOnce(c *fiber.Ctx, names ...string) error {
	args := c.Context().QueryArgs()
	for _, n := range names {
		if len(args.PeekMulti(n)) > 1 {
			return domain.Errorf(domain.EInvalid, "%s must be given once", n)
		}
	}
	return nil
}
