package idempotency

import (
	"context"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/store"
)

// memKeys keeps claims in memory, as store.Store keeps them in MySQL.
type memKeys struct {
	mu     sync.Mutex
	claims map[string]*store.KeyClaim
	hashes map[string]string
}

func (m *memKeys) ClaimKey(_ context.Context, scope, hash []byte, _ time.Duration) (store.KeyClaim, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.claims[string(scope)]
	if !ok {
		m.claims[string(scope)] = &store.KeyClaim{}
		m.hashes[string(scope)] = string(hash)
		return store.KeyClaim{Owned: true}, nil
	}
	if m.hashes[string(scope)] != string(hash) {
		return store.KeyClaim{Reused: true}, nil
	}
	return *c, nil
}

func (m *memKeys) FinishKey(_ context.Context, scope []byte, status int, response []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	*m.claims[string(scope)] = store.KeyClaim{Status: status, Response: response}
	return nil
}

func (m *memKeys) ReleaseKey(_ context.Context, scope []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.claims, string(scope))
	return nil
}

// app serves POST /w through the middleware; the write answers 201 with
// its run count, or 503 while fail is set.
func app(t *testing.T) (*fiber.App, *int, *bool) {
	t.Helper()
	keys := &memKeys{claims: map[string]*store.KeyClaim{}, hashes: map[string]string{}}
	mw := New(keys, func(*fiber.Ctx) int64 { return 7 }, time.Second, slog.New(slog.DiscardHandler))
	runs, fail := new(int), new(bool)
	a := fiber.New(fiber.Config{ErrorHandler: func(c *fiber.Ctx, err error) error {
		return c.Status(499).SendString(domain.ErrorCode(err))
	}})
	a.Post("/w", mw.Wrap(func(c *fiber.Ctx) error {
		if *fail {
			return c.Status(503).SendString("down")
		}
		*runs++
		return c.Status(201).SendString(strings.Repeat("x", *runs) + "|" + Ref(c))
	}))
	return a, runs, fail
}

func post(t *testing.T, a *fiber.App, key, body string) (int, string, string) {
	t.Helper()
	req := httptest.NewRequest("POST", "/w", strings.NewReader(body))
	if key != "" {
		req.Header.Set(Header, key)
	}
	resp, err := a.Test(req, -1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b), resp.Header.Get("Idempotent-Replayed")
}

func TestRepeatGetsTheFirstAnswer(t *testing.T) {
	a, runs, fail := app(t)
	*fail = true
	if st, _, _ := post(t, a, "k1", `{"a":1,"b":2}`); st != 503 {
		t.Fatalf("failing write answered %d", st)
	}
	*fail = false
	st, first, _ := post(t, a, "k1", `{"a":1,"b":2}`)
	if st != 201 || *runs != 1 || !strings.HasSuffix(first, "|idem-"+hex.EncodeToString(Scope(7, "POST", "/w", "k1")[:16])) {
		t.Fatalf("retry after a 5xx: %d %q, %d runs", st, first, *runs)
	}
	st, again, replayed := post(t, a, "k1", ` {"b":2, "a":1}`)
	if st != 201 || again != first || replayed != "true" || *runs != 1 {
		t.Fatalf("repeat: %d %q (first %q) replayed %q, %d runs", st, again, first, replayed, *runs)
	}
	if st, code, _ := post(t, a, "k1", `{"a":1,"b":3}`); st != 499 || code != domain.EIdempotencyReused {
		t.Fatalf("other body: %d %s", st, code)
	}
	if st, body, _ := post(t, a, "", `{"a":1,"b":2}`); st != 201 || *runs != 2 || !strings.HasSuffix(body, "|") {
		t.Fatalf("no key: %d, %d runs", st, *runs)
	}
}

func TestMalformedKeysAreRefused(t *testing.T) {
	a, runs, _ := app(t)
	for _, k := range []string{strings.Repeat("k", 129), "has space", "naïve"} {
		if st, code, _ := post(t, a, k, `{}`); st != 499 || code != domain.EInvalid {
			t.Errorf("key %q: %d %s", k, st, code)
		}
	}
	if *runs != 0 {
		t.Fatalf("a refused key ran the write %d times", *runs)
	}
}

func TestScopeIsPerCallerRouteAndKey(t *testing.T) {
	base := string(Scope(1, "POST", "/admin/v1/sales", "k"))
	if string(Scope(1, "POST", "/Admin/v1/sales/", "k")) != base {
		t.Error("the route's case and trailing slash changed the scope")
	}
	for _, other := range [][]byte{Scope(2, "POST", "/admin/v1/sales", "k"), Scope(1, "POST", "/admin/v1/sales/1/stock", "k"), Scope(1, "POST", "/admin/v1/sales", "k2")} {
		if string(other) == base {
			t.Error("two scopes collided")
		}
	}
}
