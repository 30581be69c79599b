// Package redisnode is how the test harnesses (test/chaos, test/cluster)
// run redis-server: one set of arguments, the settings of scripts/redis.sh
// (AOF, fsync every second, no RDB snapshots, no eviction), as a single
// server or a cluster node, the joining of nodes into a cluster, a replica
// joined to a cluster master and its take-over of the master's slots; a
// Sentinel group (SentinelGroup: a master, a replica, three sentinels)
// whose master a test can kill; and the cut of a master's replication
// while every node keeps serving (CutReplicationAt).
package redisnode

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// NodeTimeout is a cluster node's failure-detection timeout.
const NodeTimeout = 5 * time.Second

// Options are one redis-server's: its port and directory; a log file (""
// logs to stdout); for a cluster node its bus port (0: a single server)
// and, when it is reached through a proxy, the port it announces.
type Options struct {
	Port, Bus, Announce int
	Dir, LogFile        string
}

// Durability are the settings the product's guarantees assume of Redis
// (docs/deploy.md): every write in the AOF, fsync every second, no RDB
// snapshots, no eviction. scripts/redis.sh passes them too
// (TestTheScriptKeepsTheDurabilitySettings).
var Durability = []string{"--appendonly", "yes", "--appendfsync", "everysec", "--maxmemory-policy", "noeviction", "--save", ""}

// Args are redis-server's arguments for o.
func Args(o Options) []string {
	args := append([]string{"--bind", "127.0.0.1", "--port", strconv.Itoa(o.Port), "--dir", o.Dir}, Durability...)
	args = append(args, "--auto-aof-rewrite-percentage", "0", "--protected-mode", "no", "--daemonize", "no")
	if o.LogFile != "" {
		args = append(args, "--logfile", o.LogFile)
	}
	if o.Bus > 0 {
		args = append(args,
			"--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(o.Bus),
			"--cluster-config-file", filepath.Join(o.Dir, "nodes.conf"),
			"--cluster-node-timeout", strconv.FormatInt(NodeTimeout.Milliseconds(), 10))
	}
	if o.Announce > 0 {
		args = append(args, "--cluster-announce-ip", "127.0.0.1", "--cluster-announce-port", strconv.Itoa(o.Announce),
			"--cluster-announce-bus-port", strconv.Itoa(o.Bus))
	}
	return args
}

// CreateCluster joins the nodes at addrs into a cluster of masters
// (redis-cli --cluster create).
func CreateCluster(ctx context.Context, addrs []string) error {
	args := append(append([]string{"--cluster", "create"}, addrs...), "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("redis-cli --cluster create: %w\n%s", err, out)
	}
	return nil
}

// ClusterOK answers nil once node says cluster_state:ok.
func ClusterOK(ctx context.Context, node *redis.Client) error {
	info, err := node.ClusterInfo(ctx).Result()
	if err != nil {
		return fmt.Errorf("cluster info: %w", err)
	}
	if !strings.Contains(info, "cluster_state:ok") {
		return errors.New("cluster_state is not ok")
	}
	return nil
}

// WaitMasters waits until rdb reaches masters masters (it learns the slot
// map from any node, and may need to read it again).
func WaitMasters(ctx context.Context, rdb *redis.ClusterClient, masters int) error {
	for {
		n := 0
		err := rdb.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			n++
			return m.Ping(ctx).Err()
		})
		if err == nil && n == masters {
			return nil
		}
		rdb.ReloadState(ctx)
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster client sees %d of %d masters (%v): %w", n, masters, err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
