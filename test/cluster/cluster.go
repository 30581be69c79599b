// Package cluster runs seckill on a Redis Cluster in tests: it starts a
// local three-master cluster (redis-server --cluster-enabled yes, one temp
// dir each), and measures the reservation rate of API instances on it.
package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/redisnode"
)

// Masters is the number of master nodes MustRedisCluster starts.
const Masters = 3

// RedisCluster is a local Redis Cluster started by a test.
type RedisCluster struct {
	Addrs []string // client addresses of the masters
	dirs  []string
}

// AddrList is the cluster's addresses as REDIS_ADDRS expects them.
func (c *RedisCluster) AddrList() string { return strings.Join(c.Addrs, ",") }

// Client returns a cluster client, closed at the end of the test.
func (c *RedisCluster) Client(tb testing.TB) *redis.ClusterClient {
	tb.Helper()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:        c.Addrs,
		DialTimeout:  2 * time.Second,
		ReadTimeout:  5 * time.Second,
		WriteTimeout: 5 * time.Second,
		PoolSize:     64,
	})
	tb.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// Logs returns the tail of every node's log, for a failure message.
func (c *RedisCluster) Logs() string {
	var b strings.Builder
	for i, d := range c.dirs {
		raw, _ := os.ReadFile(filepath.Join(d, "redis.log"))
		s := string(raw)
		if len(s) > 2000 {
			s = s[len(s)-2000:]
		}
		fmt.Fprintf(&b, "--- node %d (%s) ---\n%s\n", i, c.Addrs[i], s)
	}
	return b.String()
}

// MustRedisCluster starts three redis-server processes with cluster mode on
// free ports, joins them with `redis-cli --cluster create`, waits for
// cluster_state:ok on every node and stops them at the end of the test.
func MustRedisCluster(tb testing.TB) *RedisCluster {
	tb.Helper()
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			tb.Fatalf("cluster: %s not found (scripts/redis.sh installs it): %v", bin, err)
		}
	}
	c := &RedisCluster{}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range Masters {
		dir := tb.TempDir()
		c.dirs = append(c.dirs, dir)
		c.Addrs = append(c.Addrs, "")
		port, err := startOnFreePorts(ctx, tb, fmt.Sprintf("node%d", i), dir, true)
		c.Addrs[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if err != nil {
			tb.Fatalf("cluster: node %d: %v\n%s", i, err, c.Logs())
		}
	}
	if err := redisnode.CreateCluster(ctx, c.Addrs); err != nil {
		tb.Fatalf("cluster: %v\n%s", err, c.Logs())
	}
	for _, addr := range c.Addrs {
		if err := waitClusterOK(ctx, addr); err != nil {
			tb.Fatalf("cluster: node %s: %v\n%s", addr, err, c.Logs())
		}
	}
	if err := redisnode.WaitMasters(ctx, c.Client(tb), Masters); err != nil {
		tb.Fatalf("cluster: %v\n%s", err, c.Logs())
	}
	return c
}

// MustRedisServer starts one standalone redis-server with the cluster
// nodes' settings (for comparisons) and returns its address.
func MustRedisServer(tb testing.TB) string {
	tb.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		tb.Fatalf("cluster: redis-server not found (scripts/redis.sh installs it): %v", err)
	}
	dir := tb.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	port, err := startOnFreePorts(ctx, tb, "redis", dir, false)
	if err != nil {
		raw, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
		tb.Fatalf("cluster: redis: %v\n%s", err, raw)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// freePort is a free loopback port (the kernel's pick; closed at once).
func freePort(tb testing.TB) int {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("cluster: free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startOnFreePorts starts a node (a cluster node with a bus port when
// cluster) on free ports and waits for its PONG. A free port is only free
// when it was picked: another process on the machine may bind it before
// redis-server does, which then exits at once; that is retried on new ports.
func startOnFreePorts(ctx context.Context, tb testing.TB, name, dir string, cluster bool) (int, error) {
	tb.Helper()
	var port int
	for attempt := 1; ; attempt++ {
		_ = os.Remove(filepath.Join(dir, "redis.log")) // judge this attempt's log only
		port = freePort(tb)
		bus := 0
		if cluster {
			bus = freePort(tb)
		}
		exited := startNode(tb, name, dir, port, bus)
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		pctx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-exited:
				cancel()
			case <-pctx.Done():
			}
		}()
		err := waitPing(pctx, addr)
		cancel()
		if err == nil {
			return port, nil
		}
		raw, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
		if attempt == 5 || ctx.Err() != nil || !strings.Contains(string(raw), "Address already in use") {
			return port, fmt.Errorf("%s on port %d: %w", name, port, err)
		}
		tb.Logf("cluster: %s: a port was taken meanwhile; retrying on new ones", name)
	}
}

// startNode starts one redis-server in dir (redisnode.Args); with bus > 0
// as a cluster node. SIGKILLed and reaped at cleanup. The channel closes when it exits.
func startNode(tb testing.TB, name, dir string, port, bus int) <-chan struct{} {
	tb.Helper()
	args := redisnode.Args(redisnode.Options{Port: port, Bus: bus, Dir: dir, LogFile: filepath.Join(dir, "redis.log")})
	cmd := exec.Command("redis-server", args...)
	// Its own process group: a Ctrl-C of the test does not hit it first, and
	// the kill below reaches only this process.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("cluster: start %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			tb.Errorf("cluster: %s (pid %d) did not exit after SIGKILL", name, cmd.Process.Pid)
		}
	})
	return done
}

func waitPing(ctx context.Context, addr string) error {
	rdb := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer rdb.Close()
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := rdb.Ping(pctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no PONG: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func waitClusterOK(ctx context.Context, addr string) error {
	rdb := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer rdb.Close()
	for {
		ictx, cancel := context.WithTimeout(ctx, time.Second)
		err := redisnode.ClusterOK(ictx, rdb)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node never ready: %w", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
