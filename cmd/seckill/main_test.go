package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/internal/buildinfo"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/schema"
	"github.com/seckill/seckill/store"
)

func devEnv(t *testing.T) {
	t.Helper()
	testenv.MustStore(t) // creates the package's database
	t.Setenv("SECKILL_ENV", "dev")
	t.Setenv("MYSQL_DSN", testenv.MySQLDSN())
}

func TestTokenMintsTheContractsJWT(t *testing.T) {
	devEnv(t)
	var out, errOut bytes.Buffer
	code := run([]string{"token", "--user", "42", "--admin", "--ttl", "1h"}, &out, &errOut)
	require.Equal(t, 0, code, errOut.String())

	claims := jwt.MapClaims{}
	_, err := jwt.ParseWithClaims(strings.TrimSpace(out.String()), claims, func(*jwt.Token) (any, error) {
		return []byte(config.DevAdminJWTSecret), nil
	}, jwt.WithValidMethods([]string{"HS256"}), jwt.WithExpirationRequired())
	require.NoError(t, err)
	assert.Equal(t, "42", claims["sub"])
	assert.Equal(t, "admin", claims["role"])
	exp, err := claims.GetExpirationTime()
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now().Add(time.Hour), exp.Time, time.Minute)
}

func TestTokenRejectsANonPositiveUser(t *testing.T) {
	devEnv(t)
	var out, errOut bytes.Buffer
	assert.Equal(t, 1, run([]string{"token", "--user", "0"}, &out, &errOut))
	assert.Empty(t, out.String())
	assert.Contains(t, errOut.String(), "user id must be positive")
}

func TestUnknownOrMissingCommandIsAUsageError(t *testing.T) {
	var out, errOut bytes.Buffer
	assert.Equal(t, 2, run([]string{"nope"}, &out, &errOut))
	assert.Contains(t, errOut.String(), "unknown command")
	assert.Equal(t, 2, run(nil, &out, &errOut))
}

func TestConfigErrorsFailTheCommand(t *testing.T) {
	t.Setenv("SECKILL_ENV", "production")
	t.Setenv("SECKILL_JWT_SECRET", "short")
	var out, errOut bytes.Buffer
	assert.Equal(t, 1, run([]string{"token", "--user", "1"}, &out, &errOut))
	assert.Contains(t, errOut.String(), "at least 32 bytes")
	assert.NotContains(t, errOut.String(), `"short"`, "secrets are never logged")
}

// A command reads only what it needs: outside development mode, minting a
// user token needs SECKILL_JWT_SECRET and nothing else (no database, no
// other secret); without it the command says which variable is missing.
func TestTokenNeedsOnlyItsSigner(t *testing.T) {
	t.Setenv("SECKILL_ENV", "production")
	for _, k := range []string{"MYSQL_DSN", "SECKILL_ADMIN_JWT_SECRET", "SECKILL_PAYMENT_SECRET", "SECKILL_TOKEN_KEY"} {
		t.Setenv(k, "")
	}
	t.Setenv("SECKILL_JWT_SECRET", "0123456789abcdef0123456789abcdef")
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"token", "--user", "7"}, &out, &errOut), errOut.String())
	require.NotEmpty(t, strings.TrimSpace(out.String()))

	out.Reset()
	errOut.Reset()
	assert.Equal(t, 1, run([]string{"token", "--user", "7", "--admin"}, &out, &errOut))
	assert.Contains(t, errOut.String(), "SECKILL_ADMIN_JWT_SECRET is required")
}

