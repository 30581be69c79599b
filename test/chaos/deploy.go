package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	_ "github.com/go-sql-driver/mysql" // database/sql driver of the root connection
	"github.com/redis/go-redis/v9"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/internal/testkit/devtemporal"
	"github.com/seckill/seckill/internal/testkit/galera"
	"github.com/seckill/seckill/internal/testkit/mariadbnode"
	"github.com/seckill/seckill/internal/testkit/netproxy"
	"github.com/seckill/seckill/internal/testkit/proc"
	"github.com/seckill/seckill/internal/testkit/redisnode"
	"github.com/seckill/seckill/redisgateway"
)

// Deployment is the system under test: its own redis-server (AOF,
// appendfsync everysec) with a replica, mariadbd (or a Galera cluster
// behind HAProxy) and Temporal dev server,
// two APIs and two workers, each of whose links to a service goes through
// its own proxy, as does the replica's link to the master.
// With Cluster, Redis is a three-master Redis Cluster instead: each master
// announces its own proxy, shared by every process (a cluster client
// follows the addresses the nodes announce, so one process's link to a
// master cannot be told from another's).
type Deployment struct {
	Dir       string
	TaskQueue string
	Cluster   bool

	Redis, MySQL, Temporal *Proc // Redis: the single one (nil with Cluster); MySQL: nil with Galera
	// Galera is the database with Options.Galera: three nodes behind
	// HAProxy, whose address is MySQLAddr.
	Galera               *galera.Cluster
	RedisAddr, MySQLAddr string
	TemporalAddr         string
	RedisDir             string
	// Nodes are the Redis servers: the single one, or the cluster's masters.
	Nodes []*RedisNode
	// Replica replicates the single Redis through ReplLink (nil with
	// Cluster); the processes never use it (failover.go).
	Replica  *RedisNode
	ReplLink *netproxy.Proxy

	APIs    []*App
	Workers []*App

	// Direct clients of the checker (not through the proxies); RDB is a
	// cluster client with Cluster.
	RDB redis.UniversalClient
	DB  *sql.DB
	TC  client.Client

	temporalBin string
	// serverScript is scripts/temporal-server.sh when the run's Temporal
	// is the production-shaped server; its PostgreSQL is stopped at Close.
	serverScript string
	stopPostgres func()
	mysqlRoot    *sql.DB
}

// App is a seckill process and its proxies.
type App struct {
	*Proc
	URL string // API base URL, or the worker's /metrics
	// Links: no LinkRedis with Cluster (the masters' proxies are shared).
	Links      map[string]*netproxy.Proxy
	MetricsURL string
}

// RedisNode is one redis-server: the single one, its replica, or a
// cluster master.
type RedisNode struct {
	*Proc
	Addr  string          // its own address
	Dir   string          // its data dir (the AOF)
	Proxy *netproxy.Proxy // with Cluster: the address it announces, for every process

	direct *redis.Client // its readiness checks and the failover's commands
}

// Link names.
const (
	LinkRedis    = "redis"
	LinkMySQL    = "mysql"
	LinkTemporal = "temporal"
)

const chaosDB = "seckill_chaos"

// Deploy starts everything under o.WorkDir: o.SeckillBin is the built
// cmd/seckill; o.TemporalBin the Temporal CLI; o.TemporalServer, when set,
// scripts/temporal-server.sh (the production-shaped Temporal in place of
// the dev server); with o.Cluster() a three-master Redis Cluster instead
// of one redis-server, with o.Galera() a Galera cluster behind HAProxy
// instead of one mariadbd.
func Deploy(ctx context.Context, o Options) (*Deployment, error) {
	d := &Deployment{Dir: o.WorkDir, TaskQueue: "chaos", Cluster: o.Cluster(), temporalBin: o.TemporalBin, serverScript: o.TemporalServer}
	seckillBin, serverScript := o.SeckillBin, o.TemporalServer
	ok := false
	defer func() {
		if !ok {
			d.Close()
		}
	}()
	start := d.startRedis
	if o.Cluster() {
		start = d.startCluster
	}
	if err := start(ctx); err != nil {
		return nil, err
	}
	startDB := d.startMySQL
	if o.Galera() {
		startDB = d.startGalera
	}
	if err := startDB(ctx); err != nil {
		return nil, err
	}
	startTemporal := d.startTemporal
	if serverScript != "" {
		startTemporal = d.startTemporalServer
	}
	if err := startTemporal(ctx); err != nil {
		return nil, err
	}
	for i := 1; i <= 2; i++ {
		a, err := d.startApp(ctx, seckillBin, fmt.Sprintf("api%d", i), "api")
		if err != nil {
			return nil, err
		}
		d.APIs = append(d.APIs, a)
	}
	for i := 1; i <= 2; i++ {
		w, err := d.startApp(ctx, seckillBin, fmt.Sprintf("worker%d", i), "worker")
		if err != nil {
			return nil, err
		}
		d.Workers = append(d.Workers, w)
	}
	ok = true
	return d, nil
}

