package api

import (
	"bytes"
	"errors"
	"net"
	"os"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/edge"
)

// Answers given before routing: the transport-level answers of the
// contract (every one with the error body, counted, never echoing the
// request). The connections' caps and timeouts are internal/edge's.

// routeTransport labels the answers given before routing in the request metrics.
const routeTransport = "transport"

// wrapHandler answers what the router must not see: an unknown method (501)
// and ambiguous framing (400, connection closed).
func (s *server) wrapHandler(next fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		defer s.verified.drop(&ctx.Request.Header)
		if r, ok := s.refusals.Take(&ctx.Request.Header); ok {
			// The refused body arrived with the headers; it is not looked at.
			s.transportAnswer(ctx, r.Code, r.Message)
			ctx.SetConnectionClose()
			return
		}
		if !edge.KnownMethod(ctx.Method()) {
			s.transportAnswer(ctx, domain.ENotImplemented, "method not implemented")
			return
		}
		if p := edge.FramingProblem(&ctx.Request.Header); p != "" {
			s.transportAnswer(ctx, domain.EInvalid, p)
			ctx.SetConnectionClose()
			return
		}
		next(ctx)
		s.closeIfDraining(ctx)
	}
}

// closeIfDraining ends the connection after this answer once the instance
// drains (Server.Drain): its client's next request goes to another one.
func (s *server) closeIfDraining(ctx *fasthttp.RequestCtx) {
	if s.draining.Load() {
		ctx.SetConnectionClose()
	}
}

// headerRefusal is the answer a request gets from its headers alone, or ""
// when its headers pass: ambiguous framing, a refused bearer token on a
// route that needs one, malformed webhook headers.
func (s *server) headerRefusal(h *fasthttp.RequestHeader) (code, message string) {
	if p := edge.FramingProblem(h); p != "" {
		return domain.EInvalid, p
	}
	return s.routeRefusal(h)
}

// headerReceived runs once the headers are read, before the body: it sets
// the body's read timeout and, for a request that will be refused, makes
// the body read fail at once, so a refused body is never read (the error
// handler then gives the refusal and closes the connection).
func (s *server) headerReceived(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	// A principal an earlier request's headers left on this context is
	// not this request's.
	s.verified.drop(h)
	if n := h.ContentLength(); (n > 0 || n == -1) && !bytes.EqualFold(h.Peek(fasthttp.HeaderExpect), []byte("100-continue")) {
		if code, msg := s.headerRefusal(h); code != "" {
			s.refusals.Put(h, edge.Refusal{Code: code, Message: msg})
			return fasthttp.RequestConfig{ReadTimeout: time.Nanosecond}
		}
	}
	// A refusal left by an earlier request on this context (its connection
	// closed before anyone answered) must not answer this one.
	s.refusals.Take(h)
	return fasthttp.RequestConfig{ReadTimeout: s.cfg.BodyTimeout}
}

// expect decides Expect: 100-continue from the headers: a request that will
// be refused gets its refusal instead of 100 Continue, and the connection
// closes without its body being read.
func (s *server) expect(ctx *fasthttp.RequestCtx) int {
	code, msg := s.headerRefusal(&ctx.Request.Header)
	if code == "" && ctx.Request.Header.ContentLength() > BodyLimit {
		code, msg = domain.ETooLarge, "request body over 8 KiB"
	}
	if code == "" {
		return fasthttp.StatusContinue
	}
	s.transportAnswer(ctx, code, msg)
	return statusOf(code)
}

// transportError is fasthttp's ErrorHandler: the request could not be read.
// A connection that never started a request is closed without an answer.
func (s *server) transportError(ctx *fasthttp.RequestCtx, err error) {
	s.verified.drop(&ctx.Request.Header)
	var nerr net.Error
	timeout := errors.As(err, &nerr) && nerr.Timeout() || errors.Is(err, os.ErrDeadlineExceeded)
	if timeout && edge.SilenceIdle(ctx.Conn()) {
		return
	}
	var small *fasthttp.ErrSmallBuffer
	switch {
	case errors.As(err, &small):
		s.transportAnswer(ctx, domain.EHeadersTooLarge, "request headers over the server's limit")
		return
	case errors.Is(err, fasthttp.ErrDuplicateContentLength):
		s.transportAnswer(ctx, domain.EInvalid, "conflicting Content-Length")
		return
	}
	// A refusal decided on the headers wins over what the body read did
	// (while the headers are still being read, there is none yet).
	if !edge.ReadingHeaders(ctx.Conn()) {
		if r, ok := s.refusals.Take(&ctx.Request.Header); ok {
			s.transportAnswer(ctx, r.Code, r.Message)
			return
		}
	}
	switch {
	case timeout:
		s.transportAnswer(ctx, domain.ERequestTimeout, "request not completed in time")
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		s.transportAnswer(ctx, domain.ETooLarge, "request body over 8 KiB")
	case errors.Is(err, fasthttp.ErrUnsupportedTransferEncoding):
		s.transportAnswer(ctx, domain.EInvalid, "unsupported transfer coding")
	default:
		// fasthttp's error text may quote the request: never sent back.
		s.transportAnswer(ctx, domain.EInvalid, "malformed request")
	}
}

// transportAnswer writes the contract's error body on the raw context and
// counts it; the caller closes the connection where the contract says so
// (after this call: it resets the response).
func (s *server) transportAnswer(ctx *fasthttp.RequestCtx, code, message string) {
	status := statusOf(code)
	ctx.Response.Reset()
	ctx.SetStatusCode(status)
	ctx.SetContentType(mimeJSON)
	ctx.SetBody(errorBytes(code, message))
	s.m.request(routeTransport, status, -1)
	s.closeIfDraining(ctx)
}

const mimeJSON = "application/json"
