package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/wire"
)

// rawAnswer is what came back on a raw connection: every byte until the
// server closed it or the wait ran out.
type rawAnswer struct {
	raw    string
	closed bool // the server closed the connection
}

func (a rawAnswer) status(tb testing.TB) int {
	tb.Helper()
	line, _, _ := strings.Cut(a.raw, "\r\n")
	f := strings.Fields(line)
	require.GreaterOrEqual(tb, len(f), 2, "no status line in %q", a.raw)
	n, err := strconv.Atoi(f[1])
	require.NoError(tb, err)
	return n
}

func (a rawAnswer) code(tb testing.TB) string {
	tb.Helper()
	_, body, ok := strings.Cut(a.raw, "\r\n\r\n")
	require.True(tb, ok, "no body in %q", a.raw)
	var e wire.ErrorBody
	require.NoError(tb, json.Unmarshal([]byte(body), &e), "body %q", body)
	require.NotEmpty(tb, e.Error.Message)
	return e.Error.Code
}

// rawExchange writes parts (with pause between them) on a new connection
// and reads until the server closes it or wait passes.
func rawExchange(tb testing.TB, addr string, wait, pause time.Duration, parts ...string) rawAnswer {
	tb.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(tb, err)
	defer c.Close()
	for i, p := range parts {
		if i > 0 {
			time.Sleep(pause)
		}
		if _, err := c.Write([]byte(p)); err != nil {
			break // the server may close early, which the test then sees
		}
	}
	require.NoError(tb, c.SetReadDeadline(time.Now().Add(wait)))
	b, err := io.ReadAll(c)
	var ne net.Error
	timedOut := err != nil && errors.As(err, &ne) && ne.Timeout()
	return rawAnswer{raw: string(b), closed: !timedOut}
}

// TestEdgeRawAnswers sends what a proxy, an attacker or a slow client would
// over raw sockets: every answer is the contract's, with its error body,
// never echoing the request, and the connection is closed where the
// contract says so.
func TestEdgeRawAnswers(t *testing.T) {
	h := MustHarness(t, func(c *config.Config) {
		c.IdleTimeout = 400 * time.Millisecond
		c.HeaderTimeout = 400 * time.Millisecond
		c.BodyTimeout = 400 * time.Millisecond
	})
	addr := strings.TrimPrefix(h.base, "http://")
	user := h.MustToken(testenv.UniqueUser(), "")
	for _, tc := range edgeCases(user) {
		t.Run(tc.name, func(t *testing.T) {
			a := rawExchange(t, addr, 3*time.Second, 50*time.Millisecond, tc.parts...)
			require.Equal(t, tc.status, a.status(t), a.raw)
			require.Equal(t, tc.code, a.code(t), a.raw)
			require.NotContains(t, a.raw, "SECRET-TOKEN-BYTES")
			require.NotContains(t, a.raw, "Bad Header")
			require.Contains(t, a.raw, "\r\nDate: ")
			require.Contains(t, a.raw, "\r\nContent-Type: application/json")
			if tc.closed {
				require.True(t, a.closed, "connection left open after %q", a.raw)
				require.Contains(t, strings.ToLower(a.raw), "\r\nconnection: close")
			}
		})
	}

	testIdleConnections(t, addr, user)
	testExpectContinue(t, addr, user)
	// Every transport answer above was counted.
	r := h.do("GET", "/metrics", "", "")
	require.Equal(t, 200, r.Status)
	for _, status := range []string{"400", "401", "403", "408", "413", "431", "501"} {
		require.Contains(t, string(r.Body), `seckill_http_requests_total{route="transport",status="`+status+`"}`, "status %s not counted", status)
	}
}

// rawReserveHead starts a raw reservation request.
const rawReserveHead = "POST /api/v1/sales/1/reservations HTTP/1.1\r\nHost: t\r\n"

// edgeCase is a raw exchange and the answer it must get.
type edgeCase struct {
	name   string
	parts  []string
	status int
	code   string
	closed bool
}

