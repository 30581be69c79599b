package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
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

	"github.com/seckill/seckill/internal/netproxy"
)

// Deployment is the system under test: its own redis-server (AOF,
// appendfsync everysec), mariadbd and Temporal dev server, two APIs and two
// workers, each of whose links to a service goes through its own proxy.
type Deployment struct {
	Dir       string
	TaskQueue string

	Redis, MySQL, Temporal *Proc
	RedisAddr, MySQLAddr   string
	TemporalAddr           string
	RedisDir               string

	APIs    []*App
	Workers []*App

	// Direct clients of the checker (not through the proxies).
	RDB *redis.Client
	DB  *sql.DB
	TC  client.Client

	temporalBin string
	mysqlRoot   *sql.DB
}

// App is a seckill process and its proxies.
type App struct {
	*Proc
	URL        string // API base URL, or the worker's /metrics
	Links      map[string]*netproxy.Proxy
	MetricsURL string
}

// Link names.
const (
	LinkRedis    = "redis"
	LinkMySQL    = "mysql"
	LinkTemporal = "temporal"
)

const chaosDB = "seckill_chaos"

// Deploy starts everything under dir. seckillBin is the built cmd/seckill;
// temporalBin the Temporal CLI.
func Deploy(ctx context.Context, dir, seckillBin, temporalBin string) (*Deployment, error) {
	d := &Deployment{Dir: dir, TaskQueue: "chaos", temporalBin: temporalBin}
	ok := false
	defer func() {
		if !ok {
			d.Close()
		}
	}()
	if err := d.startRedis(ctx); err != nil {
		return nil, err
	}
	if err := d.startMySQL(ctx); err != nil {
		return nil, err
	}
	if err := d.startTemporal(ctx); err != nil {
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
	addr, err := freeAddr()
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
		Args: []string{"--port", port(addr), "--bind", "127.0.0.1", "--appendonly", "yes", "--appendfsync", "everysec",
			"--auto-aof-rewrite-percentage", "0", "--dir", d.RedisDir, "--save", "", "--protected-mode", "no"},
		Ready: func(ctx context.Context) error { return d.RDB.Ping(ctx).Err() }}
	return d.Redis.Start(ctx, 60*time.Second)
}

func (d *Deployment) startMySQL(ctx context.Context) error {
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	d.MySQLAddr = addr
	dir := filepath.Join(d.Dir, "mariadb")
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("mariadb dir: %w", err)
	}
	user := os.Getenv("USER")
	if user == "" {
		user = "root"
	}
	ictx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ictx, "mariadb-install-db", "--datadir="+data, "--auth-root-authentication-method=normal",
		"--user="+user, "--skip-test-db").CombinedOutput(); err != nil {
		return fmt.Errorf("mariadb-install-db: %w\n%s", err, out)
	}
	root, err := sql.Open("mysql", "root@tcp("+addr+")/?timeout=2s&readTimeout=10s&writeTimeout=10s")
	if err != nil {
		return fmt.Errorf("open root: %w", err)
	}
	root.SetMaxOpenConns(2)
	d.MySQL = &Proc{Name: "mariadb", Bin: "mariadbd", LogPath: logPath(d.Dir, "mariadb"),
		Args: []string{"--no-defaults", "--datadir=" + data, "--port=" + port(addr), "--bind-address=127.0.0.1",
			"--socket=" + filepath.Join(dir, "mysqld.sock"), "--pid-file=" + filepath.Join(dir, "mariadbd.pid"),
			"--user=" + user, "--skip-name-resolve", "--innodb-flush-log-at-trx-commit=1", "--max-connections=400",
			"--innodb-buffer-pool-size=64M", "--skip-log-bin"},
		Ready: func(ctx context.Context) error {
			_, err := root.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+chaosDB)
			return err
		}}
	d.mysqlRoot = root // the readiness check of every restart
	if err := d.MySQL.Start(ctx, 2*time.Minute); err != nil {
		return err
	}
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
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	ui, err := freeAddr()
	if err != nil {
		return err
	}
	d.TemporalAddr = addr
	var tc client.Client
	d.Temporal = &Proc{Name: "temporal", Bin: d.temporalBin, LogPath: logPath(d.Dir, "temporal"),
		Args: []string{"server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", port(addr), "--ui-port", port(ui),
			"--db-filename", filepath.Join(d.Dir, "temporal.db"), "--log-level", "error",
			"--search-attribute", "SaleId=Int", "--search-attribute", "UserId=Int", "--search-attribute", "OrderStatus=Keyword",
			"--sqlite-pragma", "journal_mode=WAL", "--sqlite-pragma", "synchronous=NORMAL"},
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
	for link, target := range map[string]string{LinkRedis: d.RedisAddr, LinkMySQL: d.MySQLAddr, LinkTemporal: d.TemporalAddr} {
		p, err := netproxy.Start(target, 0)
		if err != nil {
			return nil, fmt.Errorf("%s %s proxy: %w", name, link, err)
		}
		a.Links[link] = p
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	env := map[string]string{
		"SECKILL_ENV":              "dev",
		"REDIS_ADDR":               a.Links[LinkRedis].Addr(),
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

// Proxies lists every proxy of a link kind.
func (d *Deployment) Proxies(link string) []*netproxy.Proxy {
	var out []*netproxy.Proxy
	for _, a := range d.Apps() {
		out = append(out, a.Links[link])
	}
	return out
}

// HealAll thaws and restarts whatever a fault left down and restores every
// link.
func (d *Deployment) HealAll(ctx context.Context) error {
	var errs []error
	for _, a := range d.Apps() {
		for _, p := range a.Links {
			p.SetCut(false)
			p.SetDelay(0)
		}
	}
	for _, p := range []*Proc{d.Redis, d.MySQL, d.Temporal} {
		errs = append(errs, ensureUp(ctx, p))
	}
	for _, a := range d.Apps() {
		errs = append(errs, ensureUp(ctx, a.Proc))
	}
	return errors.Join(errs...)
}

func ensureUp(ctx context.Context, p *Proc) error {
	p.mu.Lock()
	frozen := p.frozen
	p.mu.Unlock()
	if frozen {
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
		for _, p := range a.Links {
			_ = p.Close()
		}
	}
	for _, p := range []*Proc{d.Temporal, d.MySQL, d.Redis} {
		if p != nil {
			p.Stop(20 * time.Second)
		}
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
}

// quietLogger drops the Temporal SDK's log lines.
type quietLogger struct{}

func (quietLogger) Debug(string, ...any) {}
func (quietLogger) Info(string, ...any)  {}
func (quietLogger) Warn(string, ...any)  {}
func (quietLogger) Error(string, ...any) {}
