package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/ratelimit"
	"github.com/seckill/seckill/internal/strictjson"
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
	if err := strictjson.Decode(body, &req); err != nil {
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
	// 3-7. the sale from the cache, the gate, the sold-out mark, the
	// user's bucket and the blacklist, the opening lottery
	f, err := s.svc.Filters.Admit(c.UserContext(), a.userID, a.saleID, a.requestID, a.pass, now)
	a.entry, a.sale = f.Entry, f.Sale
	switch {
	case err != nil:
		return a, false, sendErr(c, err)
	case f.Replay != "":
		ans, err := s.svc.Reserve.AcceptHold(c.UserContext(), a.request(), f.Replay)
		return a, false, s.answer(c, a, ans, err)
	}
	return a, true, nil
}

// admitRequest validates the path and the body.
func (s *server) admitRequest(c *fiber.Ctx) (saleID int64, requestID, pass string, ok bool, err error) {
	saleID, ok = domain.ParseID(c.Params("sale_id"))
	if !ok {
		s.m.count(layerValidation, "not_found")
		return 0, "", "", false, sendError(c, domain.ENotFound, "no such sale")
	}
	body, err := jsonBody(c)
	if err == nil {
		requestID, pass, err = ParseReservationRequest(body)
	}
	if err != nil {
		s.m.count(layerValidation, "invalid")
		return 0, "", "", false, sendErr(c, err)
	}
	s.m.pass(layerValidation)
	return saleID, requestID, pass, true, nil
}

// admitRate runs the overload draw (ratelimit.Draw), then takes a token from
// the global and the per-address buckets.
func (s *server) admitRate(c *fiber.Ctx, userID int64, now time.Time) (bool, error) {
	if !s.draw.Admit(userID, now) {
		s.m.count(layerGlobal, "draw")
		c.Set(fiber.HeaderRetryAfter, "1")
		return false, sendError(c, domain.ERateLimited, "too many requests: this second's draw did not admit you; ask again after Retry-After")
	}
	if !s.global.AllowN(now, 1) {
		s.m.count(layerGlobal, "rate_limited")
		return false, s.rateLimited(c, s.cfg.GlobalRPS)
	}
	s.m.pass(layerGlobal)
	if !s.addrAllowed(c, s.perAddr, now) {
		s.m.count(layerAddr, "rate_limited")
		return false, s.rateLimited(c, s.cfg.PerAddrRPS)
	}
	s.m.pass(layerAddr)
	return true, nil
}

// reserveAdmitted is the reservation itself (reservation.Service.Reserve),
// counted under its outcome and answered.
func (s *server) reserveAdmitted(c *fiber.Ctx, a admission) error {
	ans, err := s.svc.Reserve.Reserve(c.UserContext(), a.request())
	s.m.count(ans.Layer, ans.Reason)
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

// accepted answers 202 with domain.Accepted.
func (s *server) accepted(c *fiber.Ctx, token string, saleID int64, requestID string) error {
	c.Status(fiber.StatusAccepted)
	if b, ok := acceptedJSON(token, saleID, requestID); ok {
		c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
		return c.Send(b)
	}
	return c.JSON(domain.Accepted{Token: token, Status: domain.StatusQueued, SaleID: saleID, RequestID: requestID})
}

// acceptedJSON is domain.Accepted's JSON as encoding/json writes it, built
// by hand (the encoder cost a tenth of a 202's CPU); not ok when a string
// needs escaping, which a token and a valid request id never do.
func acceptedJSON(token string, saleID int64, requestID string) ([]byte, bool) {
	if !plainJSON(token) || !plainJSON(requestID) {
		return nil, false
	}
	b := make([]byte, 0, 64+len(token)+len(requestID))
	b = append(b, `{"token":"`...)
	b = append(b, token...)
	b = append(b, `","status":"`...)
	b = append(b, domain.StatusQueued...)
	b = append(b, `","sale_id":`...)
	b = strconv.AppendInt(b, saleID, 10)
	b = append(b, `,"request_id":"`...)
	b = append(b, requestID...)
	b = append(b, `"}`...)
	return b, true
}

// plainJSON reports whether v is written in a JSON string as it is: no
// quote, backslash, control or non-ASCII byte (encoding/json escapes <, >
// and & too).
func plainJSON(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

func (s *server) rateLimited(c *fiber.Ctx, rps float64) error {
	c.Set(fiber.HeaderRetryAfter, fmt.Sprint(ratelimit.RetryAfter(rps)))
	return sendError(c, domain.ERateLimited, "too many requests")
}
