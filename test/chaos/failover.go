package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/testkit/netproxy"
	"github.com/seckill/seckill/internal/testkit/proc"
	"github.com/seckill/seckill/internal/testkit/redisnode"
)

// The single-Redis deployment runs a replica of its redis-server, which
// replicates the master through a proxy of its own (ReplLink). The
// FRedisFailover fault cuts that link, lets the load run on the master
// alone for its span, then fails over: the master SIGKILLed, the replica
// promoted, and the promoted data served at the address every process
// uses (the old master restarted as the new one's replica, a full sync
// discarding its newer data, then promoted back), so the clients find a
// Redis that went back in time by the span.

// replSettings are both servers' replication settings: a full sync starts
// at once instead of waiting for more replicas to join it.
var replSettings = []string{"--repl-diskless-sync-delay", "0"}

// startReplica starts the replica (redisnode's settings) replicating the
// master through ReplLink, and waits until it holds what the master has.
func (d *Deployment) startReplica(ctx context.Context) error {
	addr, err := proc.FreeAddr()
	if err != nil {
		return err
	}
	dir := filepath.Join(d.Dir, "redis-replica")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("redis replica dir: %w", err)
	}
	link, err := netproxy.Start(d.RedisAddr, 0)
	if err != nil {
		return fmt.Errorf("redis replica link: %w", err)
	}
	d.ReplLink = link
	direct := directClient(addr)
	args := append(redisnode.Args(redisnode.Options{Port: portNum(addr), Dir: dir}), replSettings...)
	n := &RedisNode{Addr: addr, Dir: dir, direct: direct}
	n.Proc = &Proc{Name: "redis-replica", Bin: "redis-server", LogPath: logPath(d.Dir, "redis-replica"),
		Args:  replicaOf(args, link.Addr()),
		Ready: func(ctx context.Context) error { return direct.Ping(ctx).Err() }}
	d.Replica = n
	if err := n.Start(ctx, 60*time.Second); err != nil {
		return err
	}
	return proc.Poll(ctx, time.Minute, "the replica to catch up", func(ctx context.Context) error { return caughtUp(ctx, d.Nodes[0].direct, direct) })
}

func directClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, ReadTimeout: 3 * time.Second, WriteTimeout: 3 * time.Second,
		DialTimeout: 2 * time.Second, PoolSize: 2})
}

// replicaOf is args with the server replicating addr.
func replicaOf(args []string, addr string) []string {
	host, port, _ := net.SplitHostPort(addr)
	return append(slices.Clone(args), "--replicaof", host, port)
}

// info reads one INFO section as its fields.
func info(ctx context.Context, c *redis.Client, section string) (map[string]string, error) {
	s, err := c.Info(ctx, section).Result()
	if err != nil {
		return nil, fmt.Errorf("info %s of %s: %w", section, c.Options().Addr, err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			out[k] = v
		}
	}
	return out, nil
}

// replOffset is a server's replication offset: how much of the
// replication stream it has produced (a master) or received (a replica).
func replOffset(ctx context.Context, c *redis.Client) (int64, error) {
	r, err := info(ctx, c, "replication")
	if err != nil {
		return 0, err
	}
	key := "master_repl_offset"
	if r["role"] == "slave" {
		key = "slave_repl_offset"
	}
	return strconv.ParseInt(r[key], 10, 64)
}

// linkUp answers nil once a replica's link to its master is up and no
// full sync is under way.
func linkUp(ctx context.Context, replica *redis.Client) error {
	r, err := info(ctx, replica, "replication")
	if err != nil {
		return err
	}
	if r["role"] != "slave" || r["master_link_status"] != "up" || r["master_sync_in_progress"] != "0" {
		return fmt.Errorf("%s: role %s, link %s, sync in progress %s", replica.Options().Addr, r["role"], r["master_link_status"], r["master_sync_in_progress"])
	}
	return nil
}

// caughtUp answers nil once a replica's link is up and it has received
// everything its master has produced.
func caughtUp(ctx context.Context, master, replica *redis.Client) error {
	if err := linkUp(ctx, replica); err != nil {
		return err
	}
	m, err := replOffset(ctx, master)
	if err != nil {
		return err
	}
	r, err := replOffset(ctx, replica)
	if err != nil {
		return err
	}
	if r < m {
		return fmt.Errorf("%s is %d bytes behind %s", replica.Options().Addr, m-r, master.Options().Addr)
	}
	return nil
}

