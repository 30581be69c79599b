package api

import (
	"net"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/status"
)

// Event streams: the handler reads the first view, writes the response
// head, and hands the connection over to the hub (status.Hub), which
// serves it from then on.

// GET /api/v1/reservations/{token}/events
func (s *server) reservationEvents(c *fiber.Ctx) error {
	p := principal(c)
	token, saleID, err := tokenParam(c)
	if err != nil {
		return sendErr(c, err)
	}
	last := lastEventID(c)
	e, ok := s.svc.Hub.Open(p.UserID, token, saleID, last, p.Expires, c.Context().Request.Header.IsHTTP11())
	if !ok {
		return sendErr(c, errTooManyStreams)
	}
	view, seq, err := s.svc.Reads.ReadSeq(c.UserContext(), p.UserID, token, saleID)
	switch {
	case err != nil:
		s.svc.Hub.Drop(e)
		return sendErr(c, err)
	case last > 0 && seq <= last && view.Status.Terminal():
		// A resume after the ended status was sent: nothing more will
		// come, and 204 tells a standard client not to reconnect.
		s.svc.Hub.Drop(e)
		return c.SendStatus(fiber.StatusNoContent)
	}
	return s.stream(c, e, view, seq)
}

// errTooManyStreams refuses a stream beyond the user's open ones.
var errTooManyStreams = &domain.Error{Code: domain.ERateLimited, Message: "too many event streams open for this user", RetryAfter: 5}

// lastEventID is the sequence the client saw last (Last-Event-ID);
// garbage counts as nothing seen.
func lastEventID(c *fiber.Ctx) int64 {
	last, _ := strconv.ParseInt(strings.TrimSpace(c.Get("Last-Event-ID")), 10, 64)
	return last
}

// stream writes the event stream's head and hands the connection over to
// the hub's stream e, which serves it from then on.
func (s *server) stream(c *fiber.Ctx, e *status.Stream, view domain.ReservationView, seq int64) error {
	fc := c.Context()
	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-cache")
	c.Set("X-Accel-Buffering", "no")
	if fc.IsHead() {
		s.svc.Hub.Drop(e)
		return nil
	}
	h := &fc.Response.Header
	if fc.Request.Header.IsHTTP11() {
		h.SetContentLength(-1) // Transfer-Encoding: chunked
	} else {
		h.SetContentLength(-2) // HTTP/1.0: the body ends with the connection
	}
	// The stream ends with its connection: no further request on it.
	h.SetConnectionClose()
	fc.HijackSetNoResponse(true)
	fc.Hijack(func(conn net.Conn) {
		// The response is written here, after every middleware has set
		// its headers; fc is valid until this function returns.
		if u, ok := conn.(interface{ UnsafeConn() net.Conn }); ok {
			// The raw connection: the hijack wrapper would keep the
			// request's read buffer alive, and the stream never reads.
			conn = u.UnsafeConn()
		}
		e.Start(conn, fc.Response.Header.Header(), view, seq)
	})
	return nil
}
