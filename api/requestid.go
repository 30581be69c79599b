package api

import (
	"log/slog"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/internal/reqid"
	"github.com/seckill/seckill/internal/telemetry"
)

// requestID gives every request an id: the client's X-Request-Id when it is
// 1 to 64 of [A-Za-z0-9_-], else a new one. It is returned in the answer's
// X-Request-Id, logged with every line of the request (s.log) and carried
// into the workflows the request starts (reqid.Propagator).
func requestID(c *fiber.Ctx) error {
	// The request's context is the id's one home: its log lines and the
	// calls made with it (workflow starts and updates, background work it
	// hands on) read it there.
	if id := c.Get(reqid.Header); reqid.Valid(id) {
		// fasthttp reuses the header's bytes after the request.
		id = strings.Clone(id)
		c.SetUserContext(reqid.With(c.UserContext(), id))
		c.Set(reqid.Header, id)
		return c.Next()
	}
	var buf [32]byte
	ctx, id := reqid.Fresh(c.UserContext(), buf[:0])
	c.SetUserContext(ctx)
	c.Response().Header.SetBytesV(reqid.Header, id)
	return c.Next()
}

// log is the logger of one request: its id and, once authenticated, who
// asks (user_id, or for an admin the operator's subject, operator, and
// admin_user_id when the token names a user id).
func (s *server) log(c *fiber.Ctx) *slog.Logger {
	return requestLogger(s.logger, c)
}

func requestLogger(logger *slog.Logger, c *fiber.Ctx) *slog.Logger {
	attrs := make([]any, 0, 6)
	attrs = append(attrs, reqid.LogKey, reqid.From(c.UserContext()))
	if p, ok := c.Locals(principalKey).(auth.Principal); ok {
		if p.Admin {
			if p.UserID > 0 {
				attrs = append(attrs, "admin_user_id", p.UserID)
			}
			attrs = append(attrs, "operator", p.Subject)
		} else {
			attrs = append(attrs, "user_id", p.UserID)
		}
	}
	for _, a := range telemetry.TraceAttrs(c.UserContext()) {
		attrs = append(attrs, a)
	}
	return logger.With(attrs...)
}
