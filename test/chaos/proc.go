package chaos

import (
	"net"
	"path/filepath"

	"github.com/seckill/seckill/internal/proc"
)

// Proc is a process the run owns (internal/proc).
type Proc = proc.Proc

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

func logPath(dir, name string) string { return filepath.Join(dir, name+".log") }