func TestMigrateAppliesTheMigrations(t *testing.T) {
	devEnv(t)
	dsn := testenv.MustEmptyDatabase(t)
	t.Setenv("MYSQL_DSN", dsn)
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"migrate"}, &out, &errOut), errOut.String())
	assert.Contains(t, errOut.String(), "migrations applied")
	// Applying them again is harmless.
	require.Equal(t, 0, run([]string{"migrate"}, &out, &errOut), errOut.String())

	st, err := store.Open(context.Background(), dsn)
	require.NoError(t, err)
	defer st.Close()
	var applied, want int
	require.NoError(t, st.DB.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM schema_migrations").Scan(&applied))
	all, err := schema.Migrations()
	require.NoError(t, err)
	want = len(all)
	assert.Equal(t, want, applied, "every embedded migration recorded once")
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestServeStopsGracefullyWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		errc <- serve(ctx, 5*time.Second, quiet(), func(ctx context.Context, _ *slog.Logger) error {
			<-ctx.Done()
			return ctx.Err() // a component may report the cancellation itself
		})
	}()
	cancel()
	require.NoError(t, <-errc)
}

func TestServeFailsWhenShutdownOverrunsItsTimeout(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	release := make(chan struct{})
	defer close(release)
	cancel()
	err := serve(ctx, 50*time.Millisecond, quiet(), func(context.Context, *slog.Logger) error {
		<-release // ignores the cancellation
		return nil
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "shutdown timeout")
}

func TestServeReportsAComponentsFailure(t *testing.T) {
	boom := errors.New("boom")
	err := serve(context.Background(), time.Second, quiet(), func(context.Context, *slog.Logger) error { return boom })
	require.ErrorIs(t, err, boom)
}

// fakeAdminAPI stands in for the API's sale endpoints (the API is another
// package's job); it checks the demo speaks the contract.
type fakeAdminAPI struct {
	mu      sync.Mutex
	sales   map[int64]string // id -> state
	creates int
	warmups int
}

func (f *fakeAdminAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fail := func(status int, code string) {
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": code}})
	}
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
		fail(http.StatusUnauthorized, "unauthorized")
		return
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/admin/v1/sales":
		var body map[string]any
		dec := json.NewDecoder(r.Body)
		if err := dec.Decode(&body); err != nil || body["title"] != demoTitle || body["stock"] == nil || body["starts_at"] == nil {
			fail(http.StatusBadRequest, "invalid_request")
			return
		}
		f.creates++
		id := int64(100 + len(f.sales))
		f.sales[id] = "live"
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"sale_id": id, "title": demoTitle, "state": "live"})
	case len(parts) == 4 && parts[0] == "api" && r.Method == http.MethodGet:
		id, _ := strconv.ParseInt(parts[3], 10, 64)
		state, ok := f.sales[id]
		if !ok {
			fail(http.StatusNotFound, "not_found")
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"sale_id": id, "title": demoTitle, "state": state})
	case len(parts) == 5 && parts[4] == "warmup" && r.Method == http.MethodPost:
		f.warmups++
		if f.warmups > 1 {
			fail(http.StatusConflict, "already_live")
			return
		}
		saleID, _ := strconv.ParseInt(parts[3], 10, 64)
		_ = json.NewEncoder(w).Encode(map[string]any{"sale_id": saleID, "redis_stock": 1000})
	default:
		fail(http.StatusNotFound, "not_found")
	}
}

func TestDemoCreatesOnceThenReusesWhileTheSaleIsOpen(t *testing.T) {
	devEnv(t)
	fake := &fakeAdminAPI{sales: map[int64]string{}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	idFile := filepath.Join(t.TempDir(), "demo-sale-id")
	demoRun := func() string {
		t.Helper()
		var out, errOut bytes.Buffer
		require.Equal(t, 0, run([]string{"demo", "--api", srv.URL, "--id-file", idFile}, &out, &errOut), errOut.String())
		return strings.TrimSpace(out.String())
	}

	first := demoRun()
	assert.Equal(t, "100", first)
	saved, err := os.ReadFile(idFile)
	require.NoError(t, err)
	assert.Equal(t, first, strings.TrimSpace(string(saved)))

	// Again: the same sale, no new one; the repeated warm-up's 409 is fine.
	assert.Equal(t, first, demoRun())
	assert.Equal(t, 1, fake.creates)
	assert.Equal(t, 2, fake.warmups)

	// Once the demo sale has ended, a new one is created.
	fake.mu.Lock()
	fake.sales[100] = "ended"
	fake.mu.Unlock()
	assert.Equal(t, "101", demoRun())
	assert.Equal(t, 2, fake.creates)
}

func TestDemoFailsClearlyWhenTheAPIRefuses(t *testing.T) {
	devEnv(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":{"code":"unavailable","message":"not ready"}}`))
	}))
	defer srv.Close()
	var out, errOut bytes.Buffer
	assert.Equal(t, 1, run([]string{"demo", "--api", srv.URL, "--id-file", filepath.Join(t.TempDir(), "id")}, &out, &errOut))
	assert.Empty(t, out.String())
	assert.Contains(t, errOut.String(), "unavailable")
}

