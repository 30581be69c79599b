package redisnode

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/testkit/proc"
)

// SentinelMaster is the name a SentinelGroup's sentinels monitor its
// master by (REDIS_SENTINEL_MASTER).
const SentinelMaster = "seckill"

// The sentinels' settings: a master that has not answered for
// SentinelDownAfter is down in a sentinel's eyes, two of the three must
// agree (the quorum) before one of them, elected by a majority, fails
// over; SentinelFailoverTimeout bounds the failover's steps, and a
// sentinel whose attempt failed tries again after twice it. At one second
// (the sentinels' ping period) a sentinel's new link to a just-promoted
// master, whose first reply a loaded host delayed past it, called the
// master down and failed over to the old one restarted empty.
const (
	SentinelQuorum          = 2
	SentinelDownAfter       = 2 * time.Second
	SentinelFailoverTimeout = 5 * time.Second
)

// SentinelOptions are a SentinelGroup's.
type SentinelOptions struct {
	// Dir holds a directory of each process (master, replica,
	// sentinel-1...), with its log and the sentinel's configuration file.
	Dir string
	// Password is the data nodes' password (their requirepass; the
	// sentinels use it as auth-pass); SentinelPassword the sentinels'
	// own. Empty: none.
	Password, SentinelPassword string
	// TLS, when set, makes every process serve TLS only, and replicate and
	// talk to the others over TLS.
	TLS *SentinelTLS
}

// SentinelTLS are the PEM files of a group serving TLS: one certificate
// and key (for 127.0.0.1) that every process presents, and the CA that
// signed it, which verifies them all. Clients need no certificate.
type SentinelTLS struct {
	CertFile, KeyFile, CAFile string
}

// tlsArgs are the TLS settings of a process listening on port, as
// name-value pairs.
func (t *SentinelTLS) tlsArgs(port int) [][2]string {
	return [][2]string{{"port", "0"}, {"tls-port", strconv.Itoa(port)}, {"tls-cert-file", t.CertFile},
		{"tls-key-file", t.KeyFile}, {"tls-ca-cert-file", t.CAFile}, {"tls-auth-clients", "no"}, {"tls-replication", "yes"}}
}

// SentinelGroup is a master, one replica and three redis-sentinel
// processes monitoring the master as SentinelMaster, each on a free
// loopback port: the shape of a Sentinel deployment, for tests that fail
// its master over. The data nodes run with the product's durability
// settings (Args).
type SentinelGroup struct {
	opts            SentinelOptions
	tls             *tls.Config // the harness's own clients', with TLS
	master, replica string      // the addresses the nodes were started at, as master and as its replica
	nodes           map[string]*proc.Proc
	sentinelAddrs   []string
	sentinels       []*proc.Proc
	clients         []*redis.SentinelClient // one per sentinel, in sentinelAddrs's order
}

