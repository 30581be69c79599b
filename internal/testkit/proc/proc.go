// Package proc starts and controls the real processes the tests, the
// bench and the chaos run own: a service (redis-server, mariadbd, the
// Temporal dev server) or a seckill API or worker, each in a process group
// of its own, so SIGKILL and SIGSTOP reach it whole. internal/testenv
// wraps it for tests; test/bench and test/chaos use it as it is.
package proc

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Proc is a process its caller owns. It can be killed, frozen, thawed and
// started again with the same arguments.
type Proc struct {
	Name    string
	Bin     string
	Args    []string
	Env     map[string]string
	LogPath string
	// Ready answers nil once the process serves.
	Ready func(ctx context.Context) error

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	frozen bool
}

// Start starts the process and waits until Ready answers (within).
func (p *Proc) Start(ctx context.Context, within time.Duration) error {
	if err := p.Launch(); err != nil {
		return err
	}
	return p.WaitReady(ctx, within)
}

// Launch starts the process (its output appended to LogPath) without
// waiting for it.
func (p *Proc) Launch() error {
	logf, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("start %s: log: %w", p.Name, err)
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
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	p.mu.Lock()
	p.cmd, p.done, p.frozen = cmd, done, false
	p.mu.Unlock()
	return nil
}

// WaitReady polls Ready until it answers nil, the process exits or within
// passes.
func (p *Proc) WaitReady(ctx context.Context, within time.Duration) error {
	if p.Ready == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
		err := p.Ready(rctx)
		rcancel()
		if err == nil {
			return nil
		}
		select {
		case <-p.Done():
			return fmt.Errorf("%s exited before it was ready (%v); see %s", p.Name, err, p.LogPath)
		case <-ctx.Done():
			return fmt.Errorf("%s not ready within %s: %v; see %s", p.Name, within, err, p.LogPath)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Pid is the current run's process id (0 before the first start).
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Done is closed when the current run has exited.
func (p *Proc) Done() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	return p.done
}

// ExitCode is the current run's exit status once it has exited; -1 while
// it runs, before the first start, or when a signal ended it.
func (p *Proc) ExitCode() int {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil || done == nil {
		return -1
	}
	select {
	case <-done:
		return cmd.ProcessState.ExitCode()
	default:
		return -1
	}
}

// Running reports whether the current run is alive.
func (p *Proc) Running() bool {
	select {
	case <-p.Done():
		return false
	default:
		return true
	}
}

// Signal sends sig to the process's group: a service's children share its
// fate.
func (p *Proc) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd == nil || !p.Running() {
		return fmt.Errorf("%s is not running", p.Name)
	}
	if err := syscall.Kill(-cmd.Process.Pid, sig); err != nil {
		return fmt.Errorf("signal %s to %s: %w", sig, p.Name, err)
	}
	return nil
}

// Kill sends SIGKILL and waits for the exit.
func (p *Proc) Kill() error {
	if !p.Running() {
		return nil
	}
	if err := p.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	select {
	case <-p.Done():
		return nil
	case <-time.After(20 * time.Second):
		return fmt.Errorf("%s did not exit within 20s of SIGKILL", p.Name)
	}
}

// Freeze sends SIGSTOP.
func (p *Proc) Freeze() error {
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	p.mu.Lock()
	p.frozen = true
	p.mu.Unlock()
	return nil
}

// Frozen reports whether Freeze stopped the process and nothing thawed it.
func (p *Proc) Frozen() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.frozen
}

// Thaw sends SIGCONT.
func (p *Proc) Thaw() error {
	p.mu.Lock()
	p.frozen = false
	p.mu.Unlock()
	return p.Signal(syscall.SIGCONT)
}

// Stop thaws a frozen process, sends SIGTERM and waits (SIGKILL after wait).
func (p *Proc) Stop(wait time.Duration) {
	_ = p.StopGracefully(wait)
}

// StopGracefully is Stop reporting whether the process needed the SIGKILL.
func (p *Proc) StopGracefully(wait time.Duration) error {
	if !p.Running() {
		return nil
	}
	if p.Frozen() {
		_ = p.Thaw()
	}
	_ = p.Signal(syscall.SIGTERM)
	select {
	case <-p.Done():
		return nil
	case <-time.After(wait):
		_ = p.Signal(syscall.SIGKILL)
		<-p.Done()
		return fmt.Errorf("%s did not exit within %s of SIGTERM; killed", p.Name, wait)
	}
}

// Log returns what the process printed so far ("" if the log is gone).
func (p *Proc) Log() string {
	b, err := os.ReadFile(p.LogPath)
	if err != nil {
		return ""
	}
	return string(b)
}

// handedOut are the addresses FreeAddr gave in this process.
var handedOut = struct {
	sync.Mutex
	addrs map[string]bool
}{addrs: map[string]bool{}}

// FreeAddr returns a free loopback address, never one it gave before in
// this process: a stopped process restarts on its own addresses, which the
// kernel would otherwise hand to the next one asking (a restarted worker
// once found its metrics port taken by an API started meanwhile).
func FreeAddr() (string, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", fmt.Errorf("free port: %w", err)
		}
		addr := ln.Addr().String()
		if err := ln.Close(); err != nil {
			return "", fmt.Errorf("free port: close %s: %w", addr, err)
		}
		if !handedOut.addrs[addr] {
			handedOut.addrs[addr] = true
			return addr, nil
		}
	}
	return "", fmt.Errorf("free port: every port the kernel offered was handed out before")
}

// HTTPReady is a Ready that asks url and wants 200.
func HTTPReady(url string) func(ctx context.Context) error {
	client := &http.Client{Timeout: time.Second}
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("ready %s: %w", url, err)
		}
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("ready %s: %w", url, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s answered %d", url, resp.StatusCode)
		}
		return nil
	}
}

// Poll calls try every 100 ms, each call bounded to 3 s, until it answers
// nil, within passes (0: only ctx bounds it) or ctx ends; the error names
// what was awaited and try's last answer.
func Poll(ctx context.Context, within time.Duration, what string, try func(ctx context.Context) error) error {
	if within > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, within)
		defer cancel()
	}
	for {
		tctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := try(tctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last: %v)", what, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// SelfCPU is the user and system CPU time the calling process has used:
// benchmarks report it beside wall time, which a machine shared with other
// work stretches while CPU time stays.
func SelfCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