// TestHelpPrintsUsageAndDoesNothingElse: --help on the binary and on every
// command prints usage to stdout and exits 0 before the configuration is
// read (production mode without secrets would fail) or anything starts.
func TestHelpPrintsUsageAndDoesNothingElse(t *testing.T) {
	t.Setenv("SECKILL_ENV", "production")
	t.Setenv("SECKILL_JWT_SECRET", "")
	t.Setenv("MYSQL_DSN", "root@tcp(127.0.0.1:1)/nowhere")
	t.Setenv("API_ADDR", "127.0.0.1:1")
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"api", "--help"}, {"worker", "--help"}, {"migrate", "--help"},
		{"token", "--help"}, {"demo", "-h"}, {"api", "-help"}} {
		var out, errOut bytes.Buffer
		start := time.Now()
		require.Equal(t, 0, run(args, &out, &errOut), "%v: %s", args, errOut.String())
		require.Contains(t, out.String(), "usage: seckill", "%v", args)
		require.Empty(t, errOut.String(), "%v logged: nothing may run", args)
		require.Less(t, time.Since(start), time.Second, "%v", args)
	}
	var out, errOut bytes.Buffer
	run([]string{"--help"}, &out, &errOut)
	for _, c := range []string{"api", "worker", "migrate", "token", "demo", "version"} {
		require.Contains(t, out.String(), "\n  "+c+" ", "the usage lists %s", c)
	}
	out.Reset()
	require.Equal(t, 2, run([]string{"api", "--bogus"}, &out, &errOut))
	require.Equal(t, 2, run([]string{"migrate", "extra"}, &out, &errOut))
}

func TestVersionPrintsVersionAndCommit(t *testing.T) {
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"version"}, &out, &errOut))
	line := strings.TrimSpace(out.String())
	require.Regexp(t, `^seckill \S+ commit \S+.* go1\.\d+`, line)
	require.Equal(t, buildinfo.Read().String(), line)
}

// A binary built with the stamp the Taskfile and the Containerfile pass
// (-ldflags -X) names that version and commit, where the toolchain sees no
// VCS (-buildvcs=false, as in an image built without .git).
func TestVersionOfAStampedBinary(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "seckill")
	const pkg = "github.com/seckill/seckill/internal/buildinfo"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-buildvcs=false",
		"-ldflags", "-X "+pkg+".version=v9.8.7 -X "+pkg+".commit=0123abcd", "-o", bin, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build:\n%s", out)
	out, err = exec.CommandContext(ctx, bin, "version").Output()
	require.NoError(t, err)
	require.Regexp(t, `^seckill v9\.8\.7 commit 0123abcd go1\.\d+`, strings.TrimSpace(string(out)))
}

func TestHealthcheckAsksReadyz(t *testing.T) {
	t.Setenv("SECKILL_ENV", "production")
	ready := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" || !ready {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"status":"unavailable","missing":["redis"]}`))
			return
		}
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	}))
	defer srv.Close()
	t.Setenv("API_ADDR", strings.TrimPrefix(srv.URL, "http://"))
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"healthcheck"}, &out, &errOut), errOut.String())
	ready = false
	assert.Equal(t, 1, run([]string{"healthcheck"}, &out, &errOut))
	assert.Contains(t, errOut.String(), "503")
	assert.Equal(t, "127.0.0.1:8080", loopbackOf(":8080"))
	assert.Equal(t, "127.0.0.1:8080", loopbackOf("0.0.0.0:8080"))
}
