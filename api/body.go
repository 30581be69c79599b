package api

import (
	"github.com/gofiber/fiber/v2"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/strictjson"
)

// jsonBody is the request's body, or 415 when a non-empty body is not
// declared application/json.
func jsonBody(c *fiber.Ctx) ([]byte, error) {
	// The raw body: Fiber's Body() would inflate a Content-Encoding past
	// the 8 KiB limit.
	body := c.BodyRaw()
	if len(body) > 0 && !strictjson.IsJSONContentType(c.Request().Header.ContentType()) {
		return nil, domain.Errorf(domain.EUnsupportedMediaType, "request body must be application/json")
	}
	return body, nil
}

// decodeBody reads the request's JSON body strictly (internal/strictjson)
// into v.
func decodeBody(c *fiber.Ctx, v any) error {
	body, err := jsonBody(c)
	if err != nil {
		return err
	}
	return strictjson.Decode(body, v)
}