// aofSettled answers nil once a server rewrites no AOF (a replica
// rewrites it after a full sync).
func aofSettled(ctx context.Context, c *redis.Client) error {
	p, err := info(ctx, c, "persistence")
	if err != nil {
		return err
	}
	if p["aof_rewrite_in_progress"] != "0" || p["aof_rewrite_scheduled"] != "0" {
		return fmt.Errorf("%s rewrites its AOF", c.Options().Addr)
	}
	return nil
}

// failoverCut injects FRedisFailover: the replica's link to the master is
// cut (its proxy refuses it, as a partition would), both servers running;
// from now on writes reach the master alone. The heal is the failover.
func (n *Nemesis) failoverCut(ctx context.Context, p Planned) (func(context.Context) error, string, int64, error) {
	d := n.D
	if d.Replica == nil {
		return nil, "redis", 0, errors.New("no replica to fail over to (single Redis only)")
	}
	target := "redis -> " + d.Replica.Name
	// The replica starts the span with what the master had (a restart of
	// the master may have left it in a full sync).
	if err := proc.Poll(ctx, 10*time.Second, "the replica's master link", func(ctx context.Context) error { return linkUp(ctx, d.Replica.direct) }); err != nil {
		target += " (was not in sync)"
		n.Logf("fault %d %s: the replica %v", p.ID, p.Class, err)
	}
	d.ReplLink.SetCut(true)
	return func(ctx context.Context) error { return n.failOver(ctx, p) }, target, 0, nil
}

// failOver SIGKILLs the master and promotes the replica, which lacks the
// writes of the span; the clients' address then serves the promoted data.
func (n *Nemesis) failOver(ctx context.Context, p Planned) error {
	d := n.D
	m, r := d.Nodes[0], d.Replica
	before, err := replOffset(ctx, m.direct)
	if err != nil {
		before = -1
	}
	if err := m.Kill(); err != nil {
		d.ReplLink.SetCut(false)
		return err
	}
	if err := r.direct.ReplicaOf(ctx, "NO", "ONE").Err(); err != nil {
		// No failover: the master comes back with all it had.
		d.ReplLink.SetCut(false)
		return errors.Join(fmt.Errorf("promote %s: %w", r.Name, err), m.Start(ctx, 2*time.Minute))
	}
	promoted, err := replOffset(ctx, r.direct)
	if err != nil {
		promoted = -1
	}
	n.H.Add(Event{Kind: KindNote, Op: p.Class, FaultID: p.ID, Target: r.Name,
		Detail: fmt.Sprintf("master SIGKILLed at replication offset %d, %s promoted at %d: %d bytes of writes lost", before, r.Name, promoted, before-promoted)})
	synced := d.restartAsReplica(ctx)
	return errors.Join(synced, d.swapBack(ctx))
}

// restartAsReplica starts the killed master as the promoted replica's
// replica: it loads its own AOF, then a full sync replaces its data with
// the promoted one's. It refuses every command but INFO and REPLICAOF
// until then (replica-serve-stale-data no), so no client reads the data it
// discards.
func (d *Deployment) restartAsReplica(ctx context.Context) error {
	m, r := d.Nodes[0], d.Replica
	args, ready := m.Args, m.Ready
	defer func() { m.Args, m.Ready = args, ready }()
	m.Args = append(replicaOf(args, r.Addr), "--replica-serve-stale-data", "no")
	m.Ready = func(ctx context.Context) error { return caughtUp(ctx, r.direct, m.direct) }
	return m.Start(ctx, 2*time.Minute)
}

// swapBack makes the old master the master again, serving what it holds
// (the promoted data once it synced), and the replica its replica through
// ReplLink again; it waits until the replica has caught up.
func (d *Deployment) swapBack(ctx context.Context) error {
	m, r := d.Nodes[0], d.Replica
	if !m.Running() {
		if err := m.Start(ctx, 2*time.Minute); err != nil {
			return err
		}
	}
	if err := m.direct.ReplicaOf(ctx, "NO", "ONE").Err(); err != nil {
		return fmt.Errorf("promote %s again: %w", m.Name, err)
	}
	if err := m.direct.ConfigSet(ctx, "replica-serve-stale-data", "yes").Err(); err != nil {
		return fmt.Errorf("%s: %w", m.Name, err)
	}
	d.ReplLink.SetCut(false)
	host, port, _ := net.SplitHostPort(d.ReplLink.Addr())
	if err := r.direct.ReplicaOf(ctx, host, port).Err(); err != nil {
		return fmt.Errorf("%s replicates %s again: %w", r.Name, m.Name, err)
	}
	return proc.Poll(ctx, time.Minute, "the replica's link up and the AOF settled", func(ctx context.Context) error {
		return errors.Join(linkUp(ctx, r.direct), aofSettled(ctx, m.direct))
	})
}
