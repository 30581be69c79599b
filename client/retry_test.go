package client_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/domain"
)

// seen is what a test server received: one entry per request.
type seen struct {
	mu       sync.Mutex
	bodies   []string
	keys     []string
	attempts int
}

func (s *seen) record(r *http.Request) int {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bodies = append(s.bodies, string(b))
	s.keys = append(s.keys, r.Header.Get(client.IdempotencyKeyHeader))
	s.attempts++
	return s.attempts
}

// unavailableThen answers the first n requests 503 with Retry-After: 1,
// then status with body.
func unavailableThen(t *testing.T, n int, status int, body string) (*httptest.Server, *seen) {
	t.Helper()
	s := &seen{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if s.record(r) <= n {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":{"code":"unavailable","message":"reservation outcome unknown, retry with the same request_id"}}`))
			return
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv, s
}

// A reservation answered 503 (outcome unknown) is sent again after its
// Retry-After with the same request_id, and the 202 that follows is the
// answer.
func TestReserveRetriesA503WithTheSameRequestID(t *testing.T) {
	srv, s := unavailableThen(t, 1, http.StatusAccepted, `{"token":"1-00","status":"QUEUED","sale_id":1,"request_id":"req-00000001"}`)
	c := client.New(srv.URL, "tok", 5*time.Second)
	start := time.Now()
	a, err := c.Reserve(t.Context(), 1, "req-00000001")
	require.NoError(t, err)
	require.Equal(t, "1-00", a.Token)
	require.GreaterOrEqual(t, time.Since(start), time.Second, "the retry waited for Retry-After")
	require.Equal(t, 2, s.attempts)
	require.Equal(t, s.bodies[0], s.bodies[1])
	var body map[string]string
	require.NoError(t, json.Unmarshal([]byte(s.bodies[1]), &body))
	require.Equal(t, "req-00000001", body["request_id"])
}

// An admin write answered 503 is sent again with the same Idempotency-Key
// and body; each call has its own key unless the caller gives one.
func TestAdminWriteRetriesWithTheSameIdempotencyKey(t *testing.T) {
	srv, s := unavailableThen(t, 1, http.StatusCreated, `{"sale_id":9,"stock_total":5}`)
	c := client.New(srv.URL, "tok", 5*time.Second)
	ns := client.NewSale{GoodsID: 1, Title: "t", Stock: 5, StartsAt: time.Now(), EndsAt: time.Now().Add(time.Hour)}
	v, err := c.CreateSale(t.Context(), ns, "")
	require.NoError(t, err)
	require.EqualValues(t, 9, v.SaleID)
	require.Equal(t, 2, s.attempts)
	require.NotEmpty(t, s.keys[0])
	require.Equal(t, s.keys[0], s.keys[1], "the retry carries the first attempt's key")
	require.Equal(t, s.bodies[0], s.bodies[1])

	_, err = c.AddStock(t.Context(), 9, 2, "operator-key-1")
	require.NoError(t, err)
	require.Equal(t, "operator-key-1", s.keys[2])
	_, err = c.AddStock(t.Context(), 9, 2, "")
	require.NoError(t, err)
	require.NotEqual(t, s.keys[0], s.keys[3], "a new call draws a new key")
}

// Retries are bounded: at most the client's attempts, and a Retry-After
// longer than its longest wait is answered at once.
func TestRetriesAreBounded(t *testing.T) {
	srv, s := unavailableThen(t, 100, http.StatusOK, `{}`)
	c := client.New(srv.URL, "tok", 5*time.Second, client.WithRetries(3, 5*time.Second))
	_, err := c.Reserve(t.Context(), 1, "req-00000001")
	require.Equal(t, domain.EUnavailable, domain.ErrorCode(err))
	require.Equal(t, 3, s.attempts)

	long := &seen{}
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		long.record(r)
		w.Header().Set("Retry-After", "60")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"error":{"code":"rate_limited","message":"too many requests"}}`))
	}))
	t.Cleanup(slow.Close)
	start := time.Now()
	_, err = client.New(slow.URL, "tok", 5*time.Second).Reserve(t.Context(), 1, "req-00000001")
	var e *domain.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, domain.Error{Code: domain.ERateLimited, Message: "too many requests", RetryAfter: 60}, *e)
	require.Equal(t, 1, long.attempts)
	require.Less(t, time.Since(start), time.Second)
}

// A cancelled context ends the wait for a retry at once.
func TestRetryWaitEndsWithTheContext(t *testing.T) {
	srv, s := unavailableThen(t, 100, http.StatusOK, `{}`)
	c := client.New(srv.URL, "tok", 5*time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Reserve(ctx, 1, "req-00000001")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, domain.EUnavailable, domain.ErrorCode(err), "the last answer stays in the chain")
	require.Less(t, time.Since(start), 900*time.Millisecond)
	require.Equal(t, 1, s.attempts)
}

// A call that is not idempotent (an appeal) is not resent after a
// transport error; an idempotent one is.
func TestTransportErrorsAreRetriedOnlyWhenIdempotent(t *testing.T) {
	s := &seen{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.record(r)%2 == 1 { // every first try: the connection drops without an answer
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				_ = conn.Close()
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"token":"1-00","sale_id":1,"status":"PAID","amount_cents":5}`))
	}))
	t.Cleanup(srv.Close)
	c := client.New(srv.URL, "tok", 5*time.Second)
	v, err := c.Pay(t.Context(), "1-00", "ref-1")
	require.NoError(t, err)
	require.Equal(t, domain.StatusPaid, v.Status)
	require.Equal(t, 2, s.attempts)

	_, err = c.FileAppeal(t.Context(), client.NewAppeal{SaleID: 1, Reason: "blacklisted", Message: "m"})
	require.Error(t, err)
	require.Equal(t, 3, s.attempts, "the appeal was sent once")
}

// An error answer is its *domain.Error with the Retry-After, and its
// status; a body that is not the contract's keeps the status.
func TestErrorAnswers(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case client.ReservationsPath(1):
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":{"code":"unavailable","message":"reservation outcome unknown, retry with the same request_id"}}`))
		default:
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte("<html>bad gateway</html>"))
		}
	}))
	t.Cleanup(srv.Close)
	c := client.New(srv.URL, "tok", 5*time.Second, client.WithRetries(1, 0))
	_, err := c.Reserve(t.Context(), 1, "req-00000001")
	var e *domain.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, domain.Error{Code: domain.EUnavailable, Message: "reservation outcome unknown, retry with the same request_id", RetryAfter: 3}, *e)
	require.Equal(t, http.StatusServiceUnavailable, client.Status(err))
	_, err = c.Sale(t.Context(), 1)
	require.ErrorAs(t, err, &e)
	require.Equal(t, domain.Error{Code: domain.EInternal, Message: "status 502"}, *e)
	require.Equal(t, http.StatusBadGateway, client.Status(err))

	srv.Close()
	_, err = c.Sale(t.Context(), 1)
	require.Error(t, err)
	require.Zero(t, client.Status(err), "no answer, no status")
	require.Zero(t, client.Status(nil))
}
