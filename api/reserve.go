package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/ratelimit"
	"github.com/seckill/seckill/reservation"
	"github.com/seckill/seckill/salecache"
)

// reservationRequest is the body of POST .../reservations.
type reservationRequest struct {
	RequestID *string         `json:"request_id"`
	Quantity  json.RawMessage `json:"quantity"` // raw, so null is seen
	Pass      *string         `json:"pass"`
}

// maxPassLen bounds a challenge pass (the gate's are about 80 bytes).
const maxPassLen = 512

// ParseReservationRequest decodes the body strictly: one JSON object, no
// unknown fields, request_id valid, quantity absent or exactly 1, pass
// absent or a string (checked against the sale later).
func ParseReservationRequest(body []byte) (requestID, pass string, err error) {
	if id, pass, ok := parseCanonicalReservation(body); ok {
		return id, pass, nil
	}
	return parseReservationStrict(body)
}

// parseCanonicalReservation reads, without the JSON decoder, the bodies
// clients send: {"request_id":"<id>"}, optionally followed by
// ,"quantity":1 and then ,"pass":"<pass>". A valid request id or pass
// holds no quote or backslash, so each ends at the next quote. Anything
// else goes to the strict decoder.
func parseCanonicalReservation(body []byte) (id, pass string, ok bool) {
	const head = `{"request_id":"`
	if len(body) < len(head) || string(body[:len(head)]) != head {
		return "", "", false
	}
	rest := body[len(head):]
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return "", "", false
	}
	id = string(rest[:end])
	tail := rest[end+1:]
	tail, _ = bytes.CutPrefix(tail, []byte(`,"quantity":1`))
	if p, found := bytes.CutPrefix(tail, []byte(`,"pass":"`)); found {
		end := bytes.IndexByte(p, '"')
		if end < 0 || end > maxPassLen || !passChars(p[:end]) {
			return "", "", false
		}
		pass, tail = string(p[:end]), p[end+1:]
	}
	if string(tail) != "}" || !domain.ValidRequestID(id) {
		return "", "", false
	}
	return id, pass, true
}

// passChars reports whether b holds only the characters of the gate's
// passes (base64url and dots), which need no JSON escaping.
func passChars(b []byte) bool {
	for _, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

func parseReservationStrict(body []byte) (requestID, pass string, err error) {
	var req reservationRequest
	if err := decodeStrict(body, &req); err != nil {
		return "", "", err
	}
	if req.RequestID == nil {
		return "", "", domain.Errorf(domain.EInvalid, "request_id is required")
	}
	if !domain.ValidRequestID(*req.RequestID) {
		return "", "", domain.Errorf(domain.EInvalid, "request_id must be 8..64 of A-Z a-z 0-9 _ -")
	}
	if req.Quantity != nil && string(bytes.TrimSpace(req.Quantity)) != "1" {
		return "", "", domain.Errorf(domain.EInvalid, "quantity must be 1")
	}
	if req.Pass != nil {
		if len(*req.Pass) > maxPassLen {
			return "", "", domain.Errorf(domain.EInvalid, "pass must be at most %d bytes", maxPassLen)
		}
		pass = *req.Pass
	}
	return *req.RequestID, pass, nil
}

// jsonProblem names what was wrong without echoing the body.
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fmt.Sprintf("field %s has the wrong type", te.Field)
		}
		return "the body must be a JSON object"
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("syntax error at offset %d", se.Offset)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "empty or truncated body"
	}
	if strings.HasPrefix(err.Error(), "json: unknown field ") {
		return "unknown field" // not named: answers never quote the request
	}
	return "malformed body"
}

// saleIDParam reads a positive decimal sale id from the path, else 404.
func saleIDParam(c *fiber.Ctx, name string) (int64, error) {
	id, ok := domain.ParseID(c.Params(name))
	if !ok {
		return 0, domain.Errorf(domain.ENotFound, "no such sale")
	}
	return id, nil
}

// admitReservation is POST /api/v1/sales/{sale_id}/reservations's first
// handler: admission, the layered filters, cheapest first. A request that
// passes goes on (past the tracing middleware, so a refusal makes no span)
// to reserve.
func (s *server) admitReservation(c *fiber.Ctx) error {
	a, ok, err := s.admit(c)
	if !ok {
		return err
	}
	c.Locals(admissionKey{}, &a)
	return c.Next()
}

// reserve is the reservation itself on the path the sale's mode picks, for
// a request admitReservation let through.
func (s *server) reserve(c *fiber.Ctx) error {
	a, ok := c.Locals(admissionKey{}).(*admission)
	if !ok {
		return fmt.Errorf("reserve: no admission on the request")
	}
	return s.reserveAdmitted(c, *a)
}

type admissionKey struct{}

// admission is what a request that passed the filters carries on.
type admission struct {
	userID    int64
	saleID    int64
	requestID string
	pass      string
	entry     *salecache.Entry
	sale      *domain.Sale
}

