package api

import (
	"bufio"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/internal/testkit/proc"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

// wireClient sends raw HTTP/1.1 requests to a server over an in-memory
// connection, so a request goes through the whole stack a socket's does
// (the edge, the header hook, the body read, the router, the middleware)
// without the kernel's share.
type wireClient struct {
	tb   testing.TB
	ln   *fasthttputil.InmemoryListener
	port int
	conn net.Conn
	br   *bufio.Reader
	resp fasthttp.Response
}

// serveInMemory serves h's server on an in-memory listener.
func serveInMemory(tb testing.TB, h *harness) *fasthttputil.InmemoryListener {
	ln := fasthttputil.NewInmemoryListener()
	go func() { _ = h.server.Serve(ln) }()
	tb.Cleanup(func() { _ = ln.Close() })
	return ln
}

// dial connects from its own loopback port, as a client of its own.
func (w *wireClient) dial() {
	w.port++
	conn, err := w.ln.DialWithLocalAddr(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: w.port})
	require.NoError(w.tb, err)
	w.conn, w.br = conn, bufio.NewReader(conn)
}

// roundTrip writes req and reads the answer into w.resp, reconnecting when
// the server closed the connection after it.
func (w *wireClient) roundTrip(req []byte) {
	if w.conn == nil {
		w.dial()
	}
	if _, err := w.conn.Write(req); err != nil {
		w.tb.Fatalf("write: %v", err)
	}
	w.resp.Reset()
	if err := w.resp.Read(w.br); err != nil {
		w.tb.Fatalf("read answer: %v", err)
	}
	if w.resp.ConnectionClose() {
		_ = w.conn.Close()
		w.conn = nil
	}
}

// refusalCase is one kind of request of a burst, timed on its own.
type refusalCase struct {
	name   string
	client *wireClient
	status int
	// request is the case's next request (a new token each time for a
	// crowd of distinct users).
	request func() []byte
	spent   time.Duration
	cpu     time.Duration
}

// serve sends n of the case's requests, timed together: the CPU clock's
// reading costs a system call, too much to take around each request.
func (c *refusalCase) serve(b *testing.B, n int) {
	cpu0, start := processCPU(b), time.Now()
	for range n {
		c.client.roundTrip(c.request())
		if got := c.client.resp.StatusCode(); got != c.status {
			b.Fatalf("%s: status %d, want %d: %s", c.name, got, c.status, c.client.resp.Body())
		}
	}
	c.spent += time.Since(start)
	c.cpu += processCPU(b) - cpu0
}

// processCPU is the process's CPU time: it includes the client's share
// (alike in every case) and the server's background work.
func processCPU(tb testing.TB) time.Duration {
	cpu, err := proc.SelfCPU()
	if err != nil {
		tb.Fatal(err)
	}
	return cpu
}

