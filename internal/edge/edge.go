// Package edge is what a connection to the API meets before any handler:
// a cap on connections per process and per client address (closing, not
// answering), accept errors that back off instead of ending the server,
// read timeouts per phase of a request, the HTTP framing rules checked
// before routing, and the client address behind trusted proxies.
package edge

import (
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/internal/promreg"
	"github.com/seckill/seckill/internal/ratelimit"
)

// Edge caps and times the connections of one listener.
type Edge struct {
	logger   *slog.Logger
	exempt   []netip.Prefix // trusted proxies and addresses: exempt from the per-address cap
	maxConns int64
	perAddr  int
	idle     time.Duration
	header   time.Duration

	open    atomic.Int64
	mu      sync.Mutex
	byAddr  map[netip.Addr]int
	lastLog atomic.Int64 // unix nanos of the last accept-error log line

	refused      *prometheus.CounterVec
	acceptErrors prometheus.Counter
}

// Limits are an Edge's caps and read timeouts. MaxConns 0 is the file
// descriptor limit less a reserve (connCap); Exempt addresses have no
// per-address cap.
type Limits struct {
	MaxConns, MaxConnsPerAddr int
	Exempt                    []netip.Prefix
	Idle, Header              time.Duration
}

// New is an Edge of limits, its metrics registered in reg.
func New(limits Limits, logger *slog.Logger, reg prometheus.Registerer) (*Edge, error) {
	e := &Edge{
		logger:   logger,
		exempt:   limits.Exempt,
		maxConns: int64(connCap(limits.MaxConns)),
		perAddr:  limits.MaxConnsPerAddr,
		idle:     limits.Idle,
		header:   limits.Header,
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
	if e.refused, err = promreg.Register(reg, e.refused); err != nil {
		return nil, err
	}
	if e.acceptErrors, err = promreg.Register(reg, e.acceptErrors); err != nil {
		return nil, err
	}
	open := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "seckill_http_connections_open",
		Help: "Client connections open on the API.",
	}, func() float64 { return float64(e.open.Load()) })
	if _, err := promreg.Register[prometheus.Collector](reg, open); err != nil {
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

// Listener wraps ln with the caps, the accept back-off and the per-phase
// read timeouts.
func (e *Edge) Listener(ln net.Listener) net.Listener { return &edgeListener{Listener: ln, e: e} }

type edgeListener struct {
	net.Listener
	e *Edge
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

func (e *Edge) acceptFailed(err error, delay time.Duration) {
	e.acceptErrors.Inc()
	now := time.Now().UnixNano()
	if last := e.lastLog.Load(); now-last > int64(10*time.Second) && e.lastLog.CompareAndSwap(last, now) {
		e.logger.Warn("accept failed; backing off", "err", err, "delay", delay, "open_connections", e.open.Load())
	}
}

// admit applies the caps: an over-cap connection is closed before anything
// is read from it and counted.
func (e *Edge) admit(c net.Conn) *edgeConn {
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

func (e *Edge) refuse(c net.Conn, reason string) {
	if tcp, ok := c.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0) // no lingering send buffer for a connection we never served
	}
	_ = c.Close()
	e.refused.WithLabelValues(reason).Inc()
}

// MaxConns is the per-process connection cap.
func (e *Edge) MaxConns() int64 { return e.maxConns }

// SilenceIdle reports whether c is an Edge connection that was waiting for a
// request's first byte; it then writes nothing more (closed without an
// answer).
func SilenceIdle(c net.Conn) bool {
	ec, ok := c.(*edgeConn)
	if !ok || ec.phase.Load() != phaseIdle {
		return false
	}
	ec.silent.Store(true)
	return true
}

// ReadingHeaders reports whether c is an Edge connection still reading a
// request's headers.
func ReadingHeaders(c net.Conn) bool {
	ec, ok := c.(*edgeConn)
	return ok && ec.phase.Load() == phaseHeader
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
	e      *Edge
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
