package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/authtoken"
	"github.com/seckill/seckill/internal/paysig"
)

// AdminUser, as the user of a call, sends an operator's token.
const AdminUser = -1

// answer is one HTTP answer, decoded.
type answer struct {
	HTTP       int
	Body       map[string]any
	Err        error
	RetryAfter time.Duration
	API        int
}

func (a answer) code() string {
	if e, ok := a.Body["error"].(map[string]any); ok {
		s, _ := e["code"].(string)
		return s
	}
	return ""
}

func (a answer) str(k string) string { s, _ := a.Body[k].(string); return s }

// callTimeout bounds every request: a frozen API or Redis turns into a
// timeout, which the workload treats like a 503 (outcome unknown, replay).
const callTimeout = 3 * time.Second

// caller sends the run's requests and records each with its answer. The
// users' calls and the provider's webhooks go out raw, so the history
// holds each answer's status and body as they came; the operator's go
// through the Go client, one per API.
type caller struct {
	d      *Deployment
	h      *Recorder
	client *http.Client
	tokens sync.Map // user -> bearer token
	// admins are the Go clients of the APIs (by index), with an operator's
	// token and no retries: the operator replays an unknown outcome itself,
	// each attempt its own event.
	admins []*client.Client
}

func newCaller(d *Deployment, h *Recorder) (*caller, error) {
	tr := &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}
	c := &caller{d: d, h: h, client: &http.Client{Timeout: callTimeout, Transport: tr}}
	tok, err := c.bearer(AdminUser)
	if err != nil {
		return nil, err
	}
	for _, api := range d.APIs {
		c.admins = append(c.admins, client.New(api.URL, tok, callTimeout, client.WithRetries(1, 0)))
	}
	return c, nil
}

// admin sends an operator's call to API apiIdx (0-based) through its Go
// client, once, and records it as ev (its op and ids filled by the
// caller): want, the contract's success status, or the error answer's
// status and code, or the transport error. It answers the recorded event.
func (c *caller) admin(ctx context.Context, apiIdx, want int, ev Event, call func(context.Context, *client.Client) error) Event {
	apiIdx %= len(c.admins)
	ev.T = time.Now()
	err := call(ctx, c.admins[apiIdx])
	ev.End, ev.API, ev.HTTP = time.Now(), apiIdx+1, want
	if err != nil {
		if ev.HTTP = client.Status(err); ev.HTTP != 0 {
			ev.Code = domain.ErrorCode(err)
		} else {
			ev.Err = err.Error()
		}
	}
	if ev.Kind == "" {
		ev.Kind = KindRequest
	}
	return c.h.Add(ev)
}

func (c *caller) bearer(user int64) (string, error) {
	if v, ok := c.tokens.Load(user); ok {
		return v.(string), nil
	}
	tok, err := authtoken.MintDev(user, user == AdminUser, 3*time.Hour)
	if err != nil {
		return "", fmt.Errorf("mint token: %w", err)
	}
	c.tokens.Store(user, tok)
	return tok, nil
}

// do sends one request to API apiIdx (0-based) and records it as ev
// (its op and ids filled by the caller).
func (c *caller) do(ctx context.Context, apiIdx int, method, path string, user int64, body any, ev Event) (answer, Event) {
	ev.T = time.Now()
	a := c.send(ctx, apiIdx, method, path, user, body, nil)
	return a, c.record(ev, a)
}

func (c *caller) record(ev Event, a answer) Event {
	ev.End = time.Now()
	ev.API = a.API
	ev.HTTP = a.HTTP
	if a.Err != nil {
		ev.Err = a.Err.Error()
	}
	ev.Code = a.code()
	if ev.Status == "" {
		ev.Status = a.str("status")
	}
	if ev.Token == "" {
		ev.Token = a.str("token")
	}
	if ev.Kind == "" {
		ev.Kind = KindRequest
	}
	return c.h.Add(ev)
}

func (c *caller) send(ctx context.Context, apiIdx int, method, path string, user int64, body any, hdr map[string]string) answer {
	apiIdx %= len(c.d.APIs)
	out := answer{API: apiIdx + 1}
	var raw []byte
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			out.Err = fmt.Errorf("encode body: %w", err)
			return out
		}
		raw = b
	}
	req, err := http.NewRequestWithContext(ctx, method, c.d.APIs[apiIdx].URL+path, bytes.NewReader(raw))
	if err != nil {
		out.Err = err
		return out
	}
	req.Header.Set("Content-Type", "application/json")
	if user != 0 {
		tok, err := c.bearer(user)
		if err != nil {
			out.Err = err
			return out
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		out.Err = err
		return out
	}
	defer resp.Body.Close()
	out.HTTP = resp.StatusCode
	if s := resp.Header.Get("Retry-After"); s != "" {
		if n, err := strconv.Atoi(s); err == nil {
			out.RetryAfter = time.Duration(n) * time.Second
		}
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		out.Err = fmt.Errorf("read body: %w", err)
		return out
	}
	if len(b) > 0 {
		if err := json.Unmarshal(b, &out.Body); err != nil {
			out.Err = fmt.Errorf("body %.80q: %w", b, err)
		}
	}
	return out
}

// webhook sends the provider's signed confirmation of a payment.
func (c *caller) webhook(ctx context.Context, apiIdx int, token, ref string, amount int64, ev Event) (answer, Event) {
	body, _ := json.Marshal(map[string]any{"token": token, "payment_ref": ref, "amount_cents": amount})
	ev.T = time.Now()
	ts := strconv.FormatInt(ev.T.Unix(), 10)
	hdr := map[string]string{"X-Timestamp": ts, "X-Signature": paysig.Sign([]byte(config.DevPaymentSecret), ts, body)}
	a := c.send(ctx, apiIdx, http.MethodPost, "/webhooks/payments", 0, json.RawMessage(body), hdr)
	ev.Token, ev.PayRef = token, ref
	return a, c.record(ev, a)
}

// unknown says the outcome of an answer is unknown: replay it.
func unknown(a answer) bool {
	return a.Err != nil || a.HTTP == http.StatusServiceUnavailable || a.HTTP == http.StatusTooManyRequests || a.HTTP >= 500
}
