package bench

import (
	"fmt"
	"net"
	"slices"

	"github.com/prometheus/procfs"
)

// Process readings from /proc (procfs): CPU time and resident memory.

// CPU is the CPU time (user + system, seconds) the process has used.
func (p *Proc) CPU() (float64, error) {
	if p.cmd == nil || p.cmd.Process == nil {
		return 0, fmt.Errorf("cpu of %s: not started", p.Name)
	}
	return pidCPU(p.cmd.Process.Pid)
}

// rssBytes is a process's resident set size (VmRSS).
func rssBytes(p *Proc) (int64, error) {
	if p.cmd == nil || p.cmd.Process == nil {
		return 0, fmt.Errorf("rss of %s: not started", p.Name)
	}
	proc, err := procfs.NewProc(p.cmd.Process.Pid)
	if err != nil {
		return 0, fmt.Errorf("rss of %s: %w", p.Name, err)
	}
	st, err := proc.NewStatus()
	if err != nil {
		return 0, fmt.Errorf("rss of %s: %w", p.Name, err)
	}
	return int64(st.VmRSS), nil
}

func pidCPU(pid int) (float64, error) {
	proc, err := procfs.NewProc(pid)
	if err != nil {
		return 0, fmt.Errorf("cpu of pid %d: %w", pid, err)
	}
	st, err := proc.Stat()
	if err != nil {
		return 0, fmt.Errorf("cpu of pid %d: %w", pid, err)
	}
	return st.CPUTime(), nil
}

// cpuMeter reads the CPU time of several processes together.
type cpuMeter []func() (float64, error)

func (m cpuMeter) read() (float64, error) {
	total := 0.0
	for _, f := range m {
		s, err := f()
		if err != nil {
			return 0, err
		}
		total += s
	}
	return total, nil
}

// temporalServerPID finds the Temporal dev server listening on addr (the
// services script starts it as `temporal server start-dev --port P ...`).
func temporalServerPID(addr string) (int, error) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, fmt.Errorf("temporal server: %w", err)
	}
	procs, err := procfs.AllProcs()
	if err != nil {
		return 0, fmt.Errorf("temporal server: %w", err)
	}
	for _, p := range procs {
		args, err := p.CmdLine()
		if err != nil || len(args) < 3 {
			continue
		}
		if !slices.Contains(args, "start-dev") {
			continue
		}
		for i, a := range args {
			if a == "--port="+port || (a == "--port" || a == "-p") && i+1 < len(args) && args[i+1] == port {
				return p.PID, nil
			}
		}
	}
	return 0, fmt.Errorf("temporal server on %s: no start-dev process found", addr)
}

// perRequestMS is CPU seconds per request, in ms.
func perRequestMS(cpu float64, requests int64) float64 {
	if requests <= 0 {
		return 0
	}
	return cpu * 1000 / float64(requests)
}
