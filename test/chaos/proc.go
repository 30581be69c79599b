package chaos

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Proc is a process the run owns: a service (redis-server, mariadbd, the
// Temporal dev server) or a seckill API or worker. It can be killed,
// frozen, thawed and started again with the same arguments.
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
	return p.WaitReady(ctx, within)
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

// Running reports whether the current run is alive.
func (p *Proc) Running() bool {
	select {
	case <-p.Done():
		return false
	default:
		return true
	}
}

func (p *Proc) signal(sig syscall.Signal) error {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd == nil || !p.Running() {
		return fmt.Errorf("%s is not running", p.Name)
	}
	// The whole process group: a service's children share its fate.
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
	if err := p.signal(syscall.SIGKILL); err != nil {
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
	if err := p.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	p.mu.Lock()
	p.frozen = true
	p.mu.Unlock()
	return nil
}

// Thaw sends SIGCONT.
func (p *Proc) Thaw() error {
	p.mu.Lock()
	p.frozen = false
	p.mu.Unlock()
	return p.signal(syscall.SIGCONT)
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
	p.mu.Lock()
	frozen := p.frozen
	p.mu.Unlock()
	if frozen {
		_ = p.Thaw()
	}
	_ = p.signal(syscall.SIGTERM)
	select {
	case <-p.Done():
		return nil
	case <-time.After(wait):
		_ = p.signal(syscall.SIGKILL)
		<-p.Done()
		return fmt.Errorf("%s did not exit within %s of SIGTERM; killed", p.Name, wait)
	}
}

// freeAddr returns a free loopback address.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

func logPath(dir, name string) string { return filepath.Join(dir, name+".log") }
