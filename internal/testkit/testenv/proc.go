package testenv

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/proc"
)

// FreeAddr returns a free 127.0.0.1 address.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	addr, err := proc.FreeAddr()
	if err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	return addr
}

// ProcEnv is the environment of a seckill process on the test services, in
// development mode, on a task queue of its own (so other packages' workers
// never take its tasks). Overrides win.
func ProcEnv(tb testing.TB, taskQueue string, overrides map[string]string) map[string]string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := ensureDatabase(ctx); err != nil {
		tb.Fatalf("testenv: test database: %v", err)
	}
	env := map[string]string{
		"SECKILL_ENV":              "dev",
		"REDIS_ADDR":               RedisAddr(),
		"MYSQL_DSN":                MySQLDSN(),
		"TEMPORAL_ADDRESS":         TemporalAddress(),
		"SECKILL_TASK_QUEUE":       taskQueue,
		"SECKILL_RELAY_MIN_IDLE":   "3s",
		"SECKILL_SHUTDOWN_TIMEOUT": "5s",
		// Other packages' sales share the test database: a test starts the
		// sale workflows it wants itself.
		"SECKILL_SALE_SWEEP": "off",
	}
	for k, v := range overrides {
		env[k] = v
	}
	return env
}

// Proc is a process started by a test (internal/proc): seckill itself, or
// a service a test owns (its own Redis, MariaDB or Temporal) so that
// killing it touches no other package's tests. Its methods fail the test
// instead of returning errors.
type Proc struct {
	*proc.Proc
}

// StartProc starts bin/seckill with args; it is killed at the end of the
// test. Its output goes to a log file in the test's temp dir, printed when
// the test fails.
func StartProc(tb testing.TB, name string, env map[string]string, args ...string) *Proc {
	tb.Helper()
	return StartCommand(tb, name, MustBinary(tb), env, args...)
}

// StartCommand starts bin with args like StartProc.
func StartCommand(tb testing.TB, name, bin string, env map[string]string, args ...string) *Proc {
	tb.Helper()
	p := &Proc{Proc: &proc.Proc{Name: name, Bin: bin, Args: args, Env: env, LogPath: filepath.Join(tb.TempDir(), name+".log")}}
	p.start(tb)
	tb.Cleanup(func() {
		p.Kill(tb)
		if tb.Failed() {
			tail := p.Log()
			if len(tail) > 6000 {
				tail = tail[len(tail)-6000:]
			}
			tb.Logf("--- %s log tail ---\n%s", name, tail)
		}
	})
	return p
}

func (p *Proc) start(tb testing.TB) {
	tb.Helper()
	if err := p.Launch(); err != nil {
		tb.Fatalf("testenv: %v", err)
	}
}

// Kill sends SIGKILL and waits for the exit.
func (p *Proc) Kill(tb testing.TB) { p.signal(tb, syscall.SIGKILL, 10*time.Second) }

// Stop sends SIGTERM and waits for a graceful exit.
func (p *Proc) Stop(tb testing.TB) { p.signal(tb, syscall.SIGTERM, 30*time.Second) }

// Freeze stops the process group with SIGSTOP (a hung server: connections
// stay open, nothing answers); Thaw resumes it with SIGCONT.
func (p *Proc) Freeze(tb testing.TB) {
	tb.Helper()
	if err := p.Proc.Freeze(); err != nil {
		tb.Fatalf("testenv: %v", err)
	}
}

// Thaw resumes a frozen process.
func (p *Proc) Thaw(tb testing.TB) {
	tb.Helper()
	if err := p.Proc.Thaw(); err != nil {
		tb.Fatalf("testenv: %v", err)
	}
}

// signal sends sig to the process group and waits for the exit, with a
// SIGKILL after wait (the test then fails).
func (p *Proc) signal(tb testing.TB, sig syscall.Signal, wait time.Duration) {
	tb.Helper()
	if !p.Running() {
		return
	}
	if err := p.Signal(sig); err != nil && p.Running() {
		tb.Errorf("testenv: %v", err)
	}
	select {
	case <-p.Done():
	case <-time.After(wait):
		if err := p.Signal(syscall.SIGKILL); err != nil && p.Running() {
			tb.Errorf("testenv: %v", err)
		}
		<-p.Done()
		tb.Errorf("testenv: %s did not exit within %s of %s", p.Name, wait, sig)
	}
}

// Restart starts the process again with the same arguments.
func (p *Proc) Restart(tb testing.TB) {
	tb.Helper()
	if p.Running() {
		tb.Fatalf("testenv: restart %s while it runs", p.Name)
	}
	p.start(tb)
}

// API is an API process and its base URL.
type API struct {
	*Proc
	URL string
}

// MustAPI starts `seckill api` on a free port and waits for /healthz.
func MustAPI(tb testing.TB, name string, env map[string]string) *API {
	tb.Helper()
	return MustAPIOf(tb, MustBinary(tb), name, env)
}

// MustAPIOf is MustAPI with another build of seckill (a previous release).
func MustAPIOf(tb testing.TB, bin, name string, env map[string]string) *API {
	tb.Helper()
	addr := FreeAddr(tb)
	e := map[string]string{"API_ADDR": addr}
	for k, v := range env {
		e[k] = v
	}
	a := &API{Proc: StartCommand(tb, name, bin, e, "api"), URL: "http://" + addr}
	a.WaitHealthy(tb)
	return a
}

// WaitHealthy waits until /healthz answers 200.
func (a *API) WaitHealthy(tb testing.TB) {
	tb.Helper()
	waitHTTP(tb, a.Proc, a.URL+"/healthz")
}

// Worker is a worker process and its metrics address.
type Worker struct {
	*Proc
	MetricsURL string
}

// MustWorker starts `seckill worker` and waits for its metrics endpoint.
func MustWorker(tb testing.TB, name string, env map[string]string) *Worker {
	tb.Helper()
	return MustWorkerOf(tb, MustBinary(tb), name, env)
}

// MustWorkerOf is MustWorker with another build of seckill.
func MustWorkerOf(tb testing.TB, bin, name string, env map[string]string) *Worker {
	tb.Helper()
	addr := FreeAddr(tb)
	e := map[string]string{"WORKER_METRICS_ADDR": addr, "SECKILL_RELAY_CONSUMER": name + "-" + strings.ReplaceAll(tb.Name(), "/", "_")}
	for k, v := range env {
		e[k] = v
	}
	w := &Worker{Proc: StartCommand(tb, name, bin, e, "worker"), MetricsURL: "http://" + addr + "/metrics"}
	w.WaitHealthy(tb)
	return w
}

// WaitHealthy waits until the worker's metrics answer.
func (w *Worker) WaitHealthy(tb testing.TB) {
	tb.Helper()
	waitHTTP(tb, w.Proc, w.MetricsURL)
}

func waitHTTP(tb testing.TB, p *Proc, url string) {
	tb.Helper()
	p.WaitReady(tb, 60*time.Second, proc.HTTPReady(url))
}

// WaitReady polls ready until it succeeds; the test fails if the process
// exits first or within is over.
func (p *Proc) WaitReady(tb testing.TB, within time.Duration, ready func(ctx context.Context) error) {
	tb.Helper()
	p.Ready = ready
	if err := p.Proc.WaitReady(context.Background(), within); err != nil {
		tb.Fatalf("testenv: %v\n%s", err, p.Log())
	}
}