func (d *Deployment) startRedis(ctx context.Context) error {
	addr, err := proc.FreeAddr()
	if err != nil {
		return err
	}
	d.RedisAddr = addr
	d.RedisDir = filepath.Join(d.Dir, "redis")
	if err := os.MkdirAll(d.RedisDir, 0o755); err != nil {
		return fmt.Errorf("redis dir: %w", err)
	}
	d.RDB = redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, ReadTimeout: 3 * time.Second, WriteTimeout: 3 * time.Second, DialTimeout: 2 * time.Second})
	d.Redis = &Proc{Name: "redis", Bin: "redis-server", LogPath: logPath(d.Dir, "redis"),
		Args:  append(redisnode.Args(redisnode.Options{Port: portNum(addr), Dir: d.RedisDir}), replSettings...),
		Ready: func(ctx context.Context) error { return d.RDB.Ping(ctx).Err() }}
	d.Nodes = []*RedisNode{{Proc: d.Redis, Addr: addr, Dir: d.RedisDir, direct: directClient(addr)}}
	if err := d.Redis.Start(ctx, 60*time.Second); err != nil {
		return err
	}
	return d.startReplica(ctx)
}

func (d *Deployment) startMySQL(ctx context.Context) error {
	addr, err := proc.FreeAddr()
	if err != nil {
		return err
	}
	d.MySQLAddr = addr
	// Durable: the run SIGKILLs the server and counts on every
	// acknowledged commit surviving.
	node := mariadbnode.Options{Port: portNum(addr), Dir: filepath.Join(d.Dir, "mariadb"), MaxConns: 400, Durable: true, BufferPool: "64M"}
	if err := os.MkdirAll(node.Dir, 0o755); err != nil {
		return fmt.Errorf("mariadb dir: %w", err)
	}
	ictx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := mariadbnode.Install(ictx, node); err != nil {
		return err
	}
	root, err := sql.Open("mysql", "root@tcp("+addr+")/?timeout=2s&readTimeout=10s&writeTimeout=10s")
	if err != nil {
		return fmt.Errorf("open root: %w", err)
	}
	root.SetMaxOpenConns(2)
	d.MySQL = &Proc{Name: "mariadb", Bin: "mariadbd", LogPath: logPath(d.Dir, "mariadb"), Args: mariadbnode.Args(node),
		Ready: func(ctx context.Context) error {
			_, err := root.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+chaosDB)
			return err
		}}
	d.mysqlRoot = root // the readiness check of every restart
	if err := d.MySQL.Start(ctx, 2*time.Minute); err != nil {
		return err
	}
	return d.openDB(addr)
}

// openDB opens the checker's pool on the database at addr.
func (d *Deployment) openDB(addr string) error {
	db, err := sql.Open("mysql", d.dsn(addr)+"?parseTime=true&timeout=2s&readTimeout=20s&writeTimeout=20s")
	if err != nil {
		return fmt.Errorf("open %s: %w", chaosDB, err)
	}
	db.SetMaxOpenConns(4)
	d.DB = db
	return nil
}

func (d *Deployment) dsn(addr string) string { return "root@tcp(" + addr + ")/" + chaosDB }