// edgeCases are requests the transport must refuse, with the contract's
// status and code, echoing nothing of what was sent.
func edgeCases(user string) []edgeCase {
	const secret = "Bearer SECRET-TOKEN-BYTES"
	res := rawReserveHead
	big := strings.Repeat("x", 9000)
	nowTS := strconv.FormatInt(time.Now().Unix(), 10)
	return []edgeCase{
		{"conflicting content-length", []string{res + "Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"}, 400, domain.EInvalid, true},
		{"same content-length twice", []string{res + "Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}"}, 400, domain.EInvalid, true},
		{"content-length with chunked", []string{res + "Authorization: Bearer " + user + "\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"}, 400, domain.EInvalid, true},
		{"chunked with content-length, no token", []string{"POST /webhooks/payments HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n3\r\nabc\r\n0\r\n\r\n"}, 400, domain.EInvalid, true},
		{"unknown transfer coding", []string{res + "Authorization: Bearer " + user + "\r\nTransfer-Encoding: gzip\r\n\r\nxx"}, 400, domain.EInvalid, true},
		{"identity transfer coding", []string{res + "Authorization: Bearer " + user + "\r\nTransfer-Encoding: identity\r\nContent-Length: 2\r\n\r\n{}"}, 400, domain.EInvalid, true},
		{"identity without length", []string{"GET /healthz HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: identity\r\n\r\n"}, 400, domain.EInvalid, true},
		{"chunked not last", []string{res + "Transfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n"}, 400, domain.EInvalid, true},
		{"two transfer-encodings", []string{res + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"}, 400, domain.EInvalid, true},
		{"malformed header echoes nothing", []string{res + "Authorization: " + secret + "\r\nBad Header Line\r\n\r\n"}, 400, domain.EInvalid, true},
		{"unknown method", []string{"BREW / HTTP/1.1\r\nHost: t\r\nAuthorization: " + secret + "\r\n\r\n"}, 501, domain.ENotImplemented, false},
		{"headers too large", []string{"GET /healthz HTTP/1.1\r\nHost: t\r\nAuthorization: " + secret + "\r\nX-Big: " + strings.Repeat("a", 10000) + "\r\n\r\n"}, 431, domain.EHeadersTooLarge, true},
		{"unauthenticated big body", []string{res + "Content-Length: 9000\r\n\r\n" + big}, 401, domain.EUnauthorized, true},
		{"unauthenticated body in the headers' packet", []string{res + "Content-Length: 2\r\n\r\n{}"}, 401, domain.EUnauthorized, true},
		{"unauthenticated chunked body", []string{res + "Transfer-Encoding: chunked\r\n\r\n", "5\r\nhello\r\n0\r\n\r\n"}, 401, domain.EUnauthorized, true},
		{"user token on admin with body", []string{"POST /admin/v1/sales HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer " + user + "\r\nContent-Length: 9000\r\n\r\n" + big}, 403, domain.EForbidden, true},
		{"webhook without signature", []string{"POST /webhooks/payments HTTP/1.1\r\nHost: t\r\nX-Timestamp: " + nowTS + "\r\nContent-Length: 9000\r\n\r\n" + big}, 401, domain.EUnauthorized, true},
		{"webhook old timestamp", []string{"POST /webhooks/payments HTTP/1.1\r\nHost: t\r\nX-Timestamp: 1000\r\nX-Signature: sha256=" + strings.Repeat("ab", 32) + "\r\nContent-Length: 20\r\n\r\n", "{}"}, 401, domain.EUnauthorized, true},
		{"webhook well-formed headers, body over 8 KiB", []string{"POST /webhooks/payments HTTP/1.1\r\nHost: t\r\nX-Timestamp: " + nowTS + "\r\nX-Signature: sha256=" + strings.Repeat("ab", 32) + "\r\nContent-Type: application/json\r\nContent-Length: 9000\r\n\r\n" + big}, 413, domain.ETooLarge, true},
		{"authenticated big body", []string{res + "Authorization: Bearer " + user + "\r\nContent-Length: 9000\r\n\r\n" + big}, 413, domain.ETooLarge, true},
		{"headers not completed in time", []string{"GET /healthz HTTP/1.1\r\nHost: t\r\n"}, 408, domain.ERequestTimeout, true},
		{"body not completed in time", []string{res + "Authorization: Bearer " + user + "\r\nContent-Length: 30\r\n\r\n{\"req"}, 408, domain.ERequestTimeout, true},
	}
}

// testIdleConnections: idle connections close without an answer, and a
// request's header time starts with the request.
func testIdleConnections(t *testing.T, addr, user string) {
	res := rawReserveHead
	t.Run("idle connection closed without an answer", func(t *testing.T) {
		start := time.Now()
		a := rawExchange(t, addr, 3*time.Second, 0)
		require.True(t, a.closed)
		require.Empty(t, a.raw)
		require.Less(t, time.Since(start), 2*time.Second)
	})

	t.Run("idle keep-alive connection closed without a second answer", func(t *testing.T) {
		a := rawExchange(t, addr, 3*time.Second, 0, "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
		require.True(t, a.closed)
		require.Equal(t, 1, strings.Count(a.raw, "HTTP/1.1 "), a.raw)
		require.Equal(t, 200, a.status(t))
	})

	t.Run("a request started late in the idle time gets its own header time", func(t *testing.T) {
		a := rawExchange(t, addr, 3*time.Second, 300*time.Millisecond, "G", "ET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
		require.Equal(t, 200, a.status(t), a.raw)
	})

	t.Run("a pipelined request read from the buffer still gets its 408", func(t *testing.T) {
		a := rawExchange(t, addr, 3*time.Second, 0, "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n"+
			res+"Authorization: Bearer "+user+"\r\nContent-Length: 30\r\n\r\n{\"req")
		require.Equal(t, 2, strings.Count(a.raw, "HTTP/1.1 "), a.raw)
		require.Contains(t, a.raw, "HTTP/1.1 408 ")
		require.Contains(t, a.raw, domain.ERequestTimeout)
		require.True(t, a.closed)
	})
}

// testExpectContinue: 100-continue is refused from the headers when they
// already decide the answer, and sent otherwise.
func testExpectContinue(t *testing.T, addr, user string) {
	res := rawReserveHead
	t.Run("expect 100-continue refused from the headers", func(t *testing.T) {
		a := rawExchange(t, addr, 3*time.Second, 0, res+"Expect: 100-continue\r\nContent-Length: 9000\r\n\r\n")
		require.NotContains(t, a.raw, "100 Continue")
		require.Equal(t, 401, a.status(t), a.raw)
		require.Equal(t, domain.EUnauthorized, a.code(t))
		require.True(t, a.closed)
	})

	t.Run("expect 100-continue with an oversized length", func(t *testing.T) {
		a := rawExchange(t, addr, 3*time.Second, 0, res+"Authorization: Bearer "+user+"\r\nExpect: 100-continue\r\nContent-Length: 9000\r\n\r\n")
		require.NotContains(t, a.raw, "100 Continue")
		require.Equal(t, 413, a.status(t), a.raw)
		require.Equal(t, domain.ETooLarge, a.code(t))
		require.True(t, a.closed)
	})

	t.Run("expect 100-continue accepted with a token", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		body := `{"request_id":"edge-expect-01"}`
		_, err = c.Write([]byte("POST /api/v1/sales/999999999/reservations HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer " + user +
			"\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"))
		require.NoError(t, err)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(3*time.Second)))
		br := bufio.NewReader(c)
		line, err := br.ReadString('\n')
		require.NoError(t, err)
		require.Contains(t, line, "100 Continue")
		_, err = c.Write([]byte(body))
		require.NoError(t, err)
		resp, err := http.ReadResponse(skipBlank(br), nil)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, 404, resp.StatusCode) // the body was read and judged: no such sale
	})
}

