package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/seckill/seckill/domain"
)

const (
	headerIdempotencyKey = "Idempotency-Key"
	maxIdempotencyKey    = 128
	// keyInFlightWait is how long a repeat waits for the first request of
	// its key to answer before it is refused (409): an admin write's own
	// bound plus a margin.
	keyInFlightWait = adminTimeout + 2*time.Second
	// keyStaleAfter is when a claim still in flight belongs to an instance
	// that died: a repeat then runs the write again, safe because the write
	// runs under the key's ref.
	keyStaleAfter = 2 * keyInFlightWait
)

// idempotencyRef is the Locals key of the write's ref derived from its
// Idempotency-Key ("" without one).
type idempotencyRef struct{}

// validIdempotencyKey: 1..128 visible ASCII characters.
func validIdempotencyKey(k []byte) bool {
	if len(k) == 0 || len(k) > maxIdempotencyKey {
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

// idempotencyScope hashes a key's scope: the admin, the route (the path,
// with its sale id, as the router matches it) and the key.
func idempotencyScope(admin int64, method, path, key string) []byte {
	path = strings.ToLower(strings.TrimSuffix(path, "/"))
	sum := sha256.Sum256(fmt.Appendf(nil, "%d\x00%s\x00%s\x00%s", admin, method, path, key))
	return sum[:]
}

// idempotent makes an admin write answer a repeat of its Idempotency-Key
// with the first answer. Keys are scoped per admin and route (the path,
// with its sale id). The first request claims the key in MySQL before it
// writes; a concurrent repeat waits for its answer (up to keyInFlightWait,
// then 409). Answers below 500 are kept; a 5xx means nothing was
// committed, so the key is released for the retry.
func (s *server) idempotent(h fiber.Handler) fiber.Handler {
	return func(c *fiber.Ctx) error {
		vals := c.Request().Header.PeekAll(headerIdempotencyKey)
		if len(vals) == 0 {
			return h(c)
		}
		if len(vals) > 1 || !validIdempotencyKey(vals[0]) {
			return sendError(c, domain.EInvalid, "Idempotency-Key: 1..128 visible ASCII characters, once")
		}
		scope := idempotencyScope(principal(c).UserID, c.Method(), c.Path(), string(vals[0]))
		hash := bodyHash(c.BodyRaw())
		ctx, cancel := context.WithTimeout(c.UserContext(), keyInFlightWait)
		defer cancel()
		for {
			claim, err := s.st.ClaimKey(ctx, scope, hash, keyStaleAfter)
			switch {
			case err != nil:
				s.log(c).Error("idempotency key: claim", "err", err)
				return unavailable(c, 1, "database unavailable")
			case claim.Reused:
				return sendError(c, domain.EIdempotencyReused, "this Idempotency-Key was used with another body")
			case claim.Status != 0:
				c.Set("Idempotent-Replayed", "true")
				c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
				return c.Status(claim.Status).Send(claim.Response)
			case claim.Owned:
				c.Locals(idempotencyRef{}, "idem-"+hex.EncodeToString(scope[:16]))
				return s.runClaimed(c, h, scope)
			}
			select {
			case <-ctx.Done():
				return sendError(c, domain.EIdempotencyReused, "a request with this Idempotency-Key is still in flight; retry")
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// runClaimed runs the write of a claimed key and keeps its answer.
func (s *server) runClaimed(c *fiber.Ctx, h fiber.Handler, scope []byte) error {
	herr := h(c)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.UserContext()), adminTimeout)
	defer cancel()
	status := c.Response().StatusCode()
	var err error
	if herr != nil || status >= 500 {
		err = s.st.ReleaseKey(ctx, scope)
	} else {
		err = s.st.FinishKey(ctx, scope, status, bytes.Clone(c.Response().Body()))
	}
	if err != nil {
		// The claim stays in flight until keyStaleAfter; a repeat then runs
		// the write again under the same ref.
		s.log(c).Error("idempotency key: keep the answer", "err", err)
	}
	return herr
}

// writeRef is the ref of the current admin write: its Idempotency-Key's,
// or "" for a fresh one.
func writeRef(c *fiber.Ctx) string {
	ref, _ := c.Locals(idempotencyRef{}).(string)
	return ref
}