func reserveWire(saleID int64, token, requestID string) []byte {
	body := `{"request_id":"` + requestID + `"}`
	return []byte("POST /api/v1/sales/" + strconv.FormatInt(saleID, 10) + "/reservations HTTP/1.1\r\nHost: api.test\r\n" +
		"Authorization: Bearer " + token + "\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}

// BenchmarkRefusalCost: what each answer of a flash sale's burst costs the
// API, as a ratio to GET /healthz through the same stack, interleaved in
// one run. The cases: sold out (one user repeating, and a new
// user each time, whose token the cache has not seen), a user over the
// per-user rate, a user who already holds a unit (the reserve script's
// refusal), a bad token (refused on the headers, the connection closed),
// and a 202 (a replay the script answers). Reported per request: the
// process's CPU time (<case>_cpu_ns, the client's share and background
// work included) and its ratio to the probe's (<case>_cpu_vs_healthz, 1.0:
// as cheap as the probe), and the wall time (<case>_ns).
func BenchmarkRefusalCost(b *testing.B) {
	h := MustHarness(b, func(c *config.Config) { c.GlobalRPS, c.PerAddrRPS, c.PerUserRPS = 1e9, 1e9, 1e9 })
	// The per-user bucket is the whole configuration's: the user over the
	// rate is on a server of its own.
	limited := MustHarness(b, func(c *config.Config) {
		c.GlobalRPS, c.PerAddrRPS, c.PerUserRPS, c.PerUserBurst = 1e9, 1e9, 1e-6, 1
	})
	soldOut := h.MustWarmSale(1)
	require.Equal(b, 202, h.reserve(soldOut.ID, h.MustToken(testenv.UniqueUser(), ""), "refusal-bench-0").Status)
	inStock := h.MustWarmSale(1_000_000)
	holder := h.MustToken(testenv.UniqueUser(), "")
	require.Equal(b, 202, h.reserve(inStock.ID, holder, "refusal-bench-held").Status)
	limitedUser := limited.MustToken(testenv.UniqueUser(), "")
	limitedSale := limited.MustWarmSale(1_000)
	require.Equal(b, 202, limited.reserve(limitedSale.ID, limitedUser, "refusal-bench-lim").Status)
	// The bucket holds at least two: the second request spends the last.
	require.Equal(b, 409, limited.reserve(limitedSale.ID, limitedUser, "refusal-bench-2").Status)
	time.Sleep(1500 * time.Millisecond) // the sold-out mark reaches the cache

	ln, limitedLn := serveInMemory(b, h), serveInMemory(b, limited)
	client := func(ln *fasthttputil.InmemoryListener) *wireClient {
		return &wireClient{tb: b, ln: ln, port: 20000}
	}
	fixed := func(req []byte) func() []byte { return func() []byte { return req } }
	repeat := h.MustToken(testenv.UniqueUser(), "")
	newUsers := make([][]byte, b.N)
	for i := range newUsers {
		newUsers[i] = reserveWire(soldOut.ID, h.MustToken(testenv.UniqueUser(), ""), "refusal-bench-1")
	}
	newUser := func() []byte {
		req := newUsers[0]
		newUsers = newUsers[1:]
		return req
	}
	cases := []*refusalCase{
		{name: "healthz", client: client(ln), status: 200, request: fixed([]byte("GET /healthz HTTP/1.1\r\nHost: api.test\r\n\r\n"))},
		{name: "soldout_repeat", client: client(ln), status: 410, request: fixed(reserveWire(soldOut.ID, repeat, "refusal-bench-1"))},
		{name: "soldout_new_user", client: client(ln), status: 410, request: newUser},
		{name: "rate_limited", client: client(limitedLn), status: 429, request: fixed(reserveWire(limitedSale.ID, limitedUser, "refusal-bench-2"))},
		{name: "holder", client: client(ln), status: 409, request: fixed(reserveWire(inStock.ID, holder, "refusal-bench-2"))},
		{name: "bad_token", client: client(ln), status: 401, request: fixed(reserveWire(soldOut.ID, repeat+"x", "refusal-bench-1"))},
		{name: "accepted_replay", client: client(ln), status: 202, request: fixed(reserveWire(inStock.ID, holder, "refusal-bench-held"))},
	}
	b.ReportAllocs()
	b.ResetTimer()
	// Blocks of each case in turn, each case first in turn, so drift
	// charges all alike.
	const block = 50
	for done := 0; done < b.N; done += block {
		for j := range cases {
			cases[(done/block+j)%len(cases)].serve(b, min(block, b.N-done))
		}
	}
	b.StopTimer()
	base := cases[0]
	for _, c := range cases {
		b.ReportMetric(float64(c.spent.Nanoseconds())/float64(b.N), c.name+"_ns")
		b.ReportMetric(float64(c.cpu.Nanoseconds())/float64(b.N), c.name+"_cpu_ns")
		if c != base {
			b.ReportMetric(float64(c.cpu)/float64(base.cpu), c.name+"_cpu_vs_healthz")
		}
	}
}
