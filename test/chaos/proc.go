package chaos

import (
	"net"
	"path/filepath"
	"strconv"

	"github.com/seckill/seckill/internal/testkit/proc"
)

// Proc is a process the run owns (internal/testkit/proc).
type Proc = proc.Proc

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

func logPath(dir, name string) string { return filepath.Join(dir, name+".log") }

// portNum is addr's port as a number (0 when it has none).
func portNum(addr string) int {
	n, _ := strconv.Atoi(port(addr))
	return n
}
