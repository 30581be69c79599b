package cluster

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/testkit/redisnode"
)

// NodeClient is a client of the node at addr alone, closed at the end of
// the test. Its connections are READONLY, so that a replica answers reads
// of its master's slots instead of redirecting them.
func (c *RedisCluster) NodeClient(tb testing.TB, addr string) *redis.Client {
	tb.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 2 * time.Second, ReadTimeout: 3 * time.Second,
		WriteTimeout: 3 * time.Second, MaxRetries: -1, PoolSize: 4,
		OnConnect: func(ctx context.Context, cn *redis.Conn) error { return cn.ReadOnly(ctx).Err() }})
	tb.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// MasterOf is the address of the master serving key's slot.
func (c *RedisCluster) MasterOf(tb testing.TB, key string) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := c.Client(tb).MasterForKey(ctx, key)
	if err != nil {
		tb.Fatalf("cluster: master of %s: %v", key, err)
	}
	return m.Options().Addr
}

// AddReplica starts a node, makes it a replica of the master at master
// (redisnode.JoinAsReplica) and returns its address once its link is up
// and it sees the cluster's state ok.
func (c *RedisCluster) AddReplica(tb testing.TB, master string) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	n, err := c.startNode(ctx, tb, fmt.Sprintf("replica%d", len(c.nodes)))
	if err != nil {
		tb.Fatalf("cluster: replica of %s: %v\n%s", master, err, c.Logs())
	}
	replica := c.NodeClient(tb, n.addr)
	if err := redisnode.JoinAsReplica(ctx, replica, c.NodeClient(tb, master)); err != nil {
		tb.Fatalf("cluster: replica of %s: %v\n%s", master, err, c.Logs())
	}
	c.WaitReplicaOf(tb, n.addr, master, 60*time.Second)
	if err := waitClusterOK(ctx, n.addr); err != nil {
		tb.Fatalf("cluster: replica %s: %v\n%s", n.addr, err, c.Logs())
	}
	return n.addr
}

// WaitReplicaOf waits until the node at addr is a replica of the node at
// master with its link up, and returns how long that took.
func (c *RedisCluster) WaitReplicaOf(tb testing.TB, addr, master string, within time.Duration) time.Duration {
	tb.Helper()
	_, port, err := net.SplitHostPort(master)
	if err != nil {
		tb.Fatalf("cluster: %v", err)
	}
	want, _ := strconv.Atoi(port)
	return c.waitReplication(tb, addr, within, func(r redisnode.Replication) bool {
		return r.Role == "slave" && r.MasterPort == want && r.LinkUp
	}, "a replica of "+master+" with its link up")
}

// CutReplication cuts the replication from the master at master while
// every node keeps serving (redisnode.CutReplicationAt) and returns once
// its replica at replica sees its link down: writes the master
// acknowledges from then on are its own.
func (c *RedisCluster) CutReplication(tb testing.TB, master, replica string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := redisnode.CutReplicationAt(ctx, c.NodeClient(tb, master)); err != nil {
		tb.Fatalf("cluster: %v", err)
	}
	c.waitReplication(tb, replica, 30*time.Second, func(r redisnode.Replication) bool {
		return r.Role == "slave" && !r.LinkUp
	}, "its master link down")
}

// TakeOver makes the replica at replica the master of its master's slots
// without the master (redisnode.TakeOver) and returns once it is one.
func (c *RedisCluster) TakeOver(tb testing.TB, replica string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := redisnode.TakeOver(ctx, c.NodeClient(tb, replica)); err != nil {
		tb.Fatalf("cluster: %v\n%s", err, c.Logs())
	}
}

// waitReplication polls the node's INFO replication until ok, and returns
// how long that took.
func (c *RedisCluster) waitReplication(tb testing.TB, addr string, within time.Duration, ok func(redisnode.Replication) bool, what string) time.Duration {
	tb.Helper()
	rdb := c.NodeClient(tb, addr)
	began := time.Now()
	deadline := began.Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		r, err := redisnode.ReplicationOf(ctx, rdb)
		cancel()
		if err == nil && ok(r) {
			return time.Since(began)
		}
		if time.Now().After(deadline) {
			tb.Fatalf("cluster: %s is not %s within %s (last: %+v, %v)\n%s", addr, what, within, r, err, c.Logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
