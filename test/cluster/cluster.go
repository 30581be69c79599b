// Package cluster runs seckill on a Redis Cluster in tests: it starts a
// local three-master cluster (redis-server --cluster-enabled yes, one temp
// dir each), adds a replica to a master and fails the master over to it
// for a test that asks, drives crowds of buyers, and measures the
// reservation rate of API instances on it.
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
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/testkit/proc"
	"github.com/seckill/seckill/internal/testkit/redisnode"
)

// Masters is the number of master nodes MustRedisCluster starts.
const Masters = 3

// RedisCluster is a local Redis Cluster started by a test.
type RedisCluster struct {
	Addrs []string // client addresses of the masters it was created with
	nodes []*node  // every node started: the masters, then replicas
}

// node is one redis-server of the cluster.
type node struct {
	addr, dir string
	p         *proc.Proc
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
	for i, n := range c.nodes {
		raw, _ := os.ReadFile(filepath.Join(n.dir, "redis.log"))
		s := string(raw)
		if len(s) > 2000 {
			s = s[len(s)-2000:]
		}
		fmt.Fprintf(&b, "--- node %d (%s) ---\n%s\n", i, n.addr, s)
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
		n, err := c.startNode(ctx, tb, fmt.Sprintf("node%d", i))
		if err != nil {
			tb.Fatalf("cluster: node %d: %v\n%s", i, err, c.Logs())
		}
		c.Addrs = append(c.Addrs, n.addr)
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

// startNode starts a cluster node, ready to replicate and be replicated
// from (redisnode.ReplicationArgs), on free ports.
func (c *RedisCluster) startNode(ctx context.Context, tb testing.TB, name string) (*node, error) {
	tb.Helper()
	n := &node{dir: tb.TempDir()}
	c.nodes = append(c.nodes, n)
	port, p, err := startOnFreePorts(ctx, tb, name, n.dir, true)
	n.addr, n.p = net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), p
	return n, err
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
	port, _, err := startOnFreePorts(ctx, tb, "redis", dir, false)
	if err != nil {
		raw, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
		tb.Fatalf("cluster: redis: %v\n%s", err, raw)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// freePort is a free loopback port, never one handed out before in this
// process (proc.FreeAddr).
func freePort(tb testing.TB) int {
	tb.Helper()
	addr, err := proc.FreeAddr()
	if err != nil {
		tb.Fatalf("cluster: %v", err)
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		tb.Fatalf("cluster: free port: %v", err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		tb.Fatalf("cluster: free port %q: %v", port, err)
	}
	return n
}

// startOnFreePorts starts a node (a cluster node with a bus port, and
// the replication user, when cluster) on free ports and waits for its
// PONG. A free port is only free when it was picked: another process on
// the machine may bind it before redis-server does, which then exits at
// once; that is retried on new ports.
func startOnFreePorts(ctx context.Context, tb testing.TB, name, dir string, cluster bool) (int, *proc.Proc, error) {
	tb.Helper()
	logPath := filepath.Join(dir, "redis.log")
	for attempt := 1; ; attempt++ {
		_ = os.Remove(logPath) // judge this attempt's log only
		port, bus := freePort(tb), 0
		var extra []string
		if cluster {
			bus, extra = freePort(tb), redisnode.ReplicationArgs()
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		rdb := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, ReadTimeout: time.Second})
		p := &proc.Proc{Name: name, Bin: "redis-server", LogPath: logPath,
			Args:  append(redisnode.Args(redisnode.Options{Port: port, Bus: bus, Dir: dir}), extra...),
			Ready: func(ctx context.Context) error { return rdb.Ping(ctx).Err() }}
		err := p.Start(ctx, 30*time.Second)
		_ = rdb.Close()
		// SIGKILLed at cleanup: the test owns nothing it must flush.
		tb.Cleanup(func() {
			if err := p.Kill(); err != nil {
				tb.Errorf("cluster: kill %s: %v", name, err)
			}
		})
		if err == nil {
			return port, p, nil
		}
		raw, _ := os.ReadFile(logPath)
		if attempt == 5 || ctx.Err() != nil || !strings.Contains(string(raw), "Address already in use") {
			return port, p, fmt.Errorf("%s on port %d: %w", name, port, err)
		}
		tb.Logf("cluster: %s: a port was taken meanwhile; retrying on new ones", name)
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
