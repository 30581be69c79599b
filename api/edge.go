package api

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/ratelimit"
)

// The edge is what a connection meets before any handler: a cap on
// connections per process and per client address, accept errors that back
// off instead of ending the server, read timeouts per phase of a request,
// and the transport-level answers of the contract (every one with the
// error body, counted, never echoing the request).

// routeTransport labels the answers given before routing in the request metrics.
const routeTransport = "transport"

type edge struct {
	logger   *slog.Logger
	m        *metrics
	exempt   []netip.Prefix // trusted proxies and addresses: exempt from the per-address cap
	maxConns int64
	perAddr  int
	idle     time.Duration
	header   time.Duration

	open    atomic.Int64
	mu      sync.Mutex
	byAddr  map[netip.Addr]int
	lastLog atomic.Int64 // unix nanos of the last accept-error log line

	// Refusals decided on the headers, by request header, until answered.
	pending  sync.Map
	npending atomic.Int64

	refused      *prometheus.CounterVec
	acceptErrors prometheus.Counter
}

func newEdge(cfg *config.Config, logger *slog.Logger, m *metrics, reg prometheus.Registerer) (*edge, error) {
	e := &edge{
		logger:   logger,
		m:        m,
		exempt:   append(append([]netip.Prefix{}, cfg.TrustedProxies...), cfg.TrustedAddrs...),
		maxConns: int64(connCap(cfg.MaxConns)),
		perAddr:  cfg.MaxConnsPerAddr,
		idle:     cfg.IdleTimeout,
		header:   cfg.HeaderTimeout,
		byAddr:   map[netip.Addr]int{},
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_http_connections_refused_total",
			Help: "Connections closed before anything was read, by the cap they met (process or address).",
		}, []string{"cap"}),
		acceptErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_http_accept_errors_total",
			Help: "Accept errors (such as EMFILE) the listener backed off from.",
		}),
	}
	if limit := fdLimit(); limit > 0 && e.maxConns >= int64(limit) {
		logger.Warn("SECKILL_MAX_CONNS is not below the file descriptor limit: accept will meet EMFILE and back off",
			"max_connections", e.maxConns, "fd_limit", limit)
	}
	var err error
	if e.refused, err = register(reg, e.refused); err != nil {
		return nil, err
	}
	if e.acceptErrors, err = register(reg, e.acceptErrors); err != nil {
		return nil, err
	}
	open := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "seckill_http_connections_open",
		Help: "Client connections open on the API.",
	}, func() float64 { return float64(e.open.Load()) })
	if _, err := register[prometheus.Collector](reg, open); err != nil {
		return nil, err
	}
	return e, nil
}

// connCap is the per-process connection cap: the configured one, else the
// file descriptor limit less a reserve for Redis, MySQL, Temporal, logs and
// the listener (an eighth, at least 64: an idle API already holds about 32,
// 16 of them the Redis pool's warm connections), so a crowd cannot take
// the descriptors the backends need.
func connCap(configured int) int {
	if configured > 0 {
		return configured
	}
	limit := fdLimit()
	if limit == 0 {
		return 1 << 16
	}
	return max(limit-max(64, limit/8), 8)
}

// fdLimit is the process's file descriptor limit; 0 when unknown or
// practically unlimited.
func fdLimit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == 0 || rl.Cur > 1<<24 {
		return 0
	}
	return int(rl.Cur)
}

// listener wraps ln with the caps, the accept back-off and the per-phase
// read timeouts.
func (e *edge) listener(ln net.Listener) net.Listener { return &edgeListener{Listener: ln, e: e} }

type edgeListener struct {
	net.Listener
	e *edge
}

// Accept never returns an error but the listener's closing: EMFILE, ENFILE,
// ECONNABORTED and the like are waited out with a growing pause (5 ms to
// 1 s), so the server goes on once descriptors are free again.
func (l *edgeListener) Accept() (net.Conn, error) {
	var delay time.Duration
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil, err
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			l.e.acceptFailed(err, delay)
			time.Sleep(delay)
			continue
		}
		delay = 0
		if ec := l.e.admit(c); ec != nil {
			return ec, nil
		}
	}
}

func (e *edge) acceptFailed(err error, delay time.Duration) {
	e.acceptErrors.Inc()
	now := time.Now().UnixNano()
	if last := e.lastLog.Load(); now-last > int64(10*time.Second) && e.lastLog.CompareAndSwap(last, now) {
		e.logger.Warn("accept failed; backing off", "err", err, "delay", delay, "open_connections", e.open.Load())
	}
}