// StartSentinelGroup starts a group and returns once the replica has
// synchronised and every sentinel knows the replica and the two other
// sentinels, so that a failover can happen. It fails when redis-server
// or redis-sentinel (Debian's redis-sentinel package) is not installed.
func StartSentinelGroup(ctx context.Context, o SentinelOptions) (*SentinelGroup, error) {
	sentinelBin, err := exec.LookPath("redis-sentinel")
	if err != nil {
		return nil, fmt.Errorf("sentinel group: %w (Debian's redis-sentinel package provides it)", err)
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, fmt.Errorf("sentinel group: %w (Debian's redis-server package provides it)", err)
	}
	g := &SentinelGroup{opts: o, nodes: map[string]*proc.Proc{}}
	if o.TLS != nil {
		pem, err := os.ReadFile(o.TLS.CAFile)
		if err != nil {
			return nil, fmt.Errorf("sentinel group: %w", err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("sentinel group: no PEM certificate in %s", o.TLS.CAFile)
		}
		g.tls = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	}
	if err := g.start(ctx, sentinelBin); err != nil {
		g.Stop()
		return nil, err
	}
	return g, nil
}

func (g *SentinelGroup) start(ctx context.Context, sentinelBin string) error {
	addrs := make([]string, 5)
	for i := range addrs {
		a, err := proc.FreeAddr()
		if err != nil {
			return err
		}
		addrs[i] = a
	}
	g.master, g.replica, g.sentinelAddrs = addrs[0], addrs[1], addrs[2:]
	if err := g.startNode(ctx, "master", g.master, ""); err != nil {
		return err
	}
	if err := g.startNode(ctx, "replica", g.replica, g.master); err != nil {
		return err
	}
	if err := g.waitLink(ctx, g.replica, "up"); err != nil {
		return err
	}
	for i, addr := range g.sentinelAddrs {
		if err := g.startSentinel(ctx, sentinelBin, i+1, addr); err != nil {
			return err
		}
	}
	return g.waitSentinelsReady(ctx)
}

// startNode starts a data node at addr, a replica of replicaOf unless
// that is empty.
func (g *SentinelGroup) startNode(ctx context.Context, name, addr, replicaOf string) error {
	dir := filepath.Join(g.opts.Dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("sentinel group: %w", err)
	}
	port, err := portOf(addr)
	if err != nil {
		return err
	}
	args := append(Args(Options{Port: port, Dir: dir}), ReplicationArgs()...)
	if g.opts.Password != "" {
		args = append(args, "--requirepass", g.opts.Password)
	}
	if g.opts.TLS != nil {
		for _, kv := range g.opts.TLS.tlsArgs(port) {
			args = append(args, "--"+kv[0], kv[1])
		}
	}
	if replicaOf != "" {
		host, rport, _ := net.SplitHostPort(replicaOf)
		args = append(args, "--replicaof", host, rport)
	}
	p := &proc.Proc{Name: "redis-" + name, Bin: "redis-server", Args: args, LogPath: filepath.Join(dir, "redis.log")}
	p.Ready = func(ctx context.Context) error {
		return g.withNode(addr, func(c *redis.Client) error { return c.Ping(ctx).Err() })
	}
	g.nodes[addr] = p
	return p.Start(ctx, 30*time.Second)
}

// sentinelConf is a sentinel's configuration file: it monitors the
// master at masterAddr.
func (g *SentinelGroup) sentinelConf(port int, dir, masterAddr string) string {
	host, mport, _ := net.SplitHostPort(masterAddr)
	var b strings.Builder
	fmt.Fprintf(&b, "port %d\nbind 127.0.0.1\ndir %s\nprotected-mode no\n", port, dir)
	fmt.Fprintf(&b, "sentinel monitor %s %s %s %d\n", SentinelMaster, host, mport, SentinelQuorum)
	fmt.Fprintf(&b, "sentinel down-after-milliseconds %s %d\n", SentinelMaster, SentinelDownAfter.Milliseconds())
	fmt.Fprintf(&b, "sentinel failover-timeout %s %d\n", SentinelMaster, SentinelFailoverTimeout.Milliseconds())
	fmt.Fprintf(&b, "sentinel parallel-syncs %s 1\n", SentinelMaster)
	if g.opts.Password != "" {
		fmt.Fprintf(&b, "sentinel auth-pass %s %s\n", SentinelMaster, g.opts.Password)
	}
	if g.opts.SentinelPassword != "" {
		// Sentinels also authenticate to each other with it.
		fmt.Fprintf(&b, "requirepass %s\n", g.opts.SentinelPassword)
	}
	if g.opts.TLS != nil {
		for _, kv := range g.opts.TLS.tlsArgs(port) {
			fmt.Fprintf(&b, "%s %s\n", kv[0], kv[1])
		}
	}
	return b.String()
}

func (g *SentinelGroup) startSentinel(ctx context.Context, bin string, n int, addr string) error {
	dir := filepath.Join(g.opts.Dir, fmt.Sprintf("sentinel-%d", n))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("sentinel group: %w", err)
	}
	port, err := portOf(addr)
	if err != nil {
		return err
	}
	conf := filepath.Join(dir, "sentinel.conf")
	if err := os.WriteFile(conf, []byte(g.sentinelConf(port, dir, g.master)), 0o600); err != nil {
		return fmt.Errorf("sentinel group: %w", err)
	}
	c := redis.NewSentinelClient(&redis.Options{Addr: addr, Password: g.opts.SentinelPassword, TLSConfig: g.tls, DialTimeout: 2 * time.Second,
		ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second, PoolSize: 2})
	g.clients = append(g.clients, c)
	p := &proc.Proc{Name: fmt.Sprintf("sentinel-%d", n), Bin: bin, Args: []string{conf}, LogPath: filepath.Join(dir, "sentinel.log"),
		Ready: func(ctx context.Context) error { return c.Ping(ctx).Err() }}
	g.sentinels = append(g.sentinels, p)
	return p.Start(ctx, 30*time.Second)
}