func (d *Deployment) startTemporal(ctx context.Context) error {
	addr, err := proc.FreeAddr()
	if err != nil {
		return err
	}
	ui, err := proc.FreeAddr()
	if err != nil {
		return err
	}
	d.TemporalAddr = addr
	var tc client.Client
	d.Temporal = &Proc{Name: "temporal", Bin: d.temporalBin, LogPath: logPath(d.Dir, "temporal"),
		Args: devtemporal.Args(port(addr), port(ui), filepath.Join(d.Dir, "temporal.db"), "error"),
		Ready: func(ctx context.Context) error {
			if tc == nil {
				c, err := client.DialContext(ctx, client.Options{HostPort: addr, Logger: quietLogger{}})
				if err != nil {
					return err
				}
				tc = c
			}
			// The dev server answers before its search attributes exist.
			_, err := tc.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: "SaleId = 1"})
			return err
		}}
	if err := d.Temporal.Start(ctx, 2*time.Minute); err != nil {
		return err
	}
	d.Temporal.Ready = func(ctx context.Context) error {
		_, err := tc.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: "SaleId = 1"})
		return err
	}
	d.TC = tc
	return nil
}

func (d *Deployment) startApp(ctx context.Context, bin, name, role string) (*App, error) {
	a := &App{Links: map[string]*netproxy.Proxy{}}
	targets := map[string]string{LinkRedis: d.RedisAddr, LinkMySQL: d.MySQLAddr, LinkTemporal: d.TemporalAddr}
	if d.Cluster {
		delete(targets, LinkRedis)
	}
	for link, target := range targets {
		p, err := netproxy.Start(target, 0)
		if err != nil {
			return nil, fmt.Errorf("%s %s proxy: %w", name, link, err)
		}
		a.Links[link] = p
	}
	addr, err := proc.FreeAddr()
	if err != nil {
		return nil, err
	}
	env := map[string]string{
		"SECKILL_ENV":              "dev",
		"MYSQL_DSN":                d.dsn(a.Links[LinkMySQL].Addr()),
		"TEMPORAL_ADDRESS":         a.Links[LinkTemporal].Addr(),
		"SECKILL_TASK_QUEUE":       d.TaskQueue,
		"SECKILL_SHUTDOWN_TIMEOUT": "5s",
		// Short windows so faults trip their mechanisms within a run:
		// a dead worker's entries are reclaimed after 2 s, and a Temporal
		// outage of half a minute reaches the dead-letter age and count.
		"SECKILL_RELAY_MIN_IDLE":     "2s",
		"SECKILL_RELAY_DEAD_AFTER":   "30s",
		"SECKILL_RELAY_MAX_DELIVERY": "4",
	}
	if d.Cluster {
		// Several addresses select the cluster client (config, internal/conn).
		var addrs []string
		for _, n := range d.Nodes {
			addrs = append(addrs, n.Proxy.Addr())
		}
		env["REDIS_ADDRS"] = strings.Join(addrs, ",")
	} else {
		env["REDIS_ADDRS"] = a.Links[LinkRedis].Addr()
	}
	hc := &http.Client{Timeout: 2 * time.Second}
	health := ""
	if role == "api" {
		env["API_ADDR"] = addr
		a.URL = "http://" + addr
		health = a.URL + "/healthz"
		a.MetricsURL = a.URL + "/metrics"
	} else {
		env["WORKER_METRICS_ADDR"] = addr
		env["SECKILL_RELAY_CONSUMER"] = name
		a.URL = "http://" + addr + "/metrics"
		health = a.URL
		a.MetricsURL = a.URL
	}
	a.Proc = &Proc{Name: name, Bin: bin, Args: []string{role}, Env: env, LogPath: logPath(d.Dir, name),
		Ready: func(ctx context.Context) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, health, nil)
			if err != nil {
				return err
			}
			resp, err := hc.Do(req)
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s answered %d", health, resp.StatusCode)
			}
			return nil
		}}
	if err := a.Proc.Start(ctx, 2*time.Minute); err != nil {
		return nil, err
	}
	return a, nil
}

// Apps lists the APIs then the workers.
func (d *Deployment) Apps() []*App { return append(append([]*App(nil), d.APIs...), d.Workers...) }

// Proxies lists every proxy of a link kind (for LinkRedis with Cluster,
// the masters' proxies).
func (d *Deployment) Proxies(link string) []*netproxy.Proxy {
	var out []*netproxy.Proxy
	if link == LinkRedis && d.Cluster {
		for _, n := range d.Nodes {
			out = append(out, n.Proxy)
		}
		return out
	}
	for _, a := range d.Apps() {
		out = append(out, a.Links[link])
	}
	return out
}