// admit applies the caps: an over-cap connection is closed before anything
// is read from it and counted.
func (e *edge) admit(c net.Conn) *edgeConn {
	if e.open.Add(1) > e.maxConns {
		e.open.Add(-1)
		e.refuse(c, "process")
		return nil
	}
	var addr netip.Addr
	if tcp, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		addr, _ = netip.AddrFromSlice(tcp.IP)
		addr = addr.Unmap()
	}
	capped := e.perAddr > 0 && !ratelimit.InPrefixes(addr, e.exempt)
	if capped {
		e.mu.Lock()
		n := e.byAddr[addr]
		if n >= e.perAddr {
			e.mu.Unlock()
			e.open.Add(-1)
			e.refuse(c, "address")
			return nil
		}
		e.byAddr[addr] = n + 1
		e.mu.Unlock()
	}
	ec := &edgeConn{Conn: c, e: e, addr: addr, capped: capped}
	// A new connection waits for its first byte like an idle keep-alive one.
	_ = c.SetReadDeadline(time.Now().Add(e.idle))
	return ec
}

func (e *edge) refuse(c net.Conn, reason string) {
	if tcp, ok := c.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0) // no lingering send buffer for a connection we never served
	}
	_ = c.Close()
	e.refused.WithLabelValues(reason).Inc()
}

// Phases of the request being read on a connection.
const (
	phaseIdle   int32 = iota // waiting for a request's first byte
	phaseHeader              // the first byte arrived; reading the headers
	phaseBody                // headers read; reading the body or serving
)

// edgeConn tracks which phase of a request a connection is in, so the read
// deadline is the idle time before a request's first byte, the header time
// from that byte, and the body time (set by HeaderReceived) after the
// headers. fasthttp itself sets only the idle and body deadlines.
type edgeConn struct {
	net.Conn
	e      *edge
	addr   netip.Addr
	capped bool
	phase  atomic.Int32
	silent atomic.Bool // write nothing: the connection is closed without an answer
	closed atomic.Bool
}

func (c *edgeConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.phase.CompareAndSwap(phaseIdle, phaseHeader) {
		_ = c.Conn.SetReadDeadline(time.Now().Add(c.e.header))
	}
	return n, err
}

// SetReadDeadline is called by fasthttp in this order per request: the idle
// deadline before the first byte (keep-alive; the previous request ended in
// the body phase), a zero deadline once the first byte arrived (ignored in
// the header phase: the header deadline holds), the body deadline from
// HeaderReceived. A pipelined request read from the buffer never calls
// Read, so its body deadline arrives in the idle phase.
func (c *edgeConn) SetReadDeadline(t time.Time) error {
	switch c.phase.Load() {
	case phaseHeader:
		if t.IsZero() {
			return nil
		}
		c.phase.Store(phaseBody)
	case phaseBody:
		c.phase.Store(phaseIdle)
	case phaseIdle:
		if !t.IsZero() {
			c.phase.Store(phaseBody)
		}
	}
	return c.Conn.SetReadDeadline(t)
}

func (c *edgeConn) Write(p []byte) (int, error) {
	if c.silent.Load() {
		return 0, net.ErrClosed
	}
	return c.Conn.Write(p)
}

func (c *edgeConn) Close() error {
	err := c.Conn.Close()
	if c.closed.CompareAndSwap(false, true) {
		c.e.open.Add(-1)
		if c.capped {
			c.e.mu.Lock()
			if n := c.e.byAddr[c.addr] - 1; n > 0 {
				c.e.byAddr[c.addr] = n
			} else {
				delete(c.e.byAddr, c.addr)
			}
			c.e.mu.Unlock()
		}
	}
	return err
}

// --- answers given before routing ---

// knownMethod is one of the methods the router knows; anything else is 501.
func knownMethod(m []byte) bool {
	switch string(m) {
	case fasthttp.MethodGet, fasthttp.MethodHead, fasthttp.MethodPost, fasthttp.MethodPut, fasthttp.MethodDelete,
		fasthttp.MethodConnect, fasthttp.MethodOptions, fasthttp.MethodTrace, fasthttp.MethodPatch:
		return true
	}
	return false
}

