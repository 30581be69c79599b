package auth

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/seckill/seckill/internal/keyedmac"
)

// The project's own HS256 tokens are verified without golang-jwt's general
// parse: in a flash sale every buyer's first request brings a token never
// seen, and that parse was most of such a request's cost.

// ownHeader is the header segment of the project's own tokens
// (internal/authtoken mints them with golang-jwt's encoding of it).
var ownHeader = base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))

// headerAlg is the alg raw's header names, read as golang-jwt reads it: the
// segment before the first dot base64url-decoded, a JSON object whose
// "alg" is a string. ok false: the header cannot be read, and the library
// refuses the token.
func headerAlg(raw string) (alg string, ok bool) {
	seg, _, _ := strings.Cut(raw, ".")
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return "", false
	}
	var header map[string]any
	if err := json.Unmarshal(b, &header); err != nil {
		return "", false
	}
	alg, ok = header["alg"].(string)
	return alg, ok
}

const (
	// sigLen is the base64url length of an HS256 signature.
	sigLen = 43
	// quickMax bounds the signing input (header and claims segments) the
	// quick path verifies in its scratch buffers; a longer token goes to
	// the library.
	quickMax = 512
)

// verdict is the quick path's decision on a token.
type verdict uint8

const (
	undecided verdict = iota // the library decides
	accepted
	refused
)

// ownKey is one HS256 secret with its keyed MAC states kept for reuse, so
// a new token costs its HMAC, not the key's setup and a dozen allocations.
type ownKey struct {
	secret []byte
	macs   *keyedmac.Pool
}

// ownScratch is one verification's working memory, reused: the buffers
// the token's segments are copied and decoded into.
type ownScratch struct {
	raw      [quickMax + 1 + sigLen]byte
	claims   [quickMax]byte
	sig, sum [sha256.Size]byte
}

var scratches = sync.Pool{New: func() any { return new(ownScratch) }}

// release returns s to the pool with the token's copy and its claims wiped
// (n bytes of the token): like the cache, the pool keeps no token to
// replay.
func (s *ownScratch) release(n int) {
	clear(s.raw[:n])
	clear(s.claims[:])
	scratches.Put(s)
}

func newOwnKey(secret []byte) *ownKey {
	return &ownKey{secret: secret, macs: keyedmac.NewPool(secret)}
}

func newOwnKeys(secrets [][]byte) []*ownKey {
	out := make([]*ownKey, len(secrets))
	for i, s := range secrets {
		out[i] = newOwnKey(s)
	}
	return out
}

// verify is verifyToken under k: the quick path's decision, else the
// library's.
func (k *ownKey) verify(raw string, now time.Time) (Principal, time.Time, error) {
	switch p, exp, v := k.verifyQuick(raw, now); v {
	case accepted:
		return p, exp, nil
	case refused:
		return Principal{}, time.Time{}, errBadToken
	}
	return verifyByLibrary(k.secret, raw)
}

// verifyQuick decides a token with ownHeader. Its signature not k's HMAC
// of its first two segments: refused (the library, reading that header,
// checks the same HMAC over the same bytes). Its signature and claims
// passing verifyToken's rules: accepted, as the library would, with the
// same segment decoding, HMAC and claim reads. Anything else is left to
// the library.
func (k *ownKey) verifyQuick(raw string, now time.Time) (Principal, time.Time, verdict) {
	header, rest, found := strings.Cut(raw, ".")
	if !found || header != ownHeader {
		return Principal{}, time.Time{}, undecided
	}
	payload, sigSeg, found := strings.Cut(rest, ".")
	signing := len(header) + 1 + len(payload)
	if !found || len(sigSeg) != sigLen || signing > quickMax {
		return Principal{}, time.Time{}, undecided
	}
	s := scratches.Get().(*ownScratch)
	in := s.raw[:copy(s.raw[:], raw)]
	defer s.release(len(in))
	if n, err := base64.RawURLEncoding.Decode(s.sig[:], in[signing+1:]); err != nil || n != len(s.sig) {
		return Principal{}, time.Time{}, undecided
	}
	if !hmac.Equal(s.sig[:], k.macs.Sum(s.sum[:0], in[:signing])) {
		return Principal{}, time.Time{}, refused
	}
	n, err := base64.RawURLEncoding.Decode(s.claims[:], in[len(header)+1:signing])
	if err != nil {
		return Principal{}, time.Time{}, undecided
	}
	body := s.claims[:n]
	if userID, admin, expSec, ok := canonicalClaims(body); ok {
		exp := time.Unix(expSec, 0)
		if !now.Before(exp) {
			return Principal{}, time.Time{}, undecided
		}
		return Principal{UserID: userID, Admin: admin}, exp, accepted
	}
	return claimsByJSON(body, now)
}

// claimsByJSON reads verified claims of any shape as the library does
// (json into MapClaims) and applies verifyToken's rules; undecided when
// they do not pass, so the library refuses the token itself.
func claimsByJSON(body []byte, now time.Time) (Principal, time.Time, verdict) {
	claims := jwt.MapClaims{}
	if err := json.Unmarshal(body, &claims); err != nil {
		return Principal{}, time.Time{}, undecided
	}
	// The library's validation with WithExpirationRequired: exp present
	// and after now, nbf (when present) not after now.
	nbf, err := claims.GetNotBefore()
	if err != nil || (nbf != nil && now.Before(nbf.Time)) {
		return Principal{}, time.Time{}, undecided
	}
	p, exp, err := principalOf(claims, "sub", roleOfOwnToken)
	if err != nil || !now.Before(exp) {
		return Principal{}, time.Time{}, undecided
	}
	return p, exp, accepted
}

// canonicalClaims reads claims as authtoken.Mint writes them (the
// library's encoding of its map: keys sorted, no spaces):
// {"exp":<seconds>,"sub":"<user id>"}, with ,"role":"user" or
// ,"role":"admin" between the two. It reads what the library reads: exp a
// JSON number of at most 15 digits (exact as the library's float64), sub
// a string of at most 18 digits, no leading zero (domain.ParseID's ids,
// none of them out of range). Anything else: ok false.
func canonicalClaims(b []byte) (userID int64, admin bool, exp int64, ok bool) {
	rest, ok := bytes.CutPrefix(b, []byte(`{"exp":`))
	if !ok {
		return 0, false, 0, false
	}
	exp, rest, ok = leadingNumber(rest, 15)
	if !ok {
		return 0, false, 0, false
	}
	if r, found := bytes.CutPrefix(rest, []byte(`,"role":"user"`)); found {
		rest = r
	} else if r, found := bytes.CutPrefix(rest, []byte(`,"role":"admin"`)); found {
		rest, admin = r, true
	}
	if rest, ok = bytes.CutPrefix(rest, []byte(`,"sub":"`)); !ok {
		return 0, false, 0, false
	}
	userID, rest, ok = leadingNumber(rest, 18)
	if !ok || string(rest) != `"}` {
		return 0, false, 0, false
	}
	return userID, admin, exp, true
}

// leadingNumber reads the decimal number b starts with: 1 to max digits,
// the first not 0.
func leadingNumber(b []byte, max int) (n int64, rest []byte, ok bool) {
	i := 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		if i == max {
			return 0, nil, false
		}
		n = n*10 + int64(b[i]-'0')
	}
	if i == 0 || b[0] == '0' {
		return 0, nil, false
	}
	return n, b[i:], true
}
