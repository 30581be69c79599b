package api

import (
	"bytes"
	"errors"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/utils"
	"github.com/valyala/fasthttp"

	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/domain"
)

const principalKey = "seckill.principal"

// bearer checks an Authorization header value: the principal, or the
// refusal's code and message.
func (s *server) bearer(h string, admin bool) (auth.Principal, string, string) {
	const prefix = "bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return auth.Principal{}, domain.EUnauthorized, "missing or malformed bearer token"
	}
	p, err := s.tokens.Verify(strings.TrimSpace(h[len(prefix):]), time.Now())
	switch {
	case admin && errors.Is(err, auth.ErrNotAdmin):
		return auth.Principal{}, domain.EForbidden, "admin role required"
	case err != nil:
		return auth.Principal{}, domain.EUnauthorized, "invalid or expired token"
	case admin && !p.Admin:
		return auth.Principal{}, domain.EForbidden, "admin role required"
	case !admin && p.UserID <= 0:
		// An operator of the identity provider is no user.
		return auth.Principal{}, domain.EUnauthorized, "not a user's token"
	}
	return p, "", ""
}

// authenticate is the first handler of every user and admin route. The
// same check already ran on the headers before the body was read
// (routeRefusal); this one is the route's own guard.
func (s *server) authenticate(admin bool) fiber.Handler {
	return func(c *fiber.Ctx) error {
		p, code, msg := s.bearer(c.Get(fiber.HeaderAuthorization), admin)
		if code != "" {
			return sendError(c, code, msg)
		}
		c.Locals(principalKey, p)
		return c.Next()
	}
}

// routeRefusal decides from the headers alone what a route's guard will
// decide: a missing or refused bearer token on a user or admin route,
// malformed signature headers on the payment webhook. Paths match
// case-insensitively, as the router's do.
func (s *server) routeRefusal(h *fasthttp.RequestHeader) (code, message string) {
	path := h.RequestURI()
	if i := bytes.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	switch {
	case hasPrefixFold(path, "/admin/"):
		if s.cfg.AdminAddr != "" {
			return "", "" // not on this listener: the router answers 404
		}
		_, code, message = s.bearer(utils.UnsafeString(h.Peek(fiber.HeaderAuthorization)), true)
	case hasPrefixFold(path, "/api/v1/"):
		if publicPath(path) {
			return "", ""
		}
		_, code, message = s.bearer(utils.UnsafeString(h.Peek(fiber.HeaderAuthorization)), false)
	case bytes.EqualFold(bytes.TrimSuffix(path, []byte("/")), []byte("/webhooks/payments")):
		if _, err := webhookHeaders(string(h.Peek("X-Timestamp")), string(h.Peek("X-Signature")), time.Now()); err != nil {
			return domain.ErrorCode(err), domain.ErrorMessage(err)
		}
	}
	return code, message
}

// publicPath is the one /api/v1 route without a token: the sale view
// /api/v1/sales/{sale_id}.
func publicPath(path []byte) bool {
	const sales = "/api/v1/sales/"
	if !hasPrefixFold(path, sales) {
		return false
	}
	rest := bytes.TrimSuffix(path[len(sales):], []byte("/"))
	return len(rest) > 0 && bytes.IndexByte(rest, '/') < 0
}

func hasPrefixFold(b []byte, prefix string) bool {
	return len(b) >= len(prefix) && strings.EqualFold(string(b[:len(prefix)]), prefix)
}

func principal(c *fiber.Ctx) auth.Principal {
	p, _ := c.Locals(principalKey).(auth.Principal)
	return p
}
