package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/wire"
)

// Defaults of the retry policy: a call is sent at most DefaultAttempts
// times, and a Retry-After above DefaultMaxWait is not waited for (the
// answer is returned instead).
const (
	DefaultAttempts = 5
	DefaultMaxWait  = 10 * time.Second
)

// Client calls one API with one bearer token. It retries as the contract
// says: a 429 or a 503 after its Retry-After (1 s when absent), with the
// same body, so a reservation keeps its request_id and an admin write its
// Idempotency-Key; a call the contract makes idempotent is also retried
// after a transport error. Every attempt is bounded by the client's
// timeout and the whole call by its context.
type Client struct {
	base     string
	token    string
	timeout  time.Duration
	http     *http.Client
	attempts int
	maxWait  time.Duration
}

// Option changes a Client built by New.
type Option func(*Client)

// WithRetries bounds the retry policy: at most attempts sends of a call
// (1: never retry), and no wait longer than maxWait.
func WithRetries(attempts int, maxWait time.Duration) Option {
	return func(c *Client) { c.attempts, c.maxWait = max(attempts, 1), maxWait }
}

// New is a client of the API at base (http://host:port) with token (a
// user's or an admin's JWT; "" sends none); every attempt is bounded by
// timeout.
func New(base, token string, timeout time.Duration, opts ...Option) *Client {
	c := &Client{base: strings.TrimRight(base, "/"), token: token, timeout: timeout,
		http: &http.Client{Timeout: timeout}, attempts: DefaultAttempts, maxWait: DefaultMaxWait}
	for _, o := range opts {
		o(c)
	}
	return c
}

// call is one operation as the client sends it.
type call struct {
	method, path string
	body         any               // JSON-encoded once, the same bytes on every attempt
	header       map[string]string // extra headers (Idempotency-Key, a webhook's signature)
	noAuth       bool              // no Authorization header
	// idempotent: a transport error (the outcome unknown) is retried too.
	idempotent bool
	// noRetry: the answer is returned as it is (a readiness probe).
	noRetry bool
	// accept lists non-2xx statuses answered with a body the caller reads.
	accept []int
}

// answer is a received response.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// do sends c and decodes a 2xx body into out (when not nil); an error
// answer is its *domain.Error.
func (c *Client) do(ctx context.Context, r call, out any) error {
	a, err := c.send(ctx, r)
	if err != nil {
		return err
	}
	if out == nil || len(a.body) == 0 {
		return nil
	}
	if err := json.Unmarshal(a.body, out); err != nil {
		return fmt.Errorf("%s %s: decode body: %w", r.method, r.path, err)
	}
	return nil
}

// send runs the retry policy around single attempts.
func (c *Client) send(ctx context.Context, r call) (answer, error) {
	var body []byte
	if r.body != nil {
		b, err := json.Marshal(r.body)
		if err != nil {
			return answer{}, fmt.Errorf("%s %s: encode body: %w", r.method, r.path, err)
		}
		body = b
	}
	for attempt := 1; ; attempt++ {
		a, err := c.once(ctx, r, body)
		wait, again := c.retry(ctx, r, a, err, attempt)
		if !again {
			return a, err
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return a, fmt.Errorf("%s %s: gave up waiting to retry: %w", r.method, r.path, errors.Join(err, ctx.Err()))
		case <-timer.C:
		}
	}
}

// retry decides whether an attempt's outcome is sent again, and after how
// long.
func (c *Client) retry(ctx context.Context, r call, a answer, err error, attempt int) (time.Duration, bool) {
	if err == nil || r.noRetry || attempt >= c.attempts || ctx.Err() != nil {
		return 0, false
	}
	var e *domain.Error
	if !errors.As(err, &e) {
		// A transport error: the request may have been applied.
		return time.Duration(attempt) * 200 * time.Millisecond, r.idempotent
	}
	if a.status != http.StatusTooManyRequests && a.status != http.StatusServiceUnavailable {
		return 0, false
	}
	wait := time.Duration(max(e.RetryAfter, 1)) * time.Second
	return wait, wait <= c.maxWait
}

// once sends one attempt.
func (c *Client) once(ctx context.Context, r call, body []byte) (answer, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := c.request(ctx, r, body)
	if err != nil {
		return answer{}, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return answer{}, fmt.Errorf("%s %s: %w", r.method, r.path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return answer{}, fmt.Errorf("%s %s: read body: %w", r.method, r.path, err)
	}
	a := answer{status: resp.StatusCode, header: resp.Header, body: raw}
	if (resp.StatusCode < 200 || resp.StatusCode > 299) && !accepts(r.accept, resp.StatusCode) {
		return a, answerError(resp, raw)
	}
	return a, nil
}

func accepts(statuses []int, status int) bool {
	for _, s := range statuses {
		if s == status {
			return true
		}
	}
	return false
}

func (c *Client) request(ctx context.Context, r call, body []byte) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, c.base+r.path, rd)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", r.method, r.path, err)
	}
	if c.token != "" && !r.noAuth {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	return req, nil
}

// answerError is an error answer: its *domain.Error (errors.As finds it)
// with the answer's HTTP status (Status reads it); a body that is not the
// contract's keeps the status in the message.
func answerError(resp *http.Response, raw []byte) error {
	e := &domain.Error{Code: domain.EInternal, Message: fmt.Sprintf("status %d", resp.StatusCode)}
	var b wire.ErrorBody
	if json.Unmarshal(raw, &b) == nil && b.Error.Code != "" {
		e.Code, e.Message = b.Error.Code, b.Error.Message
	}
	if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
		e.RetryAfter = n
	}
	return &statusError{status: resp.StatusCode, err: e}
}

// statusError is an error answer as received.
type statusError struct {
	status int
	err    *domain.Error
}

func (e *statusError) Error() string { return e.err.Error() }

func (e *statusError) Unwrap() error { return e.err }

// Status is the HTTP status of the error answer a call's err carries; 0
// when no answer came (a transport error, an ended context, a body that
// could not be decoded) or err is nil.
func Status(err error) int {
	var e *statusError
	if errors.As(err, &e) {
		return e.status
	}
	return 0
}

// IdempotencyKeyHeader carries an admin write's key.
const IdempotencyKeyHeader = "Idempotency-Key"

// NewIdempotencyKey is a fresh random key for an admin write.
func NewIdempotencyKey() string { return rand.Text() }

// keyed is the header of an admin write with key, a fresh one when "".
func keyed(key string) map[string]string {
	if key == "" {
		key = NewIdempotencyKey()
	}
	return map[string]string{IdempotencyKeyHeader: key}
}
