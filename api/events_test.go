package api

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/authtoken"
	"github.com/seckill/seckill/internal/testkit/netproxy"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/status"
)

// rawStream opens a reservation's event stream on a bare TCP connection
// (no client goroutine) and reads up to the first event's data line.
func rawStream(t *testing.T, h *harness, token, jwt string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(h.base, "http://"), 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	_, err = fmt.Fprintf(c, "GET /api/v1/reservations/%s/events HTTP/1.1\r\nHost: seckill\r\nAuthorization: Bearer %s\r\n\r\n", token, jwt)
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	br := bufio.NewReader(c)
	status, err := br.ReadString('\n')
	require.NoError(t, err)
	require.Contains(t, status, " 200 ")
	for {
		l, err := br.ReadString('\n')
		require.NoError(t, err)
		if strings.HasPrefix(l, "data: ") {
			return c, br
		}
	}
}

// TestEventStreamsHoldNoGoroutine: an open stream is its connection and a
// small struct in the hub, with no goroutine of its own (fasthttp's body
// stream writer held two per stream: the connection's and the writer's).
// Its keep-alive comments: TestStreamReReadWaitsForASlowRedis.
func TestEventStreamsHoldNoGoroutine(t *testing.T) {
	h := MustHarness(t, func(c *config.Config) { c.ReadPerUserRPS = 0 })
	sale := h.MustWarmSale(10)
	// Five users with eight streams each (the most one user may open).
	type owner struct{ jwt, token string }
	owners := make([]owner, 6)
	for i := range owners {
		jwt := h.MustToken(testenv.UniqueUser(), "")
		r := h.reserve(sale.ID, jwt, fmt.Sprintf("events-goroutines-%d", i))
		require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
		owners[i] = owner{jwt, r.json(t)["token"].(string)}
	}

	rawStream(t, h, owners[5].token, owners[5].jwt) // the worker pools are up
	time.Sleep(200 * time.Millisecond)
	before := runtime.NumGoroutine()
	const n = 40
	for i := range n {
		o := owners[i%5]
		rawStream(t, h, o.token, o.jwt)
	}
	time.Sleep(200 * time.Millisecond)
	after := runtime.NumGoroutine()
	t.Logf("goroutines: %d before, %d with %d more streams", before, after, n)
	require.Less(t, after-before, n/4, "goroutines per open stream")
}

// TestStreamReReadWaitsForASlowRedis: while Redis owns the sale but does
// not answer in time, an open stream's re-reads wait for it instead of
// asking MySQL (thousands of streams would turn a slow Redis into a
// loaded primary); here the row says CANCELLED while Redis still holds
// the unit QUEUED, so a re-read that asked MySQL would push CANCELLED.
// Meanwhile the stream gets its keep-alive comment (the contract: at
// least every 15 s). Once Redis answers, the stream follows it again.
func TestStreamReReadWaitsForASlowRedis(t *testing.T) {
	direct := testenv.MustRedis(t)
	proxy, err := netproxy.Start(testenv.RedisAddr(), 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	// As internal/conn makes it: the call's context bounds its socket wait.
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	h := MustHarnessWithRedis(t, rdb, func(c *config.Config) { c.RedisTimeout = 200 * time.Millisecond })
	h.services.Hub.SetReread(3 * time.Second) // several periodic re-reads while Redis is slow
	sale := h.MustWarmSale(5)
	user := testenv.UniqueUser()
	jwt := h.MustToken(user, "")
	r := h.reserve(sale.ID, jwt, "events-slow-redis-1")
	require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
	token := r.json(t)["token"].(string)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = h.st.RecordReservation(ctx, domain.OrderInput{Token: token, SaleID: sale.ID, UserID: user, RequestID: "events-slow-redis-1", Path: domain.PathRedis})
	require.NoError(t, err)
	_, err = h.st.EndQueued(ctx, token, domain.StatusCancelled, "user")
	require.NoError(t, err)

	c, br := rawStream(t, h, token, jwt)
	events := make(chan string, 16)
	var beats atomic.Int64
	go func() {
		defer close(events)
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				return
			}
			switch {
			case strings.HasPrefix(l, "data: "):
				events <- l
			case strings.HasPrefix(l, ": keep-alive"):
				beats.Add(1)
			}
		}
	}()
	_ = c.SetReadDeadline(time.Time{})

	proxy.SetDelay(time.Second) // every Redis call outlasts the timeout
	select {
	case ev, ok := <-events:
		require.False(t, ok, "an event while Redis is slow: %s", ev)
		t.Fatal("the stream ended while Redis was slow")
	case <-time.After(15 * time.Second): // four periodic re-reads at least, and a comment
	}
	require.Positive(t, beats.Load(), "no keep-alive comment within 15 s")

	proxy.SetDelay(0)
	_, err = h.scripts.WriteStatus(ctx, direct, sale.ID, token, redisgateway.StatusRecord{Seq: 3, UserID: user, Status: "CANCELLED", AmountCents: sale.PriceCents})
	require.NoError(t, err)
	select {
	case ev := <-events:
		require.Contains(t, ev, `"status":"CANCELLED"`)
	case <-time.After(10 * time.Second):
		t.Fatal("no event once Redis answers again")
	}
}