// admit runs the filters in order, cheapest first, counting each pass and
// refusal. ok is false when a filter answered the request (a refusal, or
// a replay the sold-out mark already knows); err is then that answer's.
func (s *server) admit(c *fiber.Ctx) (a admission, ok bool, err error) {
	a.userID = principal(c).UserID
	// 1. validation
	if a.saleID, a.requestID, a.pass, ok, err = s.admitRequest(c); !ok {
		return a, false, err
	}
	// 2. global and per-address buckets
	now := time.Now()
	if ok, err = s.admitRate(c, a.userID, now); !ok {
		return a, false, err
	}
	// 3. sale metadata from the cache
	if a.entry, a.sale, ok, err = s.admitSale(c, a.saleID, now); !ok {
		return a, false, err
	}
	// 4. the gate: the sale's challenge pass and allowlist
	if ok, err = s.admitGate(c, a, now); !ok {
		return a, false, err
	}
	// 5. the in-process sold-out mark (a picture of Redis: only in Redis mode)
	if ok, err = s.admitSoldOutMark(c, a); !ok {
		return a, false, err
	}
	// 6. per-user bucket and blacklist
	if ok, err = s.admitUser(c, a.userID, now); !ok {
		return a, false, err
	}
	// 7. the opening lottery
	if ok, err = s.admitLottery(c, a, now); !ok {
		return a, false, err
	}
	return a, true, nil
}

// admitRequest validates the path and the body.
func (s *server) admitRequest(c *fiber.Ctx) (saleID int64, requestID, pass string, ok bool, err error) {
	saleID, ok = domain.ParseID(c.Params("sale_id"))
	if !ok {
		s.m.reject(layerValidation, "not_found")
		return 0, "", "", false, sendError(c, domain.ENotFound, "no such sale")
	}
	body, err := jsonBody(c)
	if err == nil {
		requestID, pass, err = ParseReservationRequest(body)
	}
	if err != nil {
		s.m.reject(layerValidation, "invalid")
		return 0, "", "", false, sendErr(c, err)
	}
	s.m.pass(layerValidation)
	return saleID, requestID, pass, true, nil
}

// admitRate runs the overload draw (overload.go), then takes a token from
// the global and the per-address buckets.
func (s *server) admitRate(c *fiber.Ctx, userID int64, now time.Time) (bool, error) {
	if !s.draw.admit(userID, now) {
		s.m.reject(layerGlobal, "draw")
		c.Set(fiber.HeaderRetryAfter, "1")
		return false, sendError(c, domain.ERateLimited, "too many requests: this second's draw did not admit you; ask again after Retry-After")
	}
	if !s.global.AllowN(now, 1) {
		s.m.reject(layerGlobal, "rate_limited")
		return false, s.rateLimited(c, s.cfg.GlobalRPS)
	}
	s.m.pass(layerGlobal)
	if addr := s.clientAddr(c); !ratelimit.InPrefixes(addr, s.cfg.TrustedAddrs) && !s.perAddr.Allow(ratelimit.AddrBucket(addr), now) {
		s.m.reject(layerAddr, "rate_limited")
		return false, s.rateLimited(c, s.cfg.PerAddrRPS)
	}
	s.m.pass(layerAddr)
	return true, nil
}

// admitSale reads the sale from the cache and refuses it outside its
// window, stopped or paused.
func (s *server) admitSale(c *fiber.Ctx, saleID int64, now time.Time) (*salecache.Entry, *domain.Sale, bool, error) {
	entry, err := s.cache.Get(c.UserContext(), saleID)
	if err != nil {
		if domain.ErrorCode(err) == domain.ENotFound {
			s.m.reject(layerSale, "not_found")
			return nil, nil, false, sendErr(c, err)
		}
		s.m.reject(layerSale, "unavailable")
		s.log(c).Warn("reserve: sale cache", "sale_id", saleID, "err", err)
		return nil, nil, false, unavailable(c, 1, "sale data unavailable, retry with the same request_id")
	}
	sale := entry.Sale()
	switch {
	case sale.Control == domain.ControlStopped || now.After(sale.EndsAt.Add(reservation.TimeSlack)):
		s.m.reject(layerSale, "ended")
		return nil, nil, false, sendErr(c, domain.ErrSaleEnded)
	case now.Before(sale.StartsAt.Add(-reservation.TimeSlack)):
		s.m.reject(layerSale, "not_started")
		return nil, nil, false, sendErr(c, domain.ErrSaleNotStarted)
	case sale.Control == domain.ControlPaused:
		s.m.reject(layerSale, "paused")
		return nil, nil, false, sendErr(c, domain.ErrSalePaused)
	}
	s.m.pass(layerSale)
	return entry, sale, true, nil
}

