package faults

import (
	"context"
	"database/sql"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/internal/testkit/devtemporal"
	"github.com/seckill/seckill/internal/testkit/mariadbnode"
	"github.com/seckill/seckill/internal/testkit/redisnode"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

// server is a service process a scenario owns (its own Redis, MariaDB or
// Temporal), so killing it touches no other package's tests.
type server struct {
	*testenv.Proc
	ready func(ctx context.Context) error
	dir   string // its data dir, where a test knows it
}

// startServer starts bin with args and waits until ready answers; the
// process is killed at the end of the test.
func startServer(tb testing.TB, name, bin string, ready func(ctx context.Context) error, args ...string) *server {
	tb.Helper()
	s := &server{Proc: testenv.StartCommand(tb, name, bin, nil, args...), ready: ready}
	s.WaitReady(tb, 90*time.Second, ready)
	return s
}

// Start starts the process again after a kill and waits until it answers.
func (s *server) Start(tb testing.TB) {
	tb.Helper()
	s.Restart(tb)
	s.WaitReady(tb, 90*time.Second, s.ready)
}

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

func portNum(tb testing.TB, addr string) int {
	tb.Helper()
	n, err := strconv.Atoi(port(addr))
	require.NoError(tb, err, "port of %s", addr)
	return n
}

// MustOwnRedis starts a redis-server with AOF on (appendfsync everysec) in a
// temp dir; it returns the server, its address and its data dir.
func MustOwnRedis(tb testing.TB) (*server, string, string) {
	tb.Helper()
	addr := testenv.FreeAddr(tb)
	dir := tb.TempDir()
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	tb.Cleanup(func() { _ = rdb.Close() })
	s := startServer(tb, "redis", "redis-server", func(ctx context.Context) error { return rdb.Ping(ctx).Err() },
		redisnode.Args(redisnode.Options{Port: portNum(tb, addr), Dir: dir})...)
	return s, addr, dir
}

// MustOwnMariaDB initialises a datadir and starts a mariadbd on a free port
// with the database seckill_faults; it returns the server and the DSN.
func MustOwnMariaDB(tb testing.TB) (*server, string) {
	tb.Helper()
	addr := testenv.FreeAddr(tb)
	node := mariadbnode.Options{Port: portNum(tb, addr), Dir: tb.TempDir(), MaxConns: 300, BufferPool: "64M"}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(tb, mariadbnode.Install(ctx, node))
	root, err := sql.Open("mysql", "root@tcp("+addr+")/?timeout=2s")
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = root.Close() })
	s := startServer(tb, "mariadb", "mariadbd", func(ctx context.Context) error {
		_, err := root.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS seckill_faults")
		return err
	}, mariadbnode.Args(node)...)
	return s, "root@tcp(" + addr + ")/seckill_faults"
}

// temporalBin is the Temporal CLI: SECKILL_TEMPORAL_BIN or the repo's build.
func temporalBin(tb testing.TB) string {
	tb.Helper()
	if b := os.Getenv("SECKILL_TEMPORAL_BIN"); b != "" {
		return b
	}
	b := filepath.Join(testenv.RepoRoot(), ".data", "bin", "temporal")
	_, err := os.Stat(b)
	require.NoError(tb, err, "the Temporal CLI (go tool task temporal:build)")
	return b
}

// MustOwnTemporal starts a Temporal dev server with file persistence on a
// free port; it returns the server and its address.
func MustOwnTemporal(tb testing.TB) (*server, string) {
	tb.Helper()
	addr := testenv.FreeAddr(tb)
	ui := testenv.FreeAddr(tb)
	db := filepath.Join(tb.TempDir(), "t.db")
	ready := func(ctx context.Context) error {
		c, err := client.DialContext(ctx, client.Options{HostPort: addr, Logger: testenv.TemporalLogger{}})
		if err != nil {
			return err
		}
		defer c.Close()
		// The dev server answers before its search attributes exist.
		_, err = c.CountWorkflow(ctx, countReq("SaleId = 1"))
		return err
	}
	s := startServer(tb, "temporal", temporalBin(tb), ready, devtemporal.Args(port(addr), port(ui), db, "warn")...)
	return s, addr
}

// aofIncr returns the path of the multi-part AOF's incr file.
func aofIncr(tb testing.TB, dir string) string {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "appendonlydir", "*.incr.aof"))
	require.NoError(tb, err)
	require.Len(tb, files, 1, "one incr AOF file: %s", strings.Join(files, ", "))
	return files[0]
}

func countReq(q string) *workflowservice.CountWorkflowExecutionsRequest {
	return &workflowservice.CountWorkflowExecutionsRequest{Query: q}
}
