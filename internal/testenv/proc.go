package testenv

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// FreeAddr returns a free 127.0.0.1 address.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("testenv: free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().String()
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

// Proc is a process started by a test: seckill itself, or a service a test
// owns (its own Redis, MariaDB or Temporal) so that killing it touches no
// other package's tests.
type Proc struct {
	Name    string
	Bin     string
	Args    []string
	Env     map[string]string
	LogPath string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
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
	p := &Proc{Name: name, Bin: bin, Args: args, Env: env, LogPath: filepath.Join(tb.TempDir(), name+".log")}
	p.start(tb)
	tb.Cleanup(func() {
		p.Kill(tb)
		if tb.Failed() {
			if b, err := os.ReadFile(p.LogPath); err == nil {
				tail := string(b)
				if len(tail) > 6000 {
					tail = tail[len(tail)-6000:]
				}
				tb.Logf("--- %s log tail ---\n%s", name, tail)
			}
		}
	})
	return p
}

func (p *Proc) start(tb testing.TB) {
	tb.Helper()
	logf, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		tb.Fatalf("testenv: %s log: %v", p.Name, err)
	}
	cmd := exec.Command(p.Bin, p.Args...)
	cmd.Env = os.Environ()
	for k, v := range p.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		tb.Fatalf("testenv: start %s: %v", p.Name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
}

// Done is closed when the current run of the process has exited.
func (p *Proc) Done() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// Kill sends SIGKILL and waits for the exit.
func (p *Proc) Kill(tb testing.TB) { p.signal(tb, syscall.SIGKILL, 10*time.Second) }

// Stop sends SIGTERM and waits for a graceful exit.
func (p *Proc) Stop(tb testing.TB) { p.signal(tb, syscall.SIGTERM, 30*time.Second) }

// Freeze stops the process group with SIGSTOP (a hung server: connections
// stay open, nothing answers); Thaw resumes it with SIGCONT.
func (p *Proc) Freeze(tb testing.TB) { p.send(tb, syscall.SIGSTOP) }

// Thaw resumes a frozen process.
func (p *Proc) Thaw(tb testing.TB) { p.send(tb, syscall.SIGCONT) }

func (p *Proc) send(tb testing.TB, sig syscall.Signal) {
	tb.Helper()
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if err := syscall.Kill(-cmd.Process.Pid, sig); err != nil {
		tb.Fatalf("testenv: %s %s: %v", p.Name, sig, err)
	}
}

func (p *Proc) signal(tb testing.TB, sig syscall.Signal, wait time.Duration) {
	tb.Helper()
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	select {
	case <-done:
		return
	default:
	}
	// The whole process group: a service's children die with it.
	_ = syscall.Kill(-cmd.Process.Pid, sig)
	select {
	case <-done:
	case <-time.After(wait):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		tb.Errorf("testenv: %s did not exit within %s of %s", p.Name, wait, sig)
	}
}

// Restart starts the process again with the same arguments.
func (p *Proc) Restart(tb testing.TB) {
	tb.Helper()
	select {
	case <-p.Done():
	default:
		tb.Fatalf("testenv: restart %s while it runs", p.Name)
	}
	p.start(tb)
}

// Log returns what the process printed so far.
func (p *Proc) Log() string {
	b, _ := os.ReadFile(p.LogPath)
	return string(b)
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
	client := &http.Client{Timeout: time.Second}
	p.WaitReady(tb, 60*time.Second, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s answered %d", url, resp.StatusCode)
		}
		return nil
	})
}

// WaitReady polls ready until it succeeds; the test fails if the process
// exits first or within is over.
func (p *Proc) WaitReady(tb testing.TB, within time.Duration, ready func(ctx context.Context) error) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for {
		rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
		err := ready(rctx)
		rcancel()
		if err == nil {
			return
		}
		select {
		case <-p.Done():
			tb.Fatalf("testenv: %s exited before it was ready: %v\n%s", p.Name, err, p.Log())
		case <-ctx.Done():
			tb.Fatalf("testenv: %s not ready within %s: %v\n%s", p.Name, within, err, p.Log())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