// allProxies lists every proxy of the deployment.
func (d *Deployment) allProxies() []*netproxy.Proxy {
	var out []*netproxy.Proxy
	for _, a := range d.Apps() {
		for _, p := range a.Links {
			out = append(out, p)
		}
	}
	for _, n := range d.Nodes {
		if n.Proxy != nil {
			out = append(out, n.Proxy)
		}
	}
	if d.ReplLink != nil {
		out = append(out, d.ReplLink)
	}
	return out
}

// redisProcs lists the Redis servers' processes, the replica's last.
func (d *Deployment) redisProcs() []*Proc {
	var out []*Proc
	for _, n := range d.redisNodes() {
		out = append(out, n.Proc)
	}
	return out
}

// redisNodes lists Nodes and the replica.
func (d *Deployment) redisNodes() []*RedisNode {
	out := append([]*RedisNode(nil), d.Nodes...)
	if d.Replica != nil {
		out = append(out, d.Replica)
	}
	return out
}

// HealAll thaws and restarts whatever a fault left down and restores every
// link.
func (d *Deployment) HealAll(ctx context.Context) error {
	var errs []error
	for _, p := range d.allProxies() {
		p.SetCut(false)
		p.SetDelay(0)
	}
	for _, p := range append(d.redisProcs(), d.MySQL, d.Temporal) {
		if p != nil {
			errs = append(errs, ensureUp(ctx, p))
		}
	}
	if d.Galera != nil {
		errs = append(errs, d.healGalera(ctx))
	}
	for _, a := range d.Apps() {
		errs = append(errs, ensureUp(ctx, a.Proc))
	}
	return errors.Join(errs...)
}

func ensureUp(ctx context.Context, p *Proc) error {
	if p.Frozen() {
		if err := p.Thaw(); err != nil {
			return err
		}
	}
	if !p.Running() {
		return p.Start(ctx, 2*time.Minute)
	}
	return nil
}

