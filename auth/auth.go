// Package auth verifies the callers' bearer tokens: the project's own HS256
// tokens (a user signer and an admin signer, each with a previous secret
// during a rotation), an identity provider's user tokens, and operators'
// admin tokens from an identity provider, each by its JWKS. A verified
// token of an identity provider is remembered, by a salted hash, until it
// expires or for a minute; the own tokens are verified each time.
package auth

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/seckill/seckill/domain"
)

// Principal is the verified caller.
type Principal struct {
	// UserID is the user a token names; 0 for an operator signed in
	// through the identity provider, who is no user.
	UserID int64
	Admin  bool
	// Subject names an operator (admin principals only): the identity
	// provider's sub, or "secret:<user id>" for a token of the shared
	// admin secret, so the two are never mistaken for each other.
	Subject string
	// Expires is the token's exp: a long event stream ends then.
	Expires time.Time
}

var errBadToken = errors.New("invalid token")

// ErrNotAdmin is a token of the operators' identity provider that verified
// but does not carry the admin role: on an admin route it is refused with
// 403, elsewhere with 401 (it names no user).
var ErrNotAdmin = errors.New("token lacks the admin role")

// SecretSubject is the operator subject of a shared-secret admin token.
func SecretSubject(userID int64) string { return "secret:" + strconv.FormatInt(userID, 10) }

// VerifyToken checks a bearer JWT: HS256 only, exp required, sub a positive
// decimal user id, role absent, "user" or "admin".
func VerifyToken(secret []byte, raw string) (Principal, error) {
	p, _, err := verifyToken(secret, raw)
	return p, err
}

func verifyToken(secret []byte, raw string) (Principal, time.Time, error) {
	return newOwnKey(secret).verify(raw, time.Now())
}

// verifyByLibrary is verifyToken through golang-jwt's parser.
func verifyByLibrary(secret []byte, raw string) (Principal, time.Time, error) {
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
	return principalOf(claims, userClaim, role)
}