// waitSentinelsReady waits until every sentinel sees the master up, the
// replica synchronised and the two other sentinels.
func (g *SentinelGroup) waitSentinelsReady(ctx context.Context) error {
	return proc.Poll(ctx, 30*time.Second, "the sentinels to know the master, the replica and each other", func(ctx context.Context) error {
		for i, c := range g.clients {
			m, err := c.Master(ctx, SentinelMaster).Result()
			if err != nil {
				return fmt.Errorf("sentinel %s: %w", g.sentinelAddrs[i], err)
			}
			if m["flags"] != "master" || m["num-slaves"] != "1" || m["num-other-sentinels"] != strconv.Itoa(len(g.clients)-1) {
				return fmt.Errorf("sentinel %s: master flags %q, %s replicas, %s other sentinels", g.sentinelAddrs[i],
					m["flags"], m["num-slaves"], m["num-other-sentinels"])
			}
			replicas, err := c.Replicas(ctx, SentinelMaster).Result()
			if err != nil {
				return fmt.Errorf("sentinel %s: %w", g.sentinelAddrs[i], err)
			}
			if len(replicas) != 1 || replicas[0]["flags"] != "slave" || replicas[0]["master-link-status"] != "ok" {
				return fmt.Errorf("sentinel %s: replicas %v", g.sentinelAddrs[i], replicas)
			}
		}
		return nil
	})
}

// Nodes are the addresses of the node started as the master and of the
// one started as its replica. Roles change at a failover: Master asks
// the sentinels.
func (g *SentinelGroup) Nodes() (master, replica string) { return g.master, g.replica }

// SentinelAddrs are the sentinels' addresses (REDIS_SENTINELS).
func (g *SentinelGroup) SentinelAddrs() []string { return append([]string(nil), g.sentinelAddrs...) }

// FailoverOptions are a go-redis failover client's options for the group:
// its master's name, its sentinels, their passwords and TLS.
func (g *SentinelGroup) FailoverOptions() *redis.FailoverOptions {
	return &redis.FailoverOptions{MasterName: SentinelMaster, SentinelAddrs: g.SentinelAddrs(),
		Password: g.opts.Password, SentinelPassword: g.opts.SentinelPassword, TLSConfig: g.tls}
}

// Master is the master's address as a running sentinel names it
// (SENTINEL get-master-addr-by-name), the first that answers.
func (g *SentinelGroup) Master(ctx context.Context) (string, error) {
	err := errors.New("no sentinel is running")
	for i, c := range g.clients {
		if !g.sentinels[i].Running() {
			continue
		}
		var hp []string
		if hp, err = c.GetMasterAddrByName(ctx, SentinelMaster).Result(); err == nil && len(hp) == 2 {
			return net.JoinHostPort(hp[0], hp[1]), nil
		}
	}
	return "", fmt.Errorf("sentinel get-master-addr-by-name: %w", err)
}

// WaitForPromotion waits until every running sentinel names a master
// other than old, the same one, and that node answers ROLE as a master;
// it returns the new master's address.
func (g *SentinelGroup) WaitForPromotion(ctx context.Context, old string) (string, error) {
	var promoted string
	err := proc.Poll(ctx, 0, "a master other than "+old, func(ctx context.Context) error {
		named := map[string]bool{}
		for i, c := range g.clients {
			if !g.sentinels[i].Running() {
				continue
			}
			hp, err := c.GetMasterAddrByName(ctx, SentinelMaster).Result()
			if err != nil || len(hp) != 2 {
				return fmt.Errorf("sentinel %s: %v %v", g.sentinelAddrs[i], hp, err)
			}
			named[net.JoinHostPort(hp[0], hp[1])] = true
		}
		if len(named) != 1 || named[old] {
			return fmt.Errorf("the sentinels name %v", slices.Sorted(maps.Keys(named)))
		}
		promoted = slices.Sorted(maps.Keys(named))[0]
		role, err := g.role(ctx, promoted)
		if err != nil || role != "master" {
			return fmt.Errorf("%s answers ROLE %q (%v)", promoted, role, err)
		}
		return nil
	})
	return promoted, err
}

// Kill sends SIGKILL to the data node at addr and waits for its exit.
func (g *SentinelGroup) Kill(addr string) error {
	p, ok := g.nodes[addr]
	if !ok {
		return fmt.Errorf("no data node at %s", addr)
	}
	return p.Kill()
}

