// Package idempotency makes an HTTP write answer a repeat of its
// Idempotency-Key with the first answer (contract 1.2, admin writes).
// Keys are scoped per caller and route (the path, with its ids). The first
// request claims the key in the database before it writes; a concurrent
// repeat waits for its answer, then is refused (409). Answers below 500
// are kept; a 5xx means nothing was committed, so the key is released for
// the retry.
package idempotency

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/reqid"
	"github.com/seckill/seckill/store"
)

// Header is the request header that carries the key.
const Header = "Idempotency-Key"

const maxKey = 128

// Keys keep the claims and the kept answers (store.Store in production).
type Keys interface {
	ClaimKey(ctx context.Context, scope, bodyHash []byte, staleAfter time.Duration) (store.KeyClaim, error)
	FinishKey(ctx context.Context, scope []byte, status int, response []byte) error
	ReleaseKey(ctx context.Context, scope []byte) error
}

// Middleware wraps the writes that take an Idempotency-Key.
type Middleware struct {
	keys Keys
	// caller is the scope's owner of a request (the admin's user id).
	caller func(*fiber.Ctx) int64
	// write is a write's own time bound: a repeat waits for the first
	// answer that long plus a margin, and keeping the answer gets as long.
	write  time.Duration
	logger *slog.Logger
}

// New is the middleware over keys, for writes bounded by write.
func New(keys Keys, caller func(*fiber.Ctx) int64, write time.Duration, logger *slog.Logger) *Middleware {
	return &Middleware{keys: keys, caller: caller, write: write, logger: logger}
}

// inFlightWait is how long a repeat waits for the first request of its key
// to answer before it is refused.
func (m *Middleware) inFlightWait() time.Duration { return m.write + 2*time.Second }

// staleAfter is when a claim still in flight belongs to an instance that
// died: a repeat then runs the write again, safe because the write runs
// under the key's ref.
func (m *Middleware) staleAfter() time.Duration { return 2 * m.inFlightWait() }

// refKey is the Locals key of the write's ref.
type refKey struct{}

// Ref is the ref of the current write derived from its Idempotency-Key, or
// "" without one (a fresh write).
func Ref(c *fiber.Ctx) string {
	ref, _ := c.Locals(refKey{}).(string)
	return ref
}

// Wrap answers repeats of h's keys with h's first answer.
func (m *Middleware) Wrap(h fiber.Handler) fiber.Handler {
	return func(c *fiber.Ctx) error {
		vals := c.Request().Header.PeekAll(Header)
		if len(vals) == 0 {
			return h(c)
		}
		if len(vals) > 1 || !validKey(vals[0]) {
			return domain.Errorf(domain.EInvalid, "Idempotency-Key: 1..128 visible ASCII characters, once")
		}
		scope := Scope(m.caller(c), c.Method(), c.Path(), string(vals[0]))
		hash := bodyHash(c.BodyRaw())
		ctx, cancel := context.WithTimeout(c.UserContext(), m.inFlightWait())
		defer cancel()
		for {
			claim, err := m.keys.ClaimKey(ctx, scope, hash, m.staleAfter())
			switch {
			case err != nil:
				reqid.Logger(c.UserContext(), m.logger).Error("idempotency key: claim", "err", err)
				return domain.Unavailable("database unavailable")
			case claim.Reused:
				return domain.Errorf(domain.EIdempotencyReused, "this Idempotency-Key was used with another body")
			case claim.Status != 0:
				c.Set("Idempotent-Replayed", "true")
				c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
				return c.Status(claim.Status).Send(claim.Response)
			case claim.Owned:
				c.Locals(refKey{}, "idem-"+hex.EncodeToString(scope[:16]))
				return m.runClaimed(c, h, scope)
			}
			select {
			case <-ctx.Done():
				return domain.Errorf(domain.EIdempotencyReused, "a request with this Idempotency-Key is still in flight; retry")
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// runClaimed runs the write of a claimed key and keeps its answer.
func (m *Middleware) runClaimed(c *fiber.Ctx, h fiber.Handler, scope []byte) error {
	herr := h(c)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.UserContext()), m.write)
	defer cancel()
	status := c.Response().StatusCode()
	var err error
	if herr != nil || status >= 500 {
		err = m.keys.ReleaseKey(ctx, scope)
	} else {
		err = m.keys.FinishKey(ctx, scope, status, bytes.Clone(c.Response().Body()))
	}
	if err != nil {
		// The claim stays in flight until staleAfter; a repeat then runs
		// the write again under the same ref.
		reqid.Logger(c.UserContext(), m.logger).Error("idempotency key: keep the answer", "err", err)
	}
	return herr
}

// validKey: 1..128 visible ASCII characters.
func validKey(k []byte) bool {
	if len(k) == 0 || len(k) > maxKey {
		return false
	}
	for _, b := range k {
		if b < 0x21 || b > 0x7e {
			return false
		}
	}
	return true
}

// bodyHash hashes the JSON body canonically (key order and white space do
// not matter; numbers keep their text); a body that is not JSON is hashed
// as sent.
func bodyHash(body []byte) []byte {
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err == nil {
		if canon, err := json.Marshal(v); err == nil {
			body = canon
		}
	}
	sum := sha256.Sum256(body)
	return sum[:]
}

// Scope hashes a key's scope: the caller, the route (the path, with its
// ids, as the router matches it) and the key.
func Scope(caller int64, method, path, key string) []byte {
	path = strings.ToLower(strings.TrimSuffix(path, "/"))
	sum := sha256.Sum256(fmt.Appendf(nil, "%d\x00%s\x00%s\x00%s", caller, method, path, key))
	return sum[:]
}
