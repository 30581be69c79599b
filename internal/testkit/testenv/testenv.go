// Package testenv connects tests to the services `go tool task test` starts:
// its own Redis, MariaDB and Temporal dev server, on their own ports, so the
// tests never touch an `up` stack. A test that cannot reach a service fails;
// it never skips.
package testenv

import (
	"database/sql"
	"hash/fnv"
	"path/filepath"
	"sync"

	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/redis/go-redis/v9"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/netproxy"
	"github.com/seckill/seckill/store"
)

// Test service addresses; the Taskfile exports the same defaults.
const (
	DefaultRedisAddr       = "127.0.0.1:16379"
	DefaultMySQLDSN        = "root@tcp(127.0.0.1:13306)/seckill_test"
	DefaultTemporalAddress = "127.0.0.1:17233"
)

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// RedisAddr is the test Redis (SECKILL_TEST_REDIS_ADDR).
func RedisAddr() string { return env("SECKILL_TEST_REDIS_ADDR", DefaultRedisAddr) }

// MySQLDSN is this test binary's own database on the test server
// (SECKILL_TEST_MYSQL_DSN names the server and a base database name).
// Each package gets a database and a range of sale ids of its own, so one
// package's workers never relay, resync or reconcile another's sales, and
// no two packages share a sale's Redis keys.
func MySQLDSN() string {
	cfg, err := mysql.ParseDSN(env("SECKILL_TEST_MYSQL_DSN", DefaultMySQLDSN))
	if err != nil {
		return env("SECKILL_TEST_MYSQL_DSN", DefaultMySQLDSN) // Open reports the error
	}
	cfg.DBName = cfg.DBName + "_" + packageName()
	return cfg.FormatDSN()
}

// packageName is the test binary's package ("e2e" for e2e.test).
func packageName() string {
	name := strings.TrimSuffix(filepath.Base(os.Args[0]), ".test")
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 || b.Len() > 40 {
		return "misc"
	}
	return b.String()
}

// saleIDBase is where this package's sale ids start: 10^12 ids a package.
func saleIDBase() int64 {
	h := fnv.New32a()
	h.Write([]byte(packageName()))
	return int64(h.Sum32()%4000+1) * 1_000_000_000_000
}

var (
	dbOnce sync.Once
	dbErr  error
)

// ensureDatabase creates and migrates the package's database once.
func ensureDatabase(ctx context.Context) error {
	dbOnce.Do(func() {
		cfg, err := mysql.ParseDSN(MySQLDSN())
		if err != nil {
			dbErr = fmt.Errorf("parse dsn: %w", err)
			return
		}
		name := cfg.DBName
		cfg.DBName = ""
		db, err := sql.Open("mysql", cfg.FormatDSN())
		if err != nil {
			dbErr = err
			return
		}
		defer db.Close()
		if _, err := db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS `"+name+"`"); err != nil {
			dbErr = fmt.Errorf("create database %s: %w", name, err)
			return
		}
		st, err := store.Open(ctx, MySQLDSN())
		if err != nil {
			dbErr = err
			return
		}
		defer st.Close()
		if err := st.Migrate(ctx); err != nil {
			dbErr = fmt.Errorf("migrate: %w", err)
			return
		}
		// InnoDB ignores a value below the current counter.
		if _, err := st.DB.ExecContext(ctx, fmt.Sprintf("ALTER TABLE sales AUTO_INCREMENT = %d", saleIDBase())); err != nil {
			dbErr = fmt.Errorf("sale id range: %w", err)
		}
	})
	return dbErr
}

// TemporalAddress is the test Temporal dev server (SECKILL_TEST_TEMPORAL_ADDRESS).
func TemporalAddress() string { return env("SECKILL_TEST_TEMPORAL_ADDRESS", DefaultTemporalAddress) }

// Config is a development-mode configuration pointing at the test services.
func Config(tb testing.TB) *config.Config {
	tb.Helper()
	vars := map[string]string{
		"SECKILL_ENV":      "dev",
		"REDIS_ADDR":       RedisAddr(),
		"MYSQL_DSN":        MySQLDSN(),
		"TEMPORAL_ADDRESS": TemporalAddress(),
		"API_ADDR":         "127.0.0.1:0",
	}
	for k, v := range vars {
		tb.Setenv(k, v)
	}
	tb.Setenv("REDIS_ADDRS", "")
	cfg, err := config.Load()
	if err != nil {
		tb.Fatalf("testenv: config: %v", err)
	}
	return cfg
}

// MustRedis returns a client of the test Redis, closed at the end of the test.
func MustRedis(tb testing.TB) redis.UniversalClient {
	tb.Helper()
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{RedisAddr()}, PoolSize: 128})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		tb.Fatalf("testenv: Redis at %s is not reachable (run the tests with `go tool task test`): %v", RedisAddr(), err)
	}
	tb.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// MustStore returns the migrated test database, opened with opts, closed
