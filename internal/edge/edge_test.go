package edge

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// serve accepts on an Edge of limits and keeps what it accepted open;
// it returns the listener's address and the edge.
func serve(t *testing.T, limits Limits) (string, *Edge) {
	t.Helper()
	e, err := New(limits, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	eln := e.Listener(ln)
	t.Cleanup(func() { _ = eln.Close() })
	go func() {
		for {
			c, err := eln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = c.Close() })
		}
	}()
	return ln.Addr().String(), e
}

// closedByServer reports whether the server closed c without a word.
func closedByServer(t *testing.T, c net.Conn) bool {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	_, err := c.Read(make([]byte, 1))
	return err == io.EOF || isReset(err)
}

// isReset reports whether err is a network failure other than a timeout.
func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout()
}

// A client address holds at most MaxConnsPerAddr connections: the next is
// closed before anything is read, and counted; an exempt address is not
// capped.
func TestThePerAddressCapClosesTheNextConnection(t *testing.T) {
	for _, exempt := range []bool{false, true} {
		limits := Limits{MaxConns: 100, MaxConnsPerAddr: 2, Idle: time.Minute, Header: time.Minute}
		if exempt {
			limits.Exempt = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
		}
		addr, e := serve(t, limits)
		conns := make([]net.Conn, 3)
		for i := range conns {
			c, err := net.Dial("tcp", addr)
			if err != nil && (i < 2 || !isReset(err)) {
				t.Fatal(err)
			}
			if c != nil {
				t.Cleanup(func() { _ = c.Close() })
			}
			conns[i] = c // nil: reset as the dial completed, closed at once
		}
		if got := conns[2] == nil || closedByServer(t, conns[2]); got == exempt {
			t.Errorf("exempt %v: third connection closed %v", exempt, got)
		}
		if closedByServer(t, conns[0]) {
			t.Errorf("exempt %v: a connection within the cap was closed", exempt)
		}
		want := 1.0
		if exempt {
			want = 0
		}
		// The refusal is counted just after the connection closes.
		deadline := time.Now().Add(5 * time.Second)
		got := testutil.ToFloat64(e.refused.WithLabelValues("address"))
		for got != want && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
			got = testutil.ToFloat64(e.refused.WithLabelValues("address"))
		}
		if got != want {
			t.Errorf("exempt %v: %v refusals counted, want %v", exempt, got, want)
		}
	}
}

// connCap is the configured cap, else the descriptor limit less a reserve.
func TestConnCap(t *testing.T) {
	if got := connCap(123); got != 123 {
		t.Errorf("configured: %d", got)
	}
	if limit := fdLimit(); limit > 0 {
		if got := connCap(0); got >= limit || got < 8 {
			t.Errorf("fd limit %d: cap %d", limit, got)
		}
	}
}
