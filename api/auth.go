package api

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/utils"
	"github.com/golang-jwt/jwt/v5"
	"github.com/valyala/fasthttp"

	"github.com/seckill/seckill/domain"
)

// Principal is the verified caller.
type Principal struct {
	UserID int64
	Admin  bool
	// Expires is the token's exp: a long event stream ends then.
	Expires time.Time
}

var errBadToken = errors.New("invalid token")

// VerifyToken checks a bearer JWT: HS256 only, exp required, sub a positive
// decimal user id, role absent, "user" or "admin".
func VerifyToken(secret []byte, raw string) (Principal, error) {
	p, _, err := verifyToken(secret, raw)
	return p, err
}

func verifyToken(secret []byte, raw string) (Principal, time.Time, error) {
	return parseToken(raw, func(*jwt.Token) (any, error) { return secret, nil }, "sub", roleOfOwnToken,
		jwt.WithValidMethods([]string{"HS256"}), jwt.WithExpirationRequired())
}

// roleOfOwnToken reads the "role" claim of the project's own HS256
// tokens: absent or "user", or "admin"; anything else is refused.
func roleOfOwnToken(claims jwt.MapClaims) (admin, ok bool) {
	switch role, present := claims["role"]; {
	case !present, role == "user":
		return false, true
	case role == "admin":
		return true, true
	}
	return false, false
}

// parseToken verifies raw with key and opts and reads the principal: the
// user id from userClaim, the role by role.
func parseToken(raw string, key jwt.Keyfunc, userClaim string, role func(jwt.MapClaims) (admin, ok bool), opts ...jwt.ParserOption) (Principal, time.Time, error) {
	claims := jwt.MapClaims{}
	if _, err := jwt.ParseWithClaims(raw, claims, key, opts...); err != nil {
		return Principal{}, time.Time{}, errBadToken
	}
	sub, ok := claims[userClaim].(string)
	if !ok {
		return Principal{}, time.Time{}, errBadToken
	}
	id, ok := parsePositiveID(sub)
	if !ok {
		return Principal{}, time.Time{}, errBadToken
	}
	p := Principal{UserID: id}
	if p.Admin, ok = role(claims); !ok {
		return Principal{}, time.Time{}, errBadToken
	}
	exp, err := claims.GetExpirationTime()
	if err != nil || exp == nil {
		return Principal{}, time.Time{}, errBadToken
	}
	return p, exp.Time, nil
}

// verifiedTokens remembers tokens already verified until they expire, so a
// user retrying in a flash sale costs a map lookup instead of an HMAC and a
// JSON parse. The key is the whole token, signature included: only the
// exact bytes that verified before are trusted. The cache is bounded: when
// full it starts over.
//
// A burst of distinct users misses on every request, so every request
// writes. Behind one mutex those writes formed a convoy on a fresh API's
// first burst (the lock starved, each unlock handed it to a waiter through
// the scheduler): in the runtime's scheduling-latency profile 90% of the
// request goroutines' delay was that unlock, and the reserve script calls
// waiting behind it outlasted SECKILL_REDIS_TIMEOUT, opening the breaker.
// sync.Map writes lock only their own part of its trie.
type verifiedTokens struct {
	entries sync.Map // token → verifiedToken
	n       atomic.Int64
	max     int64
}

type verifiedToken struct {
	p   Principal
	exp time.Time
}

func newVerifiedTokens(max int) *verifiedTokens {
	return &verifiedTokens{max: int64(max)}
}

// tokenSecrets are the HS256 secrets of the two signers, each current
// first then the previous one during a rotation.
type tokenSecrets struct {
	user, admin [][]byte
	idp         *IdentityProvider // user tokens from an identity provider; nil: none
}

// check verifies raw by its signer: a user-signed token claiming role admin
// is refused (401, not 403: its signer had no right to say it), and an
// admin-signed token must claim role admin.
func (k tokenSecrets) check(raw string) (Principal, time.Time, error) {
	for _, secret := range k.user {
		if p, exp, err := verifyToken(secret, raw); err == nil {
			if p.Admin {
				return Principal{}, time.Time{}, errBadToken
			}
			return p, exp, nil
		}
	}
	for _, secret := range k.admin {
		if p, exp, err := verifyToken(secret, raw); err == nil && p.Admin {
			return p, exp, nil
		}
	}
	if k.idp != nil {
		if p, exp, err := k.idp.verify(raw); err == nil && !p.Admin {
			return p, exp, nil
		}
	}
	return Principal{}, time.Time{}, errBadToken
}

// verify answers from the cache or verifies and remembers.
func (v *verifiedTokens) verify(keys tokenSecrets, raw string, now time.Time) (Principal, error) {
	if e, ok := v.entries.Load(raw); ok {
		if t := e.(verifiedToken); now.Before(t.exp) {
			return t.p, nil
		}
	}
	p, exp, err := keys.check(raw)
	if err != nil {
		return Principal{}, err
	}
	if !now.Before(exp) {
		return Principal{}, errBadToken
	}
	// The count is approximate under concurrent misses; it only bounds
	// memory.
	if v.n.Add(1) > v.max {
		v.entries.Clear()
		v.n.Store(1)
	}
	// The header's bytes belong to the request buffer: keep a copy.
	p.Expires = exp
	v.entries.Store(strings.Clone(raw), verifiedToken{p: p, exp: exp})
	return p, nil
}

// parsePositiveID accepts only [1-9][0-9]* that fits an int64.
func parsePositiveID(s string) (int64, bool) {
	if len(s) == 0 || len(s) > 19 || s[0] < '1' || s[0] > '9' {
		return 0, false
	}
	for i := 1; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, false
	}
	return n, true
}

const principalKey = "seckill.principal"

// bearer checks an Authorization header value: the principal, or the
// refusal's code and message.
func (s *server) bearer(h string, admin bool) (Principal, string, string) {
	const prefix = "bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return Principal{}, domain.EUnauthorized, "missing or malformed bearer token"
	}
	p, err := s.tokens.verify(s.jwtSecrets, strings.TrimSpace(h[len(prefix):]), time.Now())
	if err != nil {
		return Principal{}, domain.EUnauthorized, "invalid or expired token"
	}
	if admin && !p.Admin {
		return Principal{}, domain.EForbidden, "admin role required"
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

func principal(c *fiber.Ctx) Principal {
	p, _ := c.Locals(principalKey).(Principal)
	return p
}
