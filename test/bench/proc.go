package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Proc is a process the bench started (an API, a worker, the baseline).
type Proc struct {
	Name    string
	URL     string // base URL of its HTTP endpoint
	LogPath string
	cmd     *exec.Cmd
	done    chan struct{}
}

// FreeAddr returns a free loopback address.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// StartProc starts bin with args and env (added to ours), logging to
// logDir/name.log, and waits until healthURL answers 200.
func StartProc(ctx context.Context, name, bin string, args []string, env map[string]string, logDir, baseURL, healthURL string) (*Proc, error) {
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, fmt.Errorf("start %s: log dir: %w", name, err)
	}
	logPath := filepath.Join(logDir, name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("start %s: log: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Proc{Name: name, URL: baseURL, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	if err := p.waitHealthy(ctx, healthURL); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

func (p *Proc) waitHealthy(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	c := &http.Client{Timeout: time.Second}
	for {
		if resp, err := c.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited before it was ready; see %s", p.Name, p.LogPath)
		case <-ctx.Done():
			return fmt.Errorf("%s not ready at %s within 60s; see %s", p.Name, url, p.LogPath)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop sends SIGTERM to this process only and waits (SIGKILL after 20 s).
func (p *Proc) Stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}
