package redisnode

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/testkit/proc"
)

// The ACL user replicas authenticate as to their master (every node
// started with ReplicationArgs has it). Turning it off at a master and
// dropping its connections (CutReplicationAt) cuts the master's replicas
// off while every node keeps serving clients: a replica that replicated
// through a proxy would not do under Sentinel, since a sentinel re-points
// a replica whose master address differs from the one it monitors
// (+fix-slave-config) within a failover timeout, nor in a Redis Cluster,
// where a replica dials the address its master announces on the bus.
const (
	replicationUser     = "replicator"
	replicationPassword = "replicator-secret"
)

// ReplicationArgs are the redis-server arguments that let a node be
// replicated from, and replicate, as the replication user: the user, with
// only the commands replication needs, and the credentials the node gives
// a master of its own; and a full sync that starts at once instead of
// waiting 5 s for more replicas.
func ReplicationArgs() []string {
	return []string{"--repl-diskless-sync-delay", "0",
		"--user", replicationUser, "on", ">" + replicationPassword, "+psync", "+sync", "+replconf", "+ping",
		"--masteruser", replicationUser, "--masterauth", replicationPassword}
}

// CutReplicationAt turns the replication user off at node and drops its
// connections: node's replicas lose their link and cannot make it again
// until HealReplicationAt, while node and they keep serving clients.
// Writes node acknowledges from then on are node's alone.
func CutReplicationAt(ctx context.Context, node *redis.Client) error {
	if err := node.Do(ctx, "ACL", "SETUSER", replicationUser, "off").Err(); err != nil {
		return fmt.Errorf("cut replication at %s: %w", node.Options().Addr, err)
	}
	if err := node.Do(ctx, "CLIENT", "KILL", "USER", replicationUser).Err(); err != nil {
		return fmt.Errorf("cut replication at %s: %w", node.Options().Addr, err)
	}
	return nil
}

// HealReplicationAt undoes CutReplicationAt: node's replicas may connect
// again.
func HealReplicationAt(ctx context.Context, node *redis.Client) error {
	if err := node.Do(ctx, "ACL", "SETUSER", replicationUser, "on").Err(); err != nil {
		return fmt.Errorf("heal replication at %s: %w", node.Options().Addr, err)
	}
	return nil
}

// Replication is a node's view of its role (INFO replication).
type Replication struct {
	Role string // master or slave
	// MasterPort and LinkUp are a replica's: its master's port and
	// whether its link to it is up.
	MasterPort int
	LinkUp     bool
	// Offset is the node's replication offset (master_repl_offset).
	Offset int64
}

// ReplicationOf reads node's INFO replication.
func ReplicationOf(ctx context.Context, node *redis.Client) (Replication, error) {
	info, err := node.Info(ctx, "replication").Result()
	if err != nil {
		return Replication{}, fmt.Errorf("info replication of %s: %w", node.Options().Addr, err)
	}
	var r Replication
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch k {
		case "role":
			r.Role = v
		case "master_port":
			r.MasterPort, _ = strconv.Atoi(v)
		case "master_link_status":
			r.LinkUp = v == "up"
		case "master_repl_offset":
			r.Offset, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	if r.Role == "" {
		return r, fmt.Errorf("info replication of %s: no role in %q", node.Options().Addr, info)
	}
	return r, nil
}

// ClusterNode is one line of CLUSTER NODES: a node's id, its client and
// bus addresses, its flags and the id of its master ("-" for a master).
type ClusterNode struct {
	ID, Addr, Bus string
	Flags         []string
	MasterID      string
}

// ClusterNodes reads the cluster's nodes as node sees them; Myself is
// node's own line.
func ClusterNodes(ctx context.Context, node *redis.Client) (all []ClusterNode, myself ClusterNode, err error) {
	out, err := node.ClusterNodes(ctx).Result()
	if err != nil {
		return nil, myself, fmt.Errorf("cluster nodes of %s: %w", node.Options().Addr, err)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		// ip:port@cport[,hostname]
		addr, bus, _ := strings.Cut(strings.SplitN(f[1], ",", 2)[0], "@")
		n := ClusterNode{ID: f[0], Addr: addr, Bus: bus, Flags: strings.Split(f[2], ","), MasterID: f[3]}
		all = append(all, n)
		if n.Has("myself") {
			myself = n
		}
	}
	if myself.ID == "" {
		return all, myself, fmt.Errorf("cluster nodes of %s: no line for itself in %q", node.Options().Addr, out)
	}
	return all, myself, nil
}

// Has reports whether the node has flag (master, slave, fail, myself...).
func (n ClusterNode) Has(flag string) bool {
	for _, f := range n.Flags {
		if f == flag {
			return true
		}
	}
	return false
}

// JoinAsReplica brings the empty cluster node replica into master's
// cluster (CLUSTER MEET, by master's bus port) and, once replica knows
// master, makes it master's replica (CLUSTER REPLICATE). Its link comes
// up later: ReplicationOf tells.
func JoinAsReplica(ctx context.Context, replica, master *redis.Client) error {
	_, m, err := ClusterNodes(ctx, master)
	if err != nil {
		return err
	}
	host, port, err := net.SplitHostPort(m.Addr)
	if err != nil {
		return fmt.Errorf("join as replica: master address %q: %w", m.Addr, err)
	}
	if err := replica.Do(ctx, "CLUSTER", "MEET", host, port, m.Bus).Err(); err != nil {
		return fmt.Errorf("join as replica: cluster meet: %w", err)
	}
	err = proc.Poll(ctx, 0, replica.Options().Addr+" to know "+m.Addr, func(ctx context.Context) error {
		all, _, err := ClusterNodes(ctx, replica)
		if err != nil {
			return err
		}
		for _, n := range all {
			if n.ID == m.ID && !n.Has("handshake") && !n.Has("noaddr") {
				return replica.ClusterReplicate(ctx, m.ID).Err()
			}
		}
		return errors.New("not yet")
	})
	if err != nil {
		return fmt.Errorf("join as replica: %w", err)
	}
	return nil
}

// TakeOver makes replica the owner of its master's slots without the
// master's agreement (CLUSTER FAILOVER TAKEOVER: a config epoch of its
// own, broadcast to every node), as an operator does when the master is
// unreachable, and returns once replica says it is a master.
func TakeOver(ctx context.Context, replica *redis.Client) error {
	if err := replica.Do(ctx, "CLUSTER", "FAILOVER", "TAKEOVER").Err(); err != nil {
		return fmt.Errorf("take over at %s: %w", replica.Options().Addr, err)
	}
	return proc.Poll(ctx, 0, replica.Options().Addr+" to be a master", func(ctx context.Context) error {
		r, err := ReplicationOf(ctx, replica)
		if err != nil {
			return err
		}
		if r.Role != "master" {
			return fmt.Errorf("role %s", r.Role)
		}
		return nil
	})
}
