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
	// Last-Event-ID: the sequence the client saw last; garbage counts as
	// nothing seen.
	last, _ := strconv.ParseInt(strings.TrimSpace(c.Get("Last-Event-ID")), 10, 64)
	fc := c.Context()
	e, ok := s.hub.Open(p.UserID, token, saleID, last, p.Expires, fc.Request.Header.IsHTTP11())
	if !ok {
		c.Set(fiber.HeaderRetryAfter, "5")
		return sendError(c, domain.ERateLimited, "too many event streams open for this user")
	}
	view, seq, err := s.reads.ReadSeq(c.UserContext(), p.UserID, token, saleID)
	if err != nil {
		s.hub.Drop(e)
		return sendErr(c, err)
	}
	if last > 0 && seq <= last && view.Status.Terminal() {
		// A resume after the ended status was sent: nothing more will
		// come, and 204 tells a standard client not to reconnect.
		s.hub.Drop(e)
		return c.SendStatus(fiber.StatusNoContent)
	}

	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-cache")
	c.Set("X-Accel-Buffering", "no")
	if fc.IsHead() {
		s.hub.Drop(e)
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

// startEvents prepares the status reads and starts the event fan-in.
func (s *server) startEvents() {
	s.reads = s.backend.Reader(status.Deps{Cache: s.cache, Redis: s.rdb, RedisTimeout: s.cfg.RedisTimeout,
		Logger: s.logger, Count: s.m.statusReads.Inc})
	s.hub = status.NewHub(s.reads, s.cache.Blacklisted, s.stop, s.logger)
	s.goBackground(func() { s.hub.Run(s.rdb) })
}