// Restart starts the data node at addr again with its first arguments:
// a node started as the master comes back as a master, which the
// sentinels then turn into a replica of the current one.
func (g *SentinelGroup) Restart(ctx context.Context, addr string) error {
	p, ok := g.nodes[addr]
	if !ok {
		return fmt.Errorf("no data node at %s", addr)
	}
	return p.Start(ctx, 30*time.Second)
}

// CutReplication cuts every replica's link to its master while both keep
// serving clients: the replication user is turned off and its connections
// dropped on every running node (CutReplicationAt), and it returns once
// each replica sees its link down. Writes acknowledged from then on reach
// the master alone. A replica whose link has been down for more than about
// ten SentinelDownAfter periods when its master fails is not promoted.
func (g *SentinelGroup) CutReplication(ctx context.Context) error {
	for addr, p := range g.nodes {
		if !p.Running() {
			continue
		}
		if err := g.withNode(addr, func(c *redis.Client) error { return CutReplicationAt(ctx, c) }); err != nil {
			return err
		}
	}
	return g.waitReplicas(ctx, "down")
}

// HealReplication undoes CutReplication and returns once each replica's
// link is up again.
func (g *SentinelGroup) HealReplication(ctx context.Context) error {
	for addr, p := range g.nodes {
		if !p.Running() {
			continue
		}
		if err := g.withNode(addr, func(c *redis.Client) error { return HealReplicationAt(ctx, c) }); err != nil {
			return err
		}
	}
	return g.waitReplicas(ctx, "up")
}

// waitReplicas waits until every running node that is a replica reports
// its master link status.
func (g *SentinelGroup) waitReplicas(ctx context.Context, status string) error {
	for addr, p := range g.nodes {
		if !p.Running() {
			continue
		}
		if role, err := g.role(ctx, addr); err != nil {
			return err
		} else if role == "slave" {
			if err := g.waitLink(ctx, addr, status); err != nil {
				return err
			}
		}
	}
	return nil
}

// waitLink waits until the replica at addr reports master_link_status.
func (g *SentinelGroup) waitLink(ctx context.Context, addr, status string) error {
	return proc.Poll(ctx, 30*time.Second, addr+"'s master link "+status, func(ctx context.Context) error {
		return g.withNode(addr, func(c *redis.Client) error {
			info, err := c.Info(ctx, "replication").Result()
			if err != nil {
				return err
			}
			if !strings.Contains(info, "master_link_status:"+status+"\r\n") {
				return errors.New("not yet")
			}
			return nil
		})
	})
}

// role is the first word of the node's ROLE answer: master or slave.
func (g *SentinelGroup) role(ctx context.Context, addr string) (string, error) {
	var role string
	err := g.withNode(addr, func(c *redis.Client) error {
		v, err := c.Do(ctx, "ROLE").Slice()
		if err != nil {
			return err
		}
		if len(v) == 0 {
			return errors.New("empty ROLE answer")
		}
		role, _ = v[0].(string)
		return nil
	})
	return role, err
}

// withNode calls fn with a client of its own to the data node at addr.
func (g *SentinelGroup) withNode(addr string, fn func(*redis.Client) error) error {
	c := redis.NewClient(&redis.Options{Addr: addr, Password: g.opts.Password, TLSConfig: g.tls, DialTimeout: 2 * time.Second,
		ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second, MaxRetries: -1, PoolSize: 1})
	defer c.Close()
	return fn(c)
}

// Logs are the tails of every process's log, for a failing test.
func (g *SentinelGroup) Logs() string {
	var b strings.Builder
	all := append([]*proc.Proc{g.nodes[g.master], g.nodes[g.replica]}, g.sentinels...)
	for _, p := range all {
		if p == nil {
			continue
		}
		lines := strings.Split(strings.TrimSpace(p.Log()), "\n")
		fmt.Fprintf(&b, "--- %s (%s)\n%s\n", p.Name, p.LogPath, strings.Join(lines[max(0, len(lines)-30):], "\n"))
	}
	return b.String()
}

// Stop stops the sentinels first (so that none fails over while the
// nodes stop), then the nodes.
func (g *SentinelGroup) Stop() {
	for _, p := range g.sentinels {
		p.Stop(5 * time.Second)
	}
	for _, c := range g.clients {
		_ = c.Close()
	}
	for _, p := range g.nodes {
		p.Stop(5 * time.Second)
	}
}

// poll calls try every 100 ms until it answers nil, ctx ends or within

func portOf(addr string) (int, error) {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, fmt.Errorf("sentinel group: %w", err)
	}
	return strconv.Atoi(p)
}