// at the end of the test.
func MustStore(tb testing.TB, opts ...store.Option) *store.Store {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := ensureDatabase(ctx); err != nil {
		tb.Fatalf("testenv: MariaDB at %s is not reachable (run the tests with `go tool task test`): %v", MySQLDSN(), err)
	}
	st, err := store.Open(ctx, MySQLDSN(), opts...)
	if err != nil {
		tb.Fatalf("testenv: MariaDB at %s is not reachable (run the tests with `go tool task test`): %v", MySQLDSN(), err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	return st
}

// MustMySQLProxy puts a proxy the test can cut or slow in front of the
// test MariaDB and returns it with the DSN that reaches MariaDB through it.
func MustMySQLProxy(tb testing.TB) (*netproxy.Proxy, string) {
	tb.Helper()
	cfg, err := mysql.ParseDSN(MySQLDSN())
	if err != nil {
		tb.Fatalf("testenv: parse %s: %v", MySQLDSN(), err)
	}
	proxy, err := netproxy.Start(cfg.Addr, 0)
	if err != nil {
		tb.Fatalf("testenv: proxy to MariaDB: %v", err)
	}
	tb.Cleanup(func() { _ = proxy.Close() })
	cfg.Addr = proxy.Addr()
	return proxy, cfg.FormatDSN()
}

// MustTemporal returns a client of the test Temporal dev server; opts
// adjust its options (e.g. TemporalCalls.Option).
func MustTemporal(tb testing.TB, opts ...func(*client.Options)) client.Client {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o := client.Options{
		HostPort: TemporalAddress(),
		Logger:   quietLogger(),
	}
	for _, opt := range opts {
		opt(&o)
	}
	c, err := client.DialContext(ctx, o)
	if err != nil {
		tb.Fatalf("testenv: Temporal at %s is not reachable (run the tests with `go tool task test`): %v", TemporalAddress(), err)
	}
	tb.Cleanup(c.Close)
	return c
}

func quietLogger() *TemporalLogger { return &TemporalLogger{} }

// TemporalLogger drops the SDK's debug and info lines, keeping tests readable.
type TemporalLogger struct{}

func (TemporalLogger) Debug(string, ...any) {}
func (TemporalLogger) Info(string, ...any)  {}
func (TemporalLogger) Warn(msg string, kv ...any) {
	slog.Warn(msg, kv...)
}
func (TemporalLogger) Error(msg string, kv ...any) {
	slog.Error(msg, kv...)
}

// SaleOption changes a test sale before it is created.
type SaleOption func(*domain.Sale)

// MustSale creates a live sale with the given stock in the test database.
func MustSale(tb testing.TB, st *store.Store, stock int64, opts ...SaleOption) *domain.Sale {
	tb.Helper()
	now := time.Now().UTC()
	s := &domain.Sale{
		GoodsID:              1,
		Title:                fmt.Sprintf("test sale of %s", strings.ReplaceAll(tb.Name(), "/", " ")),
		PriceCents:           1999,
		StockTotal:           stock,
		Buckets:              4,
		StartsAt:             now.Add(-time.Minute),
		EndsAt:               now.Add(time.Hour),
		PaymentWindowSeconds: 900,
		PerUserLimit:         1,
	}
	for _, o := range opts {
		o(s)
	}
	if len(s.Title) > 200 {
		s.Title = s.Title[:200]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := st.CreateSale(ctx, s); err != nil {
		tb.Fatalf("testenv: create sale: %v", err)
	}
	return s
}

// UniqueUser returns a user id no other test uses in this run: sales are
// fresh per test, but the blacklist and the user's reservation list are not.
func UniqueUser() int64 { return userSeq.Add(1) }

var userSeq = func() *atomic.Int64 {
	var n atomic.Int64
	n.Store(time.Now().UnixNano() / 1000 % 1_000_000_000_000)
	return &n
}()

// MustEmptyDatabase creates a fresh, empty database on the test server and
// returns its DSN; it is dropped at the end of the test. Options follow
// CREATE DATABASE (for example "CHARACTER SET latin1").
func MustEmptyDatabase(tb testing.TB, options ...string) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, err := mysql.ParseDSN(MySQLDSN())
	if err != nil {
		tb.Fatalf("testenv: parse dsn: %v", err)
	}
	name := fmt.Sprintf("%s_empty_%d", cfg.DBName, time.Now().UnixNano())
	cfg.DBName = ""
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	tb.Cleanup(func() { _ = db.Close() })
	if _, err := db.ExecContext(ctx, strings.Join(append([]string{"CREATE DATABASE `" + name + "`"}, options...), " ")); err != nil {
		tb.Fatalf("testenv: MariaDB is not reachable (run the tests with `go tool task test`): %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = db.ExecContext(ctx, "DROP DATABASE `"+name+"`")
	})
	cfg.DBName = name
	return cfg.FormatDSN()
}

// MustLegacyHold records in as a QUEUED Redis hold the way holds were
// recorded before the database took each hold's unit at its record:
// without a unit, which its order then takes (store.PlaceOrder's
// conditional update). Such rows are still placed as they were; tests of
// that branch start from one.
func MustLegacyHold(tb testing.TB, st *store.Store, in domain.OrderInput) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := st.DB.ExecContext(ctx, `INSERT INTO reservations (token, sale_id, user_id, request_id, path, status, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, NOW(3), NOW(3))`, in.Token, in.SaleID, in.UserID, in.RequestID, string(domain.PathRedis), string(domain.StatusQueued))
	if err != nil {
		tb.Fatalf("testenv: legacy hold %s: %v", in.Token, err)
	}
}
