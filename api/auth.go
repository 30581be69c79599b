package api

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/golang-jwt/jwt/v5"

	"github.com/seckill/seckill/domain"
)

// Principal is the verified caller.
type Principal struct {
	UserID int64
	Admin  bool
}

var errBadToken = errors.New("invalid token")

// VerifyToken checks a bearer JWT: HS256 only, exp required, sub a positive
// decimal user id, role absent, "user" or "admin".
func VerifyToken(secret []byte, raw string) (Principal, error) {
	p, _, err := verifyToken(secret, raw)
	return p, err
}

func verifyToken(secret []byte, raw string) (Principal, time.Time, error) {
	claims := jwt.MapClaims{}
	_, err := jwt.ParseWithClaims(raw, claims, func(*jwt.Token) (any, error) { return secret, nil },
		jwt.WithValidMethods([]string{"HS256"}), jwt.WithExpirationRequired())
	if err != nil {
		return Principal{}, time.Time{}, errBadToken
	}
	sub, ok := claims["sub"].(string)
	if !ok {
		return Principal{}, time.Time{}, errBadToken
	}
	id, ok := parsePositiveID(sub)
	if !ok {
		return Principal{}, time.Time{}, errBadToken
	}
	p := Principal{UserID: id}
	switch role, present := claims["role"]; {
	case !present, role == "user":
	case role == "admin":
		p.Admin = true
	default:
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
type verifiedTokens struct {
	mu      sync.RWMutex
	entries map[string]verifiedToken
	max     int
}

type verifiedToken struct {
	p   Principal
	exp time.Time
}

func newVerifiedTokens(max int) *verifiedTokens {
	return &verifiedTokens{entries: make(map[string]verifiedToken), max: max}
}

// verify answers from the cache or verifies and remembers.
func (v *verifiedTokens) verify(secret []byte, raw string, now time.Time) (Principal, error) {
	v.mu.RLock()
	e, ok := v.entries[raw]
	v.mu.RUnlock()
	if ok && now.Before(e.exp) {
		return e.p, nil
	}
	p, exp, err := verifyToken(secret, raw)
	if err != nil {
		return Principal{}, err
	}
	if !now.Before(exp) {
		return Principal{}, errBadToken
	}
	v.mu.Lock()
	if len(v.entries) >= v.max {
		clear(v.entries)
	}
	// The header's bytes belong to the request buffer: keep a copy.
	v.entries[strings.Clone(raw)] = verifiedToken{p: p, exp: exp}
	v.mu.Unlock()
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

// authenticate is the first handler of every user and admin route: it runs
// before any handler reads the body. Admin routes also need role admin.
func (s *server) authenticate(admin bool) fiber.Handler {
	return func(c *fiber.Ctx) error {
		h := c.Get(fiber.HeaderAuthorization)
		const prefix = "bearer "
		if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
			return sendError(c, domain.EUnauthorized, "missing or malformed bearer token")
		}
		p, err := s.tokens.verify(s.cfg.JWTSecret, strings.TrimSpace(h[len(prefix):]), time.Now())
		if err != nil {
			return sendError(c, domain.EUnauthorized, "invalid or expired token")
		}
		if admin && !p.Admin {
			return sendError(c, domain.EForbidden, "admin role required")
		}
		c.Locals(principalKey, p)
		return c.Next()
	}
}

func principal(c *fiber.Ctx) Principal {
	p, _ := c.Locals(principalKey).(Principal)
	return p
}
