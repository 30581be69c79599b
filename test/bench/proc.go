package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/seckill/seckill/internal/testkit/proc"
)

// Proc is a process the bench started (an API, a worker, the baseline).
type Proc struct {
	*proc.Proc
	URL string // base URL of its HTTP endpoint
}

// StartProc starts bin with args and env (added to ours), logging to
// logDir/name.log, and waits until healthURL answers 200.
func StartProc(ctx context.Context, name, bin string, args []string, env map[string]string, logDir, baseURL, healthURL string) (*Proc, error) {
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, fmt.Errorf("start %s: log dir: %w", name, err)
	}
	logPath := filepath.Join(logDir, name+".log")
	if err := os.Truncate(logPath, 0); err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("start %s: log: %w", name, err)
	}
	p := &Proc{Proc: &proc.Proc{Name: name, Bin: bin, Args: args, Env: env, LogPath: logPath, Ready: proc.HTTPReady(healthURL)}, URL: baseURL}
	if err := p.Proc.Start(ctx, 60*time.Second); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

// Stop sends SIGTERM and waits (SIGKILL after 20 s).
func (p *Proc) Stop() { p.Proc.Stop(20 * time.Second) }
