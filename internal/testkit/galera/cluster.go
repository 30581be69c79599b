package galera

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	// The MySQL driver, registered as "mysql".
	_ "github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/testkit/mariadbnode"
	"github.com/seckill/seckill/internal/testkit/proc"
)

// Options are a Cluster's.
type Options struct {
	// Dir holds a directory per node (node-1...) and HAProxy's.
	Dir string
	// Nodes is the cluster's size (0: 3).
	Nodes int
}

// Cluster is a running Galera cluster behind HAProxy.
type Cluster struct {
	opts    Options
	nodes   []Node
	procs   []*proc.Proc
	cgroups []string  // each node's cgroup ("" when none could be made)
	noCut   error     // why no node can be cut, when so
	dbs     []*sql.DB // each node's check pool, which the harness reads too
	agents  []*http.Server
	checks  []string // the agents' addresses
	haproxy *proc.Proc
	addr    string // HAProxy's

	mu  sync.Mutex
	cut map[int]string // the nftables table of each cut node
}

// Start starts a cluster: the first node bootstrapped, the others
// joined one at a time, each check agent, then HAProxy; it returns once
// every node is Synced in one component of them all and HAProxy routes to
// the first. It fails when a program the cluster needs is missing.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	if err := needBinaries(); err != nil {
		return nil, err
	}
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	c := &Cluster{opts: o, cut: map[int]string{}}
	if err := c.start(ctx); err != nil {
		c.Stop()
		return nil, fmt.Errorf("%w\n%s", err, c.Logs())
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context) error {
	ports, err := freePorts(4*c.opts.Nodes + 1)
	if err != nil {
		return err
	}
	c.addr = "127.0.0.1:" + strconv.Itoa(ports[len(ports)-1])
	peers := make([]int, c.opts.Nodes)
	for i := range c.opts.Nodes {
		n := Node{Name: fmt.Sprintf("node-%d", i+1), Port: ports[4*i], Gcomm: ports[4*i+1], IST: ports[4*i+2], SST: ports[4*i+3],
			Dir: filepath.Join(c.opts.Dir, fmt.Sprintf("node-%d", i+1))}
		c.nodes = append(c.nodes, n)
		peers[i] = n.Gcomm
	}
	for i, n := range c.nodes {
		if err := c.startNode(ctx, i, peers); err != nil {
			return fmt.Errorf("galera: %s: %w", n.Name, err)
		}
	}
	if err := c.WaitSynced(ctx); err != nil {
		return err
	}
	for i := range c.nodes {
		if err := c.startAgent(i); err != nil {
			return err
		}
	}
	return c.startHAProxy(ctx)
}

// startNode prepares node i's directory and starts it: the first
// bootstraps a new cluster from a fresh data directory, the others start
// empty and receive a full copy. Restarted, every node joins.
func (c *Cluster) startNode(ctx context.Context, i int, peers []int) error {
	n := c.nodes[i]
	if err := os.MkdirAll(n.Options().DataDir(), 0o755); err != nil {
		return fmt.Errorf("galera: %w", err)
	}
	if err := ownDir(n.Dir); err != nil {
		return err
	}
	if i == 0 {
		if err := mariadbnode.Install(ctx, n.Options()); err != nil {
			return err
		}
	}
	cg, err := newCgroup(fmt.Sprintf("seckill-galera-%d-%d-%s", os.Getpid(), n.Port, n.Name))
	if err != nil && c.noCut == nil {
		c.noCut = err
	}
	c.cgroups = append(c.cgroups, cg)
	db, err := OpenCheck(n.Addr())
	if err != nil {
		return err
	}
	c.dbs = append(c.dbs, db)
	args := Args(n, peers)
	first := args
	if i == 0 {
		first = append(append([]string(nil), args...), "--wsrep-new-cluster")
	}
	bin, wrapped := inCgroup(cg, "mariadbd", first)
	p := &proc.Proc{Name: "galera " + n.Name, Bin: bin, Args: wrapped, LogPath: filepath.Join(n.Dir, "mariadbd.log"),
		Ready: func(ctx context.Context) error { return c.writable(ctx, i) }}
	c.procs = append(c.procs, p)
	if err := p.Start(ctx, 3*time.Minute); err != nil {
		return err
	}
	// Started again, the node joins the cluster it belongs to.
	p.Bin, p.Args = inCgroup(cg, "mariadbd", args)
	return nil
}

// writable answers nil when node i answers as Writable.
func (c *Cluster) writable(ctx context.Context, i int) error {
	s, err := ReadState(ctx, c.dbs[i])
	if err != nil {
		return err
	}
	if !s.Writable() {
		return fmt.Errorf("%s: %s", c.nodes[i].Name, s)
	}
	return nil
}

// startAgent serves node i's health check in this process, on a port the
// kernel picks as it listens (a port picked before the cluster started
// may be another test's by now).
func (c *Cluster) startAgent(i int) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("galera: check agent: %w", err)
	}
	addr := ln.Addr().String()
	srv := &http.Server{Handler: CheckHandler(c.dbs[i]), ReadHeaderTimeout: 2 * time.Second}
	c.agents = append(c.agents, srv)
	c.checks = append(c.checks, addr)
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			slog.Warn("galera: check agent stopped", "node", c.nodes[i].Name, "err", err)
		}
	}()
	return nil
}

func (c *Cluster) startHAProxy(ctx context.Context) error {
	dir := filepath.Join(c.opts.Dir, "haproxy")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("galera: %w", err)
	}
	servers := make([]HAProxyServer, len(c.nodes))
	for i, n := range c.nodes {
		servers[i] = HAProxyServer{Name: n.Name, Addr: n.Addr(), Check: c.checks[i]}
	}
	cfg := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(HAProxyConfig(c.addr, filepath.Join(dir, "haproxy.sock"), servers)), 0o644); err != nil {
		return fmt.Errorf("galera: %w", err)
	}
	c.haproxy = &proc.Proc{Name: "haproxy", Bin: "haproxy", Args: []string{"-db", "-f", cfg}, LogPath: filepath.Join(dir, "haproxy.log"),
		Ready: func(ctx context.Context) error {
			w, err := c.Writer(ctx)
			if err == nil && w != 0 {
				err = fmt.Errorf("HAProxy routes to %s, not %s", c.nodes[w].Name, c.nodes[0].Name)
			}
			return err
		}}
	return c.haproxy.Start(ctx, time.Minute)
}