// framingProblem names a request whose length is ambiguous: Content-Length
// together with Transfer-Encoding, or a transfer coding other than chunked
// alone (fasthttp refuses duplicate lengths and unknown codings itself, but
// lets chunked win over a Content-Length and takes "identity").
func framingProblem(h *fasthttp.RequestHeader) string {
	raw := h.RawHeaders()
	if h.ContentLength() == -1 {
		if hasRawHeader(raw, "content-length") {
			return "Content-Length together with Transfer-Encoding"
		}
		return ""
	}
	if bytes.Contains(raw, []byte("ransfer-")) || bytes.Contains(raw, []byte("RANSFER-")) {
		if hasRawHeader(raw, "transfer-encoding") {
			return "unsupported transfer coding"
		}
	}
	return ""
}

// hasRawHeader reports whether the raw header block has a field named name
// (lower case).
func hasRawHeader(raw []byte, name string) bool {
	for len(raw) > 0 {
		line := raw
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		if colon := bytes.IndexByte(line, ':'); colon == len(name) && bytes.EqualFold(line[:colon], []byte(name)) {
			return true
		}
	}
	return false
}

// wrapHandler answers what the router must not see: an unknown method (501)
// and ambiguous framing (400, connection closed).
func (s *server) wrapHandler(next fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if r, ok := s.edge.takeRefusal(&ctx.Request.Header); ok {
			// The refused body arrived with the headers; it is not looked at.
			s.transportAnswer(ctx, r.code, r.message)
			ctx.SetConnectionClose()
			return
		}
		if !knownMethod(ctx.Method()) {
			s.transportAnswer(ctx, domain.ENotImplemented, "method not implemented")
			return
		}
		if p := framingProblem(&ctx.Request.Header); p != "" {
			s.transportAnswer(ctx, domain.EInvalid, p)
			ctx.SetConnectionClose()
			return
		}
		next(ctx)
	}
}

// headerRefusal is the answer a request gets from its headers alone, or ""
// when its headers pass: ambiguous framing, a refused bearer token on a
// route that needs one, malformed webhook headers.
func (s *server) headerRefusal(h *fasthttp.RequestHeader) (code, message string) {
	if p := framingProblem(h); p != "" {
		return domain.EInvalid, p
	}
	return s.routeRefusal(h)
}

// headerReceived runs once the headers are read, before the body: it sets
// the body's read timeout and, for a request that will be refused, makes
// the body read fail at once, so a refused body is never read (the error
// handler then gives the refusal and closes the connection).
func (s *server) headerReceived(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	if n := h.ContentLength(); (n > 0 || n == -1) && !bytes.EqualFold(h.Peek(fasthttp.HeaderExpect), []byte("100-continue")) {
		if code, msg := s.headerRefusal(h); code != "" {
			if _, loaded := s.edge.pending.Swap(h, refusal{code, msg}); !loaded {
				s.edge.npending.Add(1)
			}
			return fasthttp.RequestConfig{ReadTimeout: time.Nanosecond}
		}
	}
	// A refusal left by an earlier request on this context (its connection
	// closed before anyone answered) must not answer this one.
	s.edge.takeRefusal(h)
	return fasthttp.RequestConfig{ReadTimeout: s.cfg.BodyTimeout}
}

// refusal is a decision taken on the headers, kept for the answer: a
// failed body read resets the request, headers included.
type refusal struct{ code, message string }

// takeRefusal returns and forgets the refusal decided on h's headers.
func (e *edge) takeRefusal(h *fasthttp.RequestHeader) (refusal, bool) {
	if e.npending.Load() == 0 {
		return refusal{}, false
	}
	v, ok := e.pending.LoadAndDelete(h)
	if !ok {
		return refusal{}, false
	}
	e.npending.Add(-1)
	return v.(refusal), true
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
	var nerr net.Error
	timeout := errors.As(err, &nerr) && nerr.Timeout() || errors.Is(err, os.ErrDeadlineExceeded)
	ec, _ := ctx.Conn().(*edgeConn)
	if timeout && ec != nil && ec.phase.Load() == phaseIdle {
		ec.silent.Store(true)
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
	if ec == nil || ec.phase.Load() != phaseHeader {
		if r, ok := s.edge.takeRefusal(&ctx.Request.Header); ok {
			s.transportAnswer(ctx, r.code, r.message)
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
}

const mimeJSON = "application/json"