// skipBlank drops the blank line after an interim 100 response.
func skipBlank(br *bufio.Reader) *bufio.Reader {
	for {
		b, err := br.Peek(2)
		if err != nil || !bytes.Equal(b, []byte("\r\n")) {
			return br
		}
		_, _ = br.Discard(2)
	}
}

// TestEdgePerAddressCap: connections over the per-address cap are closed
// before anything is read and counted; trusted proxies are exempt.
func TestEdgePerAddressCap(t *testing.T) {
	hold := func(addr string, n int) []net.Conn {
		var cs []net.Conn
		for range n {
			c, err := net.Dial("tcp", addr)
			require.NoError(t, err)
			t.Cleanup(func() { _ = c.Close() })
			cs = append(cs, c)
		}
		time.Sleep(100 * time.Millisecond) // accepted and counted by now
		return cs
	}
	get := "GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"

	h := MustHarness(t, func(c *config.Config) { c.MaxConnsPerAddr, c.TrustedAddrs = 4, nil })
	addr := strings.TrimPrefix(h.base, "http://")
	held := hold(addr, 4)
	if c, err := net.Dial("tcp", addr); err == nil { // a reset may already fail the dial
		_, _ = c.Write([]byte(get))
		require.NoError(t, c.SetReadDeadline(time.Now().Add(2*time.Second)))
		b, err := io.ReadAll(c)
		var ne net.Error
		require.False(t, errors.As(err, &ne) && ne.Timeout(), "an over-cap connection must be closed")
		require.Empty(t, b, "an over-cap connection must be closed unanswered")
		_ = c.Close()
	}
	for _, c := range held {
		_ = c.Close()
	}
	// The slot frees once the server has seen the close; until then a dial
	// may be reset, which is the cap working, not a failure.
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return false
		}
		defer c.Close()
		if _, err := c.Write([]byte(get)); err != nil {
			return false
		}
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		b, _ := io.ReadAll(c)
		return strings.HasPrefix(string(b), "HTTP/1.1 200")
	}, 15*time.Second, 50*time.Millisecond, "a freed slot is usable again")
	r := h.do("GET", "/metrics", "", "")
	require.Contains(t, string(r.Body), `seckill_http_connections_refused_total{cap="address"}`)

	proxied := MustHarness(t, func(c *config.Config) {
		c.MaxConnsPerAddr, c.TrustedAddrs = 4, nil
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	})
	paddr := strings.TrimPrefix(proxied.base, "http://")
	hold(paddr, 8)
	a := rawExchange(t, paddr, 2*time.Second, 0, get)
	require.Equal(t, 200, a.status(t), "a trusted proxy is not capped per address")
}

