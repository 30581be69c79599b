package api

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
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
// same check already ran on the headers of a request with a body, before
// the body was read (routeRefusal): the route's guard takes the principal
// it found instead of verifying the token again.
func (s *server) authenticate(admin bool) fiber.Handler {
	return func(c *fiber.Ctx) error {
		authorization := c.Get(fiber.HeaderAuthorization)
		p, ok := s.verified.take(&c.Request().Header, authorization, admin, time.Now())
		if !ok {
			var code, msg string
			if p, code, msg = s.bearer(authorization, admin); code != "" {
				return sendError(c, code, msg)
			}
		}
		c.Locals(principalKey, p)
		return c.Next()
	}
}

// headerBearer is bearer on a request's headers for a route of admin's
// kind; the principal is kept for the route's guard (authenticate).
func (s *server) headerBearer(h *fasthttp.RequestHeader, admin bool) (code, message string) {
	authorization := h.Peek(fiber.HeaderAuthorization)
	p, code, message := s.bearer(utils.UnsafeString(authorization), admin)
	if code == "" {
		s.verified.put(h, authorization, admin, p)
	}
	return code, message
}

// headerPrincipals are the principals verified on requests' headers, by
// request header, until the route's guard takes its request's: a token is
// hashed and looked up once per request, not once per check. Only the
// request whose headers left an entry takes it: the guard compares the
// Authorization header and the kind of route, and checks the expiry
// again; an entry not taken ends with its request (wrapHandler,
// transportError) or at the next request's headers on the same context.
type headerPrincipals struct {
	n  atomic.Int64
	mu sync.Mutex
	m  map[*fasthttp.RequestHeader]*headerPrincipal
}

type headerPrincipal struct {
	p             auth.Principal
	admin         bool
	authorization []byte
}

var headerPrincipalPool = sync.Pool{New: func() any { return new(headerPrincipal) }}

// release returns e to the pool, its copy of the token wiped: like the
// token cache, the pool keeps no token to replay.
func (e *headerPrincipal) release() {
	clear(e.authorization)
	headerPrincipalPool.Put(e)
}

// put keeps p, verified on h's authorization for a route of admin's kind.
func (hp *headerPrincipals) put(h *fasthttp.RequestHeader, authorization []byte, admin bool, p auth.Principal) {
	e := headerPrincipalPool.Get().(*headerPrincipal)
	e.p, e.admin, e.authorization = p, admin, append(e.authorization[:0], authorization...)
	hp.mu.Lock()
	if hp.m == nil {
		hp.m = make(map[*fasthttp.RequestHeader]*headerPrincipal)
	}
	old, replaced := hp.m[h]
	hp.m[h] = e
	hp.mu.Unlock()
	if replaced {
		old.release()
	} else {
		hp.n.Add(1)
	}
}

// take removes h's entry and answers its principal if it was verified on
// this authorization, for a route of admin's kind, and has not expired.
func (hp *headerPrincipals) take(h *fasthttp.RequestHeader, authorization string, admin bool, now time.Time) (auth.Principal, bool) {
	e := hp.remove(h)
	if e == nil {
		return auth.Principal{}, false
	}
	p, ok := e.p, e.admin == admin && string(e.authorization) == authorization && now.Before(e.p.Expires)
	e.release()
	if !ok {
		return auth.Principal{}, false
	}
	return p, true
}

// drop forgets h's entry, if any.
func (hp *headerPrincipals) drop(h *fasthttp.RequestHeader) {
	if e := hp.remove(h); e != nil {
		e.release()
	}
}

func (hp *headerPrincipals) remove(h *fasthttp.RequestHeader) *headerPrincipal {
	if hp.n.Load() == 0 {
		return nil
	}
	hp.mu.Lock()
	e, ok := hp.m[h]
	if ok {
		delete(hp.m, h)
	}
	hp.mu.Unlock()
	if !ok {
		return nil
	}
	hp.n.Add(-1)
	return e
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
		return s.headerBearer(h, true)
	case hasPrefixFold(path, "/api/v1/"):
		if publicPath(path) {
			return "", ""
		}
		return s.headerBearer(h, false)
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