// TestStreamsReReadWhenTheSubscriptionReturns: a status change published
// while the instance's subscription to the event channels was down is
// lost to it; when the subscription comes back every stream re-reads, so
// the client gets the change at once, not at the periodic re-read (30 s).
func TestStreamsReReadWhenTheSubscriptionReturns(t *testing.T) {
	direct := testenv.MustRedis(t)
	proxy, err := netproxy.Start(testenv.RedisAddr(), 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	h := MustHarnessWithRedis(t, rdb)
	sale := h.MustWarmSale(5)
	user := testenv.UniqueUser()
	jwt := h.MustToken(user, "")
	r := h.reserve(sale.ID, jwt, "events-resubscribe-1")
	require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
	token := r.json(t)["token"].(string)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	opened := time.Now()
	c, br := rawStream(t, h, token, jwt)
	events := make(chan string, 16)
	go func() {
		defer close(events)
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				return
			}
			if strings.HasPrefix(l, "data: ") {
				events <- l
			}
		}
	}()
	_ = c.SetReadDeadline(time.Time{})

	proxy.SetCut(true) // the subscription (and every Redis connection) drops
	_, err = h.scripts.WriteStatus(ctx, direct, sale.ID, token, redisgateway.StatusRecord{Seq: 2, UserID: user, Status: "PENDING_PAYMENT", OrderNo: "o-resub", AmountCents: sale.PriceCents})
	require.NoError(t, err)
	time.Sleep(time.Second)
	proxy.SetCut(false)
	select {
	case ev := <-events:
		require.Contains(t, ev, `"status":"PENDING_PAYMENT"`)
		require.Less(t, time.Since(opened), status.StreamReread, "not the periodic re-read")
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10 s of the subscription's return")
	}
}

// TestKeepAliveWhileAReReadWaits: a stream whose re-read waits a long
// time (here for a Redis 20 s away, with a timeout as long) still gets its
// keep-alive comment within the contract's 15 s: comments do not wait
// behind reads.
func TestKeepAliveWhileAReReadWaits(t *testing.T) {
	proxy, err := netproxy.Start(testenv.RedisAddr(), 0)
	require.NoError(t, err)
	// Close waits for the chunks still held back (20 s): not this test.
	t.Cleanup(func() { go func() { _ = proxy.Close() }() })
	// The socket waits as long as the call's context (go-redis caps it at
	// ReadTimeout, 3 s by default).
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true, ReadTimeout: time.Minute})
	t.Cleanup(func() { _ = rdb.Close() })
	h := MustHarnessWithRedis(t, rdb, func(c *config.Config) { c.RedisTimeout = 20 * time.Second })
	h.services.Hub.SetReread(time.Second)
	sale := h.MustWarmSale(5)
	jwt := h.MustToken(testenv.UniqueUser(), "")
	r := h.reserve(sale.ID, jwt, "events-keepalive-1")
	require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
	token := r.json(t)["token"].(string)

	opened := time.Now()
	c, br := rawStream(t, h, token, jwt)
	proxy.SetDelay(20 * time.Second) // the next re-read waits about 20 s
	require.NoError(t, c.SetReadDeadline(opened.Add(15*time.Second)))
	for {
		l, err := br.ReadString('\n')
		require.NoError(t, err, "no keep-alive comment within 15 s")
		if strings.HasPrefix(l, ": keep-alive") {
			break
		}
	}
	t.Logf("keep-alive after %s", time.Since(opened).Round(time.Millisecond))
	proxy.SetCut(true) // the waiting re-read fails now, so the server stops at once
}