// TestEdgeIdleConnectionsGiveClientsNothingUnsolicited: a net/http client
// pool whose connections sit idle past the server's idle time (dialed and
// unused, or used once) sees them closed silently: the transport logs
// nothing ("Unsolicited response received on idle HTTP channel") and every
// request gets its own answer.
func TestEdgeIdleConnectionsGiveClientsNothingUnsolicited(t *testing.T) {
	h := MustHarness(t, func(c *config.Config) { c.IdleTimeout = 300 * time.Millisecond })
	var logged bytes.Buffer
	old := log.Writer()
	log.SetOutput(&logged)
	t.Cleanup(func() { log.SetOutput(old) })

	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	t.Cleanup(client.CloseIdleConnections)
	var raw []net.Conn
	for range 3 {
		// Dialed and never used: the server closes them without a word.
		c, err := net.Dial("tcp", strings.TrimPrefix(h.base, "http://"))
		require.NoError(t, err)
		raw = append(raw, c)
	}
	for round := range 4 {
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := client.Get(h.base + "/healthz")
				if err != nil {
					errs <- err
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					errs <- errors.New(resp.Status)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: %v", round, err)
		}
		time.Sleep(450 * time.Millisecond) // past the idle time
	}
	for _, c := range raw {
		require.NoError(t, c.SetReadDeadline(time.Now().Add(time.Second)))
		b, err := io.ReadAll(c)
		require.NoError(t, err, "closed by the server")
		require.Empty(t, b, "an idle connection got an answer it never asked for")
		_ = c.Close()
	}
	require.Empty(t, logged.String())
}