// TerminateWorkflow terminates an order workflow with the Temporal CLI, as
// an operator would.
func (d *Deployment) TerminateWorkflow(ctx context.Context, workflowID string) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, d.temporalBin, "workflow", "terminate", "--workflow-id", workflowID,
		"--address", d.TemporalAddr, "--reason", "chaos nemesis").CombinedOutput()
	if err != nil {
		return fmt.Errorf("temporal workflow terminate %s: %w: %s", workflowID, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Close stops every process and proxy.
func (d *Deployment) Close() {
	for _, a := range d.Apps() {
		if a.Proc != nil {
			a.Stop(10 * time.Second)
		}
	}
	for _, p := range d.allProxies() {
		_ = p.Close()
	}
	for _, p := range append([]*Proc{d.Temporal, d.MySQL}, d.redisProcs()...) {
		if p != nil {
			p.Stop(20 * time.Second)
		}
	}
	if d.Galera != nil {
		d.Galera.Stop()
	}
	if d.stopPostgres != nil {
		d.stopPostgres()
	}
	if d.TC != nil {
		d.TC.Close()
	}
	if d.DB != nil {
		_ = d.DB.Close()
	}
	if d.mysqlRoot != nil {
		_ = d.mysqlRoot.Close()
	}
	if d.RDB != nil {
		_ = d.RDB.Close()
	}
	for _, n := range d.redisNodes() {
		if n.direct != nil {
			_ = n.direct.Close()
		}
	}
}

// quietLogger drops the Temporal SDK's log lines.
type quietLogger struct{}

func (quietLogger) Debug(string, ...any) {}
func (quietLogger) Info(string, ...any)  {}
func (quietLogger) Warn(string, ...any)  {}
func (quietLogger) Error(string, ...any) {}

// ClusterMasters is the number of masters of the cluster variant.
const ClusterMasters = 3

// startCluster starts three cluster-mode redis-servers (AOF, appendfsync
// everysec, redisnode's settings), each announcing its own proxy as
// its address, and joins them with `redis-cli --cluster create`.
func (d *Deployment) startCluster(ctx context.Context) error {
	proxyOf := map[string]string{} // announced (proxy) address -> the node's own
	var addrs []string
	for i := range ClusterMasters {
		addr, err := proc.FreeAddr()
		if err != nil {
			return err
		}
		bus, err := proc.FreeAddr()
		if err != nil {
			return err
		}
		px, err := netproxy.Start(addr, 0)
		if err != nil {
			return fmt.Errorf("redis node %d proxy: %w", i+1, err)
		}
		name := fmt.Sprintf("redis%d", i+1)
		dir := filepath.Join(d.Dir, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			_ = px.Close()
			return fmt.Errorf("%s dir: %w", name, err)
		}
		direct := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, ReadTimeout: 3 * time.Second, WriteTimeout: 3 * time.Second, DialTimeout: 2 * time.Second})
		n := &RedisNode{Addr: addr, Dir: dir, Proxy: px, direct: direct}
		d.Nodes = append(d.Nodes, n)
		proxyOf[px.Addr()] = addr
		addrs = append(addrs, addr)
		n.Proc = &Proc{Name: name, Bin: "redis-server", LogPath: logPath(d.Dir, name),
			Args: redisnode.Args(redisnode.Options{Port: portNum(addr), Bus: portNum(bus), Announce: portNum(px.Addr()), Dir: dir}),
			// Until the cluster is created a node only answers PING.
			Ready: func(ctx context.Context) error { return direct.Ping(ctx).Err() }}
		if err := n.Start(ctx, 60*time.Second); err != nil {
			return err
		}
		// From now on, whenever it restarts: ready once it serves its slots.
		n.Ready = func(ctx context.Context) error { return redisnode.ClusterOK(ctx, direct) }
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := redisnode.CreateCluster(cctx, addrs); err != nil {
		return err
	}
	for _, n := range d.Nodes {
		if err := n.WaitReady(cctx, time.Minute); err != nil {
			return err
		}
	}
	// The checker's client: the nodes announce their proxies; it dials
	// the nodes themselves.
	var dialer net.Dialer
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRetries: -1, ReadTimeout: 3 * time.Second, WriteTimeout: 3 * time.Second, DialTimeout: 2 * time.Second,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if own, ok := proxyOf[addr]; ok {
				addr = own
			}
			return dialer.DialContext(ctx, network, addr)
		}})
	d.RDB = rdb
	if err := redisnode.WaitMasters(cctx, rdb, ClusterMasters); err != nil {
		return err
	}
	for {
		if _, err := d.masterIndex(cctx, 0); err == nil {
			return nil
		}
		rdb.ReloadState(cctx)
		select {
		case <-cctx.Done():
			return fmt.Errorf("cluster client never saw the three masters: %w", cctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// SaleNode is the Redis node that holds a sale's keys: the single one, or
// the master serving the slot of the sale's hash tag.
func (d *Deployment) SaleNode(ctx context.Context, sale int64) (*RedisNode, error) {
	if !d.Cluster {
		return d.Nodes[0], nil
	}
	i, err := d.masterIndex(ctx, KeySlot(redisgateway.SaleKeys(sale).Stock))
	if err != nil {
		return nil, fmt.Errorf("master of sale %d: %w", sale, err)
	}
	return d.Nodes[i], nil
}

// masterIndex asks the cluster which node serves slot.
func (d *Deployment) masterIndex(ctx context.Context, slot int) (int, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	slots, err := d.RDB.ClusterSlots(cctx).Result()
	if err != nil {
		return 0, fmt.Errorf("cluster slots: %w", err)
	}
	var announced []string
	for _, n := range d.Nodes {
		announced = append(announced, n.Proxy.Addr())
	}
	return masterOf(slots, slot, announced)
}

// masterOf finds, in a CLUSTER SLOTS answer, the master serving slot and
// returns its index in addrs (the addresses the nodes announce).
func masterOf(slots []redis.ClusterSlot, slot int, addrs []string) (int, error) {
	for _, s := range slots {
		if slot < s.Start || slot > s.End || len(s.Nodes) == 0 {
			continue
		}
		for i, a := range addrs {
			if s.Nodes[0].Addr == a {
				return i, nil
			}
		}
		return 0, fmt.Errorf("slot %d is served by %s, not a node of the deployment %v", slot, s.Nodes[0].Addr, addrs)
	}
	return 0, fmt.Errorf("slot %d is not served", slot)
}

// KeySlot is the Redis Cluster slot of a key: CRC16 (XMODEM) of its hash
// tag (the first non-empty {...}) or of the whole key, modulo 16384.
func KeySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc ^= uint16(key[k]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc % 16384)
}
