// Package netproxy is a TCP proxy for tests and benchmarks: it puts a
// network round trip between a client and a server on loopback, and it can
// be cut, as a dead server would be.
package netproxy

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy is a TCP proxy that delays every chunk by a fixed time in each
// direction, to put a network round trip between a client and a server on
// loopback. Chunks are delayed, not the connection serialised: bytes keep
// flowing while earlier ones wait out their delay.
type Proxy struct {
	ln     net.Listener
	target string
	delay  atomic.Int64 // nanoseconds; SetDelay changes it for chunks read later
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	cut    bool // refusing: as a dead server would
	// held, while set, is closed when the link heals: bytes wait, as on a
	// partitioned link whose packets are retransmitted until it heals.
	held atomic.Pointer[chan struct{}]
}

// Start listens on a free loopback port and forwards to target, delaying
// each chunk by delay in each direction (0: no delay).
func Start(target string, delay time.Duration) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy listen: %w", err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.delay.Store(int64(delay))
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's listen address.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Close stops accepting, closes every connection and waits for the pumps.
func (p *Proxy) Close() error {
	p.SetHeld(false)
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

// SetDelay changes the delay of every chunk read from now on, in each
// direction (a slowed link; 0 restores it).
func (p *Proxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

// SetCut cuts the proxy (every connection dropped, new ones closed at
// once, as a dead server would) or restores it.
func (p *Proxy) SetCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			_ = c.Close()
		}
		clear(p.conns)
	}
}

// SetHeld partitions the link without refusing anything: connections are
// accepted and kept, their bytes held until the link heals (false), as a
// network path that drops packets would. Clients see calls time out, not
// fail.
func (p *Proxy) SetHeld(held bool) {
	if held {
		ch := make(chan struct{})
		p.held.CompareAndSwap(nil, &ch)
		return
	}
	if ch := p.held.Swap(nil); ch != nil {
		close(*ch)
	}
}

func (p *Proxy) isCut() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cut
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				slog.Warn("proxy accept", "err", err)
			}
			return
		}
		if p.isCut() {
			_ = client.Close()
			continue
		}
		server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			slog.Warn("proxy dial", "target", p.target, "err", err)
			_ = client.Close()
			continue
		}
		if !p.track(client) || !p.track(server) {
			_ = client.Close()
			_ = server.Close()
			return
		}
		p.wg.Add(2)
		go p.pump(server, client)
		go p.pump(client, server)
	}
}

type chunk struct {
	b  []byte
	at time.Time // when it may be written
}

// pump copies src to dst, each chunk held back by the delay.
func (p *Proxy) pump(dst, src net.Conn) {
	defer p.wg.Done()
	q := make(chan chunk, 4096)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		for c := range q {
			if d := time.Until(c.at); d > 0 {
				time.Sleep(d)
			}
			if held := p.held.Load(); held != nil {
				<-*held
			}
			if _, err := dst.Write(c.b); err != nil {
				// Keep draining so the reader never blocks on a dead peer.
				continue
			}
		}
		// Half-close so the peer sees EOF, then let the other pump finish.
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	}()
	buf := make([]byte, 32*1024)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			b := make([]byte, n)
			copy(b, buf[:n])
			q <- chunk{b: b, at: time.Now().Add(time.Duration(p.delay.Load()))}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				slog.Debug("proxy read", "err", err)
			}
			break
		}
	}
	close(q)
	<-writerDone
}
