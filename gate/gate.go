// Package gate holds what a reservation must pass besides rate limits and
// stock: a sale's proof-of-work challenge and the pass that proves it was
// solved, challenge exemptions, sale allowlists and appeals (contract 1.2).
//
// The hot path's checks cost no I/O: a pass is verified with one HMAC, the
// exemptions and allowlists are in-process sets that Refresh keeps within
// a second of the database.
package gate

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/altcha"
	"github.com/seckill/seckill/internal/keyedmac"
	"github.com/seckill/seckill/store"
)

// Lifetimes of a challenge (to solve it) and of the pass it earns (to
// reserve with it).
const (
	ChallengeTTL = 5 * time.Minute
	PassTTL      = 10 * time.Minute
)

// Limits of the contract.
const (
	MaxAppealRunes    = 500
	MaxAllowlistIDs   = 100_000
	AppealsPageSize   = 100
	challengePassVers = "v1"
)

// Service is the gate's use cases over the store, with the keys derived
// from the fleet's token key (every instance must share it).
type Service struct {
	store *store.Store
	cur   *keySet
	prev  *keySet // the token key's before a rotation (nil: none)
	lists *lists
}

// keySet is the challenge and pass keys derived from one token key.
type keySet struct {
	altcha []byte
	pass   *keyedmac.Pool
}

func newKeySet(tokenKey []byte) *keySet {
	return &keySet{altcha: keyedmac.Derive(tokenKey, "seckill altcha v1"), pass: keyedmac.NewPool(keyedmac.Derive(tokenKey, "seckill challenge pass v1"))}
}

// New derives the challenge and pass keys from tokenKey; what was made
// under previous (the key before a rotation; nil for none) still verifies.
func New(st *store.Store, tokenKey, previous []byte) *Service {
	s := &Service{store: st, cur: newKeySet(tokenKey), lists: newLists()}
	if len(previous) > 0 {
		s.prev = newKeySet(previous)
	}
	return s
}

// keySets is the current key set, then the previous one.
func (s *Service) keySets() []*keySet {
	if s.prev == nil {
		return []*keySet{s.cur}
	}
	return []*keySet{s.cur, s.prev}
}

// Challenge makes a challenge for user at sale, bound to both; a sale
// without a challenge is not found.
func (s *Service) Challenge(sale *domain.Sale, userID int64, now time.Time) (altcha.Challenge, error) {
	if sale.ChallengeDifficulty <= 0 {
		return altcha.Challenge{}, domain.Errorf(domain.ENotFound, "this sale requires no challenge")
	}
	c, err := altcha.NewChallenge(s.cur.altcha, sale.ChallengeDifficulty, now.Add(ChallengeTTL), map[string]string{
		"sale": strconv.FormatInt(sale.ID, 10), "user": strconv.FormatInt(userID, 10),
	})
	if err != nil {
		return altcha.Challenge{}, fmt.Errorf("challenge for sale %d: %w", sale.ID, err)
	}
	return c, nil
}

