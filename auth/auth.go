// Package auth verifies the callers' bearer tokens: the project's own HS256
// tokens (a user signer and an admin signer, each with a previous secret
// during a rotation) and an identity provider's, by its JWKS. A verified
// token is remembered until it expires.
package auth

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"

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
	id, ok := domain.ParseID(sub)
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

// Verifier verifies tokens and remembers those verified until they expire, so a
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
type Verifier struct {
	secrets Secrets
	entries sync.Map // token → verifiedToken
	n       atomic.Int64
	max     int64
}

type verifiedToken struct {
	p   Principal
	exp time.Time
}

// NewVerifier verifies tokens under secrets and remembers up to max of them.
func NewVerifier(secrets Secrets, max int) *Verifier {
	return &Verifier{secrets: secrets, max: int64(max)}
}

// Secrets are the HS256 secrets of the two signers, each current
// first then the previous one during a rotation.
type Secrets struct {
	User, Admin [][]byte
	IdP         *IdentityProvider // user tokens from an identity provider; nil: none
}

// check verifies raw by its signer: a user-signed token claiming role admin
// is refused (401, not 403: its signer had no right to say it), and an
// admin-signed token must claim role admin.
func (k Secrets) check(raw string) (Principal, time.Time, error) {
	for _, secret := range k.User {
		if p, exp, err := verifyToken(secret, raw); err == nil {
			if p.Admin {
				return Principal{}, time.Time{}, errBadToken
			}
			return p, exp, nil
		}
	}
	for _, secret := range k.Admin {
		if p, exp, err := verifyToken(secret, raw); err == nil && p.Admin {
			return p, exp, nil
		}
	}
	if k.IdP != nil {
		if p, exp, err := k.IdP.verify(raw); err == nil && !p.Admin {
			return p, exp, nil
		}
	}
	return Principal{}, time.Time{}, errBadToken
}

// Verify answers from the cache or verifies raw and remembers it.
func (v *Verifier) Verify(raw string, now time.Time) (Principal, error) {
	if e, ok := v.entries.Load(raw); ok {
		if t := e.(verifiedToken); now.Before(t.exp) {
			return t.p, nil
		}
	}
	p, exp, err := v.secrets.check(raw)
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