// rawGet sends a GET on a bare connection and returns the status line.
func rawGet(t *testing.T, h *harness, path, jwt string, header string) (string, *bufio.Reader) {
	t.Helper()
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(h.base, "http://"), 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	_, err = fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: seckill\r\nAuthorization: Bearer %s\r\n%s\r\n", path, jwt, header)
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	br := bufio.NewReader(c)
	status, err := br.ReadString('\n')
	require.NoError(t, err)
	return status, br
}

// untilClosed reads a stream until the server closes it; false if it
// stays open past within.
func untilClosed(br *bufio.Reader, c net.Conn, within time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(within))
	for {
		if _, err := br.ReadString('\n'); err != nil {
			var ne net.Error
			return !(errors.As(err, &ne) && ne.Timeout())
		}
	}
}

// The contract's stream limits: at most 8 streams of a user at once (429
// beyond), a resume of an ended reservation gets 204, and a stream ends
// when its token expires or its user is blacklisted.
func TestEventStreamLimits(t *testing.T) {
	h := MustHarness(t, func(c *config.Config) { c.ReadPerUserRPS = 0 })
	sale := h.MustWarmSale(5)
	user := testenv.UniqueUser()
	jwt := h.MustToken(user, "")
	r := h.reserve(sale.ID, jwt, "events-limits-1")
	require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
	token := r.json(t)["token"].(string)
	path := "/api/v1/reservations/" + token + "/events"

	conns := make([]net.Conn, 0, 8)
	for range 8 {
		c, _ := rawStream(t, h, token, jwt)
		conns = append(conns, c)
	}
	status, _ := rawGet(t, h, path, jwt, "")
	require.Contains(t, status, " 429 ", "a ninth stream of the user")
	require.NoError(t, conns[0].Close())
	require.Eventually(t, func() bool {
		status, _ := rawGet(t, h, path, jwt, "")
		return strings.Contains(status, " 200 ")
	}, 5*time.Second, 100*time.Millisecond, "a closed stream frees its place")
	for _, c := range conns[1:] {
		require.NoError(t, c.Close())
	}

	// A stream ends when the token's exp passes.
	short, err := authtoken.Mint(h.cfg.JWTSecret, user, "", 2*time.Second)
	require.NoError(t, err)
	c, br := rawStream(t, h, token, short)
	require.True(t, untilClosed(br, c, 6*time.Second), "the stream outlived its token")

	// A stream ends when the user is blacklisted.
	c, br = rawStream(t, h, token, jwt)
	admin := h.MustToken(1, authtoken.RoleAdmin)
	require.Equal(t, http.StatusNoContent, h.do(http.MethodPut, fmt.Sprintf("/admin/v1/blacklist/%d", user), admin, "").Status)
	require.True(t, untilClosed(br, c, 5*time.Second), "the stream outlived the blacklisting")
	require.Equal(t, http.StatusNoContent, h.do(http.MethodDelete, fmt.Sprintf("/admin/v1/blacklist/%d", user), admin, "").Status)

	// Once cancelled, a resume from the ended status gets 204.
	require.Eventually(t, func() bool {
		return h.do(http.MethodPost, "/api/v1/reservations/"+token+"/cancel", jwt, "").Status == http.StatusOK
	}, 30*time.Second, 200*time.Millisecond)
	status, _ = rawGet(t, h, path, jwt, "Last-Event-ID: 3\r\n")
	require.Contains(t, status, " 204 ")
	status, _ = rawGet(t, h, path, jwt, "Last-Event-ID: 1\r\n")
	require.Contains(t, status, " 200 ", "a client that missed the ended status gets it")
}
