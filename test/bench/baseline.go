package bench

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/redisgateway"
)

// BaselineApp is the in-stock scenario's baseline: a bare Fiber handler
// that runs one EVALSHA of the very reserve script on the same key layout,
// with none of the API's auth, filters, limits or workflow start. The user
// comes from the X-Bench-User header, the request id from X-Bench-Request.
// GET /status/{token} is the status polls' baseline: one EVALSHA of the
// status read script.
func BaselineApp(rdb redis.UniversalClient, saleID int64, epoch int64) *fiber.App {
	script := redis.NewScript(redisgateway.ReserveSource())
	keys := redisgateway.ReserveKeys(redisgateway.SaleKeys(saleID))
	ep := strconv.FormatInt(epoch, 10)
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Get("/healthz", func(c *fiber.Ctx) error { return c.SendString("ok") })
	// The status polls' baseline (scenario 6): one EVALSHA of the status
	// read script, its record returned as is.
	scripts := redisgateway.New()
	app.Get("/status/:token", func(c *fiber.Ctx) error {
		ctx, cancel := context.WithTimeout(c.UserContext(), 250*time.Millisecond)
		defer cancel()
		got, err := scripts.ReadStatus(ctx, rdb, saleID, c.Params("token"))
		if err != nil {
			return c.Status(fiber.StatusServiceUnavailable).SendString(err.Error())
		}
		if got.Record == nil {
			return c.SendStatus(fiber.StatusNotFound)
		}
		return c.JSON(got.Record)
	})
	app.Post("/reserve", func(c *fiber.Ctx) error {
		user := c.Get("X-Bench-User")
		req := c.Get("X-Bench-Request")
		ctx, cancel := context.WithTimeout(c.UserContext(), 250*time.Millisecond)
		defer cancel()
		v, err := script.Run(ctx, rdb, keys, user, req, "bench-"+user+"-"+req, ep).Slice()
		if err != nil || len(v) < 3 { // a new hold's reply carries its number too
			return c.Status(fiber.StatusServiceUnavailable).SendString(fmt.Sprint(err))
		}
		if v[0] == redisgateway.OutcomeOK {
			return c.Status(fiber.StatusAccepted).JSON(fiber.Map{"token": v[1], "stock_left": v[2]})
		}
		return c.Status(fiber.StatusGone).JSON(fiber.Map{"outcome": v[0]})
	})
	return app
}
