// Package altcha is the server side of the ALTCHA proof-of-work format
// (version 1, as the `altcha` widget and the `altcha-lib` reference
// library speak it), so storefronts can use the widget as it is.
//
// A challenge is hex(SHA-256(salt + n)) for a secret n in [0, maxnumber],
// signed with HMAC-SHA256; the client finds n by brute force. The salt
// carries URL-query parameters after "?" (expires, and ours) and ends
// with "&", so no parameter can be spliced onto it by the number.
package altcha

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Algorithm is the one hash this package speaks.
const Algorithm = "SHA-256"

// MaxNumber bounds a challenge's difficulty (the expected work is half).
const MaxNumber = 10_000_000

// Errors of Verify.
var (
	ErrMalformed = errors.New("altcha: malformed solution")
	ErrExpired   = errors.New("altcha: challenge expired")
	ErrMismatch  = errors.New("altcha: wrong number or signature")
)

// Challenge is what the server sends.
type Challenge struct {
	Algorithm string `json:"algorithm"`
	Challenge string `json:"challenge"`
	MaxNumber int64  `json:"maxnumber"`
	Salt      string `json:"salt"`
	Signature string `json:"signature"`
}

// Solution is what the client sends back, base64-encoded JSON.
type Solution struct {
	Algorithm string `json:"algorithm"`
	Challenge string `json:"challenge"`
	Number    int64  `json:"number"`
	Salt      string `json:"salt"`
	Signature string `json:"signature"`
	Took      int64  `json:"took,omitempty"`
}

// NewChallenge makes a challenge whose secret number is random in
// [0, maxNumber], expiring at expires, with params bound into the salt.
func NewChallenge(key []byte, maxNumber int64, expires time.Time, params map[string]string) (Challenge, error) {
	if maxNumber < 1 || maxNumber > MaxNumber {
		return Challenge{}, fmt.Errorf("altcha: maxnumber %d outside 1..%d", maxNumber, MaxNumber)
	}
	random := make([]byte, 12)
	if _, err := rand.Read(random); err != nil {
		return Challenge{}, fmt.Errorf("altcha: salt: %w", err)
	}
	n, err := rand.Int(rand.Reader, big.NewInt(maxNumber+1))
	if err != nil {
		return Challenge{}, fmt.Errorf("altcha: number: %w", err)
	}
	q := url.Values{}
	for k, v := range params {
		q.Set(k, v)
	}
	q.Set("expires", strconv.FormatInt(expires.Unix(), 10))
	salt := hex.EncodeToString(random) + "?" + q.Encode() + "&"
	ch := hashHex(salt, n.Int64())
	return Challenge{Algorithm: Algorithm, Challenge: ch, MaxNumber: maxNumber, Salt: salt, Signature: sign(key, ch)}, nil
}

func hashHex(salt string, n int64) string {
	sum := sha256.Sum256([]byte(salt + strconv.FormatInt(n, 10)))
	return hex.EncodeToString(sum[:])
}

func sign(key []byte, challenge string) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(challenge))
	return hex.EncodeToString(mac.Sum(nil))
}

// Params are the parameters in a salt (after "?").
func Params(salt string) url.Values {
	_, query, ok := strings.Cut(salt, "?")
	if !ok {
		return url.Values{}
	}
	v, err := url.ParseQuery(query)
	if err != nil {
		return url.Values{}
	}
	return v
}

// Verify decodes a payload and checks it was solved for a challenge
// signed with key and not expired at now; it answers the salt's params.
func Verify(key []byte, payload string, now time.Time) (url.Values, Solution, error) {
	raw, err := base64.StdEncoding.DecodeString(payload)
	if err != nil {
		return nil, Solution{}, fmt.Errorf("%w: not base64", ErrMalformed)
	}
	var sol Solution
	if err := json.Unmarshal(raw, &sol); err != nil {
		return nil, Solution{}, fmt.Errorf("%w: not the solution JSON", ErrMalformed)
	}
	if sol.Algorithm != Algorithm || sol.Number < 0 || sol.Salt == "" {
		return nil, Solution{}, fmt.Errorf("%w: algorithm, number or salt", ErrMalformed)
	}
	params := Params(sol.Salt)
	if exp := params.Get("expires"); exp != "" {
		unix, err := strconv.ParseInt(exp, 10, 64)
		if err != nil {
			return nil, Solution{}, fmt.Errorf("%w: expires %q", ErrMalformed, exp)
		}
		if now.After(time.Unix(unix, 0)) {
			return nil, Solution{}, ErrExpired
		}
	}
	ch := hashHex(sol.Salt, sol.Number)
	if !hmac.Equal([]byte(ch), []byte(sol.Challenge)) || !hmac.Equal([]byte(sign(key, ch)), []byte(sol.Signature)) {
		return nil, Solution{}, ErrMismatch
	}
	return params, sol, nil
}

// Solve finds a challenge's number by brute force, as a client does (for
// tests and load tools).
func Solve(c Challenge) (Solution, error) {
	start := time.Now()
	for n := int64(0); n <= c.MaxNumber; n++ {
		if hashHex(c.Salt, n) == c.Challenge {
			return Solution{Algorithm: c.Algorithm, Challenge: c.Challenge, Number: n, Salt: c.Salt,
				Signature: c.Signature, Took: time.Since(start).Milliseconds()}, nil
		}
	}
	return Solution{}, fmt.Errorf("altcha: no number up to %d solves the challenge", c.MaxNumber)
}

// Payload encodes a solution as the widget sends it.
func (s Solution) Payload() (string, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return "", fmt.Errorf("altcha: encode solution: %w", err)
	}
	return base64.StdEncoding.EncodeToString(b), nil
}
