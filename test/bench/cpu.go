package bench

import (
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/procfs"
)

// Process readings from /proc (procfs): CPU time and resident memory.

// CPU is the CPU time (user + system, seconds) the process has used.
func (p *Proc) CPU() (float64, error) {
	pid := p.Pid()
	if pid == 0 {
		return 0, fmt.Errorf("cpu of %s: not started", p.Name)
	}
	return pidCPU(pid)
}

// rssBytes is a process's resident set size (VmRSS).
func rssBytes(p *Proc) (int64, error) {
	pid := p.Pid()
	if pid == 0 {
		return 0, fmt.Errorf("rss of %s: not started", p.Name)
	}
	proc, err := procfs.NewProc(pid)
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
	st, err := pidStat(pid)
	if err != nil {
		return 0, err
	}
	return st.CPUTime(), nil
}

func pidStat(pid int) (procfs.ProcStat, error) {
	proc, err := procfs.NewProc(pid)
	if err != nil {
		return procfs.ProcStat{}, fmt.Errorf("cpu of pid %d: %w", pid, err)
	}
	st, err := proc.Stat()
	if err != nil {
		return procfs.ProcStat{}, fmt.Errorf("cpu of pid %d: %w", pid, err)
	}
	return st, nil
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

// temporalServerCPU meters the Temporal server listening on addr: the dev
// server (`temporal server start-dev --port P`, SQLite inside it), or the
// production-shaped server (scripts/temporal-server.sh: TS_PORT=P in its
// environment) with its PostgreSQL, whose per-connection backends count
// too. It also says which it found.
func temporalServerCPU(addr string) (cpuMeter, string, error) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, "", fmt.Errorf("temporal server: %w", err)
	}
	procs, err := procfs.AllProcs()
	if err != nil {
		return nil, "", fmt.Errorf("temporal server: %w", err)
	}
	if pid, ok := devServer(procs, port); ok {
		return cpuMeter{func() (float64, error) { return pidCPU(pid) }}, "the Temporal dev server", nil
	}
	for _, p := range procs {
		args, err := p.CmdLine()
		if err != nil || len(args) < 2 {
			continue
		}
		if !strings.HasSuffix(args[0], "temporal-server") {
			continue
		}
		env, err := p.Environ()
		if err != nil || !slices.Contains(env, "TS_PORT="+port) {
			continue
		}
		pgPort := ""
		for _, e := range env {
			if v, ok := strings.CutPrefix(e, "TS_PG_PORT="); ok {
				pgPort = v
			}
		}
		pg, err := postmaster(procs, pgPort)
		if err != nil {
			return nil, "", err
		}
		return cpuMeter{func() (float64, error) { return pidCPU(p.PID) }, func() (float64, error) { return treeCPU(pg) }},
			"the Temporal server and its PostgreSQL", nil
	}
	return nil, "", fmt.Errorf("temporal server on %s: no dev server or temporal-server process found", addr)
}

// devServer finds the Temporal dev server serving port among procs.
func devServer(procs procfs.Procs, port string) (int, bool) {
	for _, p := range procs {
		args, err := p.CmdLine()
		if err == nil && slices.Contains(args, "start-dev") && hasFlag(args, port, "--port", "-p") {
			return p.PID, true
		}
	}
	return 0, false
}

func hasFlag(args []string, value string, names ...string) bool {
	for i, a := range args {
		for _, n := range names {
			if a == n+"="+value || a == n && i+1 < len(args) && args[i+1] == value {
				return true
			}
		}
	}
	return false
}

// postmaster finds the PostgreSQL server listening on port.
func postmaster(procs procfs.Procs, port string) (int, error) {
	for _, p := range procs {
		args, err := p.CmdLine()
		if err == nil && len(args) > 0 && strings.HasSuffix(args[0], "/postgres") && hasFlag(args, port, "-p") {
			return p.PID, nil
		}
	}
	return 0, fmt.Errorf("no PostgreSQL on port %q", port)
}

// treeCPU is a process's CPU with its children's: the live ones read now,
// the ones it reaped already in its own counters.
func treeCPU(pid int) (float64, error) {
	st, err := pidStat(pid)
	if err != nil {
		return 0, err
	}
	total := st.CPUTime() + float64(st.CUTime+st.CSTime)/100 // clock ticks (USER_HZ)
	procs, err := procfs.AllProcs()
	if err != nil {
		return 0, fmt.Errorf("cpu of pid %d: %w", pid, err)
	}
	for _, c := range procs {
		if cst, err := c.Stat(); err == nil && cst.PPID == pid {
			total += cst.CPUTime()
		}
	}
	return total, nil
}

// servicesCPU meters the redis-server serving redisAddr and the mariadbd
// processes serving ports on this host: the DSN's own port for one server,
// each node's for a cluster behind a proxy (Options.MySQLPorts).
func servicesCPU(redisAddr string, ports []string) (cpuMeter, error) {
	procs, err := procfs.AllProcs()
	if err != nil {
		return nil, fmt.Errorf("services: %w", err)
	}
	redisPID := 0
	for _, p := range procs {
		args, err := p.CmdLine()
		if err != nil || len(args) == 0 {
			continue
		}
		// redis-server rewrites its title to "redis-server host:port".
		if strings.HasPrefix(args[0], "redis-server") && slices.Contains(strings.Fields(strings.Join(args, " ")), redisAddr) {
			redisPID = p.PID
		}
	}
	if redisPID == 0 {
		return nil, fmt.Errorf("redis-server %s not found here", redisAddr)
	}
	m, err := mariadbCPU(ports)
	if err != nil {
		return nil, err
	}
	return append(cpuMeter{func() (float64, error) { return pidCPU(redisPID) }}, m...), nil
}

// mariadbCPU meters the mariadbd processes serving ports on this host.
func mariadbCPU(ports []string) (cpuMeter, error) {
	procs, err := procfs.AllProcs()
	if err != nil {
		return nil, fmt.Errorf("mariadb: %w", err)
	}
	mysqlPIDs := map[string]int{}
	for _, p := range procs {
		args, err := p.CmdLine()
		if err != nil || len(args) == 0 {
			continue
		}
		for _, port := range ports {
			if strings.HasSuffix(args[0], "mariadbd") && hasFlag(args, port, "--port") {
				mysqlPIDs[port] = p.PID
			}
		}
	}
	if len(mysqlPIDs) != len(ports) {
		return nil, fmt.Errorf("mariadbd on ports %v not found here (found %v)", ports, mysqlPIDs)
	}
	var m cpuMeter
	for _, pid := range mysqlPIDs {
		m = append(m, func() (float64, error) { return pidCPU(pid) })
	}
	return m, nil
}

// mysqlPorts are the ports of the mariadbd processes serving dsn: nodes
// when given, else the DSN's own.
func mysqlPorts(dsn string, nodes []string) ([]string, error) {
	if len(nodes) > 0 {
		return nodes, nil
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("mysql dsn: %w", err)
	}
	_, port, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("mysql address: %w", err)
	}
	return []string{port}, nil
}

// perRequestMS is CPU seconds per request, in ms.
func perRequestMS(cpu float64, requests int64) float64 {
	if requests <= 0 {
		return 0
	}
	return cpu * 1000 / float64(requests)
}