// Pass is what a solved challenge earns.
type Pass struct {
	Pass      string    `json:"pass"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Redeem checks a solution (this user's, this sale's, unexpired, never
// redeemed before) and answers a pass bound to both.
func (s *Service) Redeem(ctx context.Context, sale *domain.Sale, userID int64, payload string, now time.Time) (Pass, error) {
	if sale.ChallengeDifficulty <= 0 {
		return Pass{}, domain.Errorf(domain.ENotFound, "this sale requires no challenge")
	}
	params, sol, err := altcha.Verify(s.cur.altcha, payload, now)
	if errors.Is(err, altcha.ErrMismatch) && s.prev != nil {
		params, sol, err = altcha.Verify(s.prev.altcha, payload, now)
	}
	if err != nil {
		return Pass{}, domain.Errorf(domain.EChallengeFailed, "the solution is not valid: %s", solutionProblem(err))
	}
	if params.Get("sale") != strconv.FormatInt(sale.ID, 10) || params.Get("user") != strconv.FormatInt(userID, 10) {
		return Pass{}, domain.Errorf(domain.EChallengeFailed, "the solution is for another user or sale")
	}
	expires := now.Add(ChallengeTTL)
	if unix, err := strconv.ParseInt(params.Get("expires"), 10, 64); err == nil {
		expires = time.Unix(unix, 0)
	}
	fresh, err := s.store.RedeemChallenge(ctx, sol.Challenge, expires)
	if err != nil {
		return Pass{}, fmt.Errorf("redeem: %w", err)
	}
	if !fresh {
		return Pass{}, domain.Errorf(domain.EChallengeFailed, "the solution was used already")
	}
	exp := now.Add(PassTTL).UTC().Truncate(time.Second)
	return Pass{Pass: s.mintPass(sale.ID, userID, exp), ExpiresAt: exp}, nil
}

// solutionProblem names what was wrong with a solution, for the client.
func solutionProblem(err error) string {
	switch {
	case errors.Is(err, altcha.ErrExpired):
		return "the challenge expired"
	case errors.Is(err, altcha.ErrMismatch):
		return "wrong number or signature"
	}
	return "malformed payload"
}

// mintPass is "v1.<sale>.<user>.<exp unix>.<base64url HMAC of the rest>".
func (s *Service) mintPass(saleID, userID int64, exp time.Time) string {
	body := challengePassVers + "." + strconv.FormatInt(saleID, 10) + "." + strconv.FormatInt(userID, 10) + "." + strconv.FormatInt(exp.Unix(), 10)
	var sum [sha256.Size]byte
	return body + "." + base64.RawURLEncoding.EncodeToString(s.cur.passSum(body, sum[:0]))
}

// passSum appends body's MAC to b; the hot path reuses HMAC states.
func (k *keySet) passSum(body string, b []byte) []byte {
	return k.pass.Sum(b, []byte(body))
}

// passSigned reports whether mac is body's under one of the key sets.
func (s *Service) passSigned(body string, mac []byte) bool {
	var want [sha256.Size]byte
	for _, k := range s.keySets() {
		if hmac.Equal(mac, k.passSum(body, want[:0])) {
			return true
		}
	}
	return false
}

var errBadPass = domain.Errorf(domain.EChallengeRequired, "the challenge pass is not valid")

// CheckPass is the hot path's check: nil when the sale needs no challenge,
// the user is exempt, or pass is this user's for this sale and unexpired;
// domain.EChallengeRequired otherwise. One HMAC, no I/O.
func (s *Service) CheckPass(sale *domain.Sale, userID int64, pass string, now time.Time) error {
	if sale.ChallengeDifficulty <= 0 || s.lists.exempt(userID) {
		return nil
	}
	if pass == "" {
		return domain.Errorf(domain.EChallengeRequired, "this sale requires a challenge pass: GET /api/v1/sales/%d/challenge", sale.ID)
	}
	cut := strings.LastIndexByte(pass, '.')
	var got [sha256.Size]byte
	if cut < 0 || base64.RawURLEncoding.EncodedLen(sha256.Size) != len(pass)-cut-1 {
		return errBadPass
	}
	if _, err := base64.RawURLEncoding.Decode(got[:], []byte(pass[cut+1:])); err != nil || !s.passSigned(pass[:cut], got[:]) {
		return errBadPass
	}
	vers, rest, _ := strings.Cut(pass[:cut], ".")
	sid, rest, _ := strings.Cut(rest, ".")
	uid, exp, _ := strings.Cut(rest, ".")
	if vers != challengePassVers || sid != strconv.FormatInt(sale.ID, 10) || uid != strconv.FormatInt(userID, 10) {
		return domain.Errorf(domain.EChallengeRequired, "the challenge pass is for another user or sale")
	}
	if unix, err := strconv.ParseInt(exp, 10, 64); err != nil || !now.Before(time.Unix(unix, 0)) {
		return domain.Errorf(domain.EChallengeRequired, "the challenge pass expired")
	}
	return nil
}

// Eligible reports whether user may reserve at a sale: the sale is not
// restricted, or the user is on its allowlist at the sale's version (read
// from the database once per version, in memory after that).
func (s *Service) Eligible(ctx context.Context, sale *domain.Sale, userID int64) (bool, error) {
	if !sale.Restricted {
		return true, nil
	}
	if err := s.LoadAllowlist(ctx, sale); err != nil {
		return false, err
	}
	return s.lists.listed(sale.ID, userID), nil
}