// admitGate checks the sale's challenge pass (one HMAC) and its
// allowlist (an in-process set) before anything reaches Redis.
func (s *server) admitGate(c *fiber.Ctx, a admission, now time.Time) (bool, error) {
	if err := s.gate.CheckPass(a.sale, a.userID, a.pass, now); err != nil {
		s.m.reject(layerGate, "challenge_required")
		return false, sendErr(c, err)
	}
	eligible, err := s.gate.Eligible(c.UserContext(), a.sale, a.userID)
	if err != nil {
		s.m.reject(layerGate, "unavailable")
		s.log(c).Warn("reserve: allowlist", "sale_id", a.saleID, "err", err)
		return false, unavailable(c, 1, "sale data unavailable, retry with the same request_id")
	}
	if !eligible {
		s.m.reject(layerGate, "not_eligible")
		return false, sendError(c, domain.ENotEligible, "this sale is restricted to listed users")
	}
	s.m.pass(layerGate)
	return true, nil
}

// admitSoldOutMark answers from the in-process sold-out mark: a replay it
// knows is accepted again, a sold-out sale refused.
func (s *server) admitSoldOutMark(c *fiber.Ctx, a admission) (bool, error) {
	ans, tok := salecache.MarkNone, ""
	if a.sale.Mode == domain.ModeRedis {
		ans, tok = a.entry.Check(a.userID, a.requestID)
	}
	switch ans {
	case salecache.MarkReplay:
		s.m.reject(layerSoldOut, "replay")
		ans, err := s.res.AcceptHold(c.UserContext(), a.request(), tok)
		return false, s.answer(c, a, ans, err)
	case salecache.MarkSoldOut:
		s.m.reject(layerSoldOut, "sold_out")
		return false, sendErr(c, domain.ErrSoldOut)
	}
	s.m.pass(layerSoldOut)
	return true, nil
}

// admitUser takes a token from the user's bucket and refuses a
// blacklisted user.
func (s *server) admitUser(c *fiber.Ctx, userID int64, now time.Time) (bool, error) {
	if !s.perUser.Allow(userID, now) {
		s.m.reject(layerUser, "rate_limited")
		return false, s.rateLimited(c, s.cfg.PerUserRPS)
	}
	s.m.pass(layerUser)
	if s.cache.Blacklisted(userID) {
		s.m.reject(layerBlacklist, "blacklisted")
		return false, sendError(c, domain.EBlacklisted, "this user may not take part")
	}
	s.m.pass(layerBlacklist)
	return true, nil
}

// admitLottery holds the user back until their band of the sale's opening
// lottery. Redis unreachable for the pool leaves the sale to the paths'
// own answers (the database path admits at its own lowered rate).
func (s *server) admitLottery(c *fiber.Ctx, a admission, now time.Time) (bool, error) {
	ctx, cancel := context.WithTimeout(c.UserContext(), s.cfg.RedisTimeout)
	defer cancel()
	wait, err := s.lottery.Wait(ctx, a.sale, a.userID, now)
	switch {
	case errors.Is(err, domain.ErrSaleNotStarted):
		s.m.reject(layerLottery, "not_started")
		return false, sendErr(c, err)
	case err != nil:
		s.m.reject(layerLottery, "unavailable")
		return true, nil
	}
	if wait > 0 {
		s.m.reject(layerLottery, "waiting")
		secs := int((wait + time.Second - 1) / time.Second)
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(max(secs, 1)))
		return false, sendError(c, domain.ERateLimited, "the sale's opening lottery has not reached your turn; retry after Retry-After (retrying sooner changes nothing)")
	}
	s.m.pass(layerLottery)
	return true, nil
}

// reserveAdmitted is the reservation itself (reservation.Service.Reserve),
// counted under its outcome and answered.
func (s *server) reserveAdmitted(c *fiber.Ctx, a admission) error {
	ans, err := s.res.Reserve(c.UserContext(), a.request())
	s.m.reject(ans.Layer, ans.Reason)
	return s.answer(c, a, ans, err)
}

// answer answers a reservation: 202 with its token, or the refusal.
func (s *server) answer(c *fiber.Ctx, a admission, ans reservation.Answer, err error) error {
	if err != nil {
		return sendErr(c, err)
	}
	return s.accepted(c, ans.Token, a.saleID, a.requestID)
}

func (a admission) request() reservation.Request {
	return reservation.Request{SaleID: a.saleID, UserID: a.userID, RequestID: a.requestID, Sale: a.sale, Cached: a.entry}
}

func (s *server) accepted(c *fiber.Ctx, token string, saleID int64, requestID string) error {
	return c.Status(fiber.StatusAccepted).JSON(domain.Accepted{Token: token, Status: domain.StatusQueued, SaleID: saleID, RequestID: requestID})
}

func (s *server) rateLimited(c *fiber.Ctx, rps float64) error {
	c.Set(fiber.HeaderRetryAfter, fmt.Sprint(ratelimit.RetryAfter(rps)))
	return sendError(c, domain.ERateLimited, "too many requests")
}