// principalOf reads the principal of verified claims: the user id from
// userClaim, the role by role, and the exp the claims must carry.
func principalOf(claims jwt.MapClaims, userClaim string, role func(jwt.MapClaims) (admin, ok bool)) (Principal, time.Time, error) {
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

// Verifier verifies tokens, and remembers those of the identity providers,
// so a user retrying in a flash sale costs a hash and a map lookup instead
// of an RSA or ECDSA check and a JSON parse. The project's own tokens are
// verified each time: their keyed MAC costs less than a miss of the cache
// (a hash, a shard's lock and a write), and in a flash sale's crowd most
// tokens are new. Only verified tokens are remembered, each until its exp
// or MaxCacheAge, whichever is first. Its secrets never change: a rotation
// restarts the API with new ones, and with them a new, empty cache.
type Verifier struct {
	// own verifies a token with the own tokens' header (keys.checkOwn),
	// check any other (keys.check).
	own, check func(raw string, now time.Time) (Principal, time.Time, error)
	cache      *tokenCache // nil: every token is verified
}

// NewVerifier verifies tokens under secrets and remembers up to max of
// the identity providers' tokens; max 0 remembers none.
func NewVerifier(secrets Secrets, max int) (*Verifier, error) {
	c, err := newTokenCache(max)
	if err != nil {
		return nil, fmt.Errorf("verifier: %w", err)
	}
	k := secrets.keys()
	return &Verifier{own: k.checkOwn, check: k.check, cache: c}, nil
}

// Secrets are the HS256 secrets of the two signers, each current
// first then the previous one during a rotation.
type Secrets struct {
	User, Admin [][]byte
	IdP         *IdentityProvider // user tokens from an identity provider; nil: none
	// Operators are admin tokens from an identity provider; nil: none.
	Operators *AdminProvider
}

// keys are Secrets ready to verify with: each HS256 secret with its MACs
// kept for reuse.
type keys struct {
	user, admin []*ownKey
	idp         *IdentityProvider
	operators   *AdminProvider
}

func (k Secrets) keys() *keys {
	return &keys{user: newOwnKeys(k.User), admin: newOwnKeys(k.Admin), idp: k.IdP, operators: k.Operators}
}

// check verifies raw by its signer (keys.check) now.
func (k Secrets) check(raw string) (Principal, time.Time, error) {
	return k.keys().check(raw, time.Now())
}

// check verifies raw by its signer: the own keys (checkOwn) when its
// header names HS256, else, or when they refuse it, the identity providers
// (checkProviders), which accept no HS256 token. The own keys would refuse
// any other alg too, but only after the library's parse of the claims,
// once for each key: a provider token's miss would pay for it.
func (k *keys) check(raw string, now time.Time) (Principal, time.Time, error) {
	if alg, ok := headerAlg(raw); ok && alg == jwt.SigningMethodHS256.Alg() {
		if p, exp, err := k.checkOwn(raw, now); err == nil {
			return p, exp, nil
		}
	}
	return k.checkProviders(raw)
}

// checkOwn verifies raw by the own keys, each signer's current secret then
// its previous one: a user-signed token claiming role admin is refused
// (401, not 403: its signer had no right to say it), and an admin-signed
// token must claim role admin.
func (k *keys) checkOwn(raw string, now time.Time) (Principal, time.Time, error) {
	for _, key := range k.user {
		if p, exp, err := key.verify(raw, now); err == nil {
			if p.Admin {
				return Principal{}, time.Time{}, errBadToken
			}
			return p, exp, nil
		}
	}
	for _, key := range k.admin {
		if p, exp, err := key.verify(raw, now); err == nil && p.Admin {
			p.Subject = SecretSubject(p.UserID)
			return p, exp, nil
		}
	}
	return Principal{}, time.Time{}, errBadToken
}

// checkProviders verifies raw by the identity providers: a user token that
// carries the operators' admin role is refused, as only the operators'
// issuer and audience grant it.
func (k *keys) checkProviders(raw string) (Principal, time.Time, error) {
	if k.idp != nil {
		if p, exp, err := k.idp.verify(raw, k.operators.roleGrant()); err == nil && !p.Admin {
			return p, exp, nil
		}
	}
	if k.operators != nil {
		p, exp, err := k.operators.verify(raw)
		if err == nil || errors.Is(err, ErrNotAdmin) {
			return p, exp, err
		}
	}
	return Principal{}, time.Time{}, errBadToken
}

// hasOwnHeader reports whether raw starts with the header segment the own
// tokens are minted with. Only the own keys can verify such a token (its
// alg is HS256, which no identity provider is trusted with), so it is
// verified by them alone and never remembered. An HS256 token with any
// other header, which the own keys may verify too, goes through check and
// the cache.
func hasOwnHeader(raw string) bool {
	return len(raw) > len(ownHeader) && raw[len(ownHeader)] == '.' && raw[:len(ownHeader)] == ownHeader
}

// Verify verifies raw: a token with the own header by the own keys, any
// other from the cache or verified and remembered.
func (v *Verifier) Verify(raw string, now time.Time) (Principal, error) {
	if hasOwnHeader(raw) {
		p, exp, err := v.own(raw, now)
		return live(p, exp, err, now)
	}
	var k tokenKey
	if v.cache != nil {
		k = v.cache.key(raw)
		if p, ok := v.cache.get(&k, now); ok {
			return p, nil
		}
	}
	p, exp, err := v.check(raw, now)
	p, err = live(p, exp, err, now)
	if err == nil && v.cache != nil {
		v.cache.put(&k, p, now)
	}
	return p, err
}

// live is the principal of a token verified with err, refused from its exp
// on, else carrying it.
func live(p Principal, exp time.Time, err error, now time.Time) (Principal, error) {
	if err != nil {
		return Principal{}, err
	}
	if !now.Before(exp) {
		return Principal{}, errBadToken
	}
	p.Expires = exp
	return p, nil
}
