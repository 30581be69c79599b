// Package store is seckill's MySQL (MariaDB) layer: sales and their stock
// buckets, reservations, orders and the stock ledger. The database, not
// Redis, is the source of truth; every write here is idempotent under retry
// and takes its row locks in one order — reservation row, order row, the
// sale row (shared, where it reads it), a bucket last — so the paths cannot
// deadlock with each other.
package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/mysqldialect"

	"github.com/seckill/seckill/schema"
)

// Store wraps the database.
type Store struct {
	DB *bun.DB
	// holds group-commits new holds' records (RecordRedisHold).
	holds commitGroups
	// dbpath group-commits database-path reservations (ReserveInDB), and
	// dbTerms holds what they need of each sale (dbSaleTerms).
	dbpath    commitGroups
	dbTerms   sync.Map
	keptTerms atomic.Int64
}

// ErrInvalidDSN: MYSQL_DSN does not parse; retrying cannot help.
var ErrInvalidDSN = errors.New("invalid MYSQL_DSN")

// Option changes how Open connects.
type Option func(*openOptions)

type openOptions struct {
	layer func(driver.Connector) driver.Connector
}

// WithConnectorLayer puts layer between the store and the driver, under
// the store's own guard: the fault tests' lost answers
// (internal/testkit/dbfault).
func WithConnectorLayer(layer func(driver.Connector) driver.Connector) Option {
	return func(o *openOptions) { o.layer = layer }
}

// Open connects to MariaDB (MinServer or newer, anything else refused) with
// times in UTC and every call bounded. A connection that meets a node
// taking no writes is dropped (rejectReadOnly, guardedConnector), so the
// next attempt dials the writer again.
func Open(ctx context.Context, dsn string, opts ...Option) (*Store, error) {
	var o openOptions
	for _, opt := range opts {
		opt(&o)
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("open store: %w: %v", ErrInvalidDSN, err)
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	cfg.Params["tx_isolation"] = "'READ-COMMITTED'"
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = 30 * time.Second
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	cfg.RejectReadOnly = true
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if o.layer != nil {
		connector = o.layer(connector)
	}
	sqldb := sql.OpenDB(guardedConnector{connector})
	sqldb.SetMaxOpenConns(64)
	sqldb.SetMaxIdleConns(64)
	sqldb.SetConnMaxLifetime(30 * time.Minute)
	pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := sqldb.PingContext(pingCtx); err != nil {
		_ = sqldb.Close()
		return nil, fmt.Errorf("open store: ping: %w", err)
	}
	st := &Store{DB: bun.NewDB(sqldb, mysqldialect.New())}
	version, err := st.ServerVersion(ctx)
	if err == nil {
		err = CheckServerVersion(version)
	}
	if err != nil {
		_ = sqldb.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	return st, nil
}

// Close closes the pool.
func (s *Store) Close() error { return s.DB.Close() }

// Migrate applies the embedded schema migrations.
func (s *Store) Migrate(ctx context.Context) error {
	return schema.Migrate(ctx, s.DB.DB)
}

// Ping checks the database answers, for readiness.
func (s *Store) Ping(ctx context.Context) error {
	return s.DB.PingContext(ctx)
}

// MySQL error numbers this package reacts to besides the faults
// (outcome.go).
const (
	errDupEntry    = 1062
	errCheckFailed = 4025
)

func mysqlErrNo(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

// IsDuplicate reports a unique-key violation.
func IsDuplicate(err error) bool { return mysqlErrNo(err) == errDupEntry }

// ErrNotFound: no such row.
var ErrNotFound = errors.New("not found")

// The oldest supported server: the schema uses MariaDB-only statements
// (BEGIN NOT ATOMIC, SET STATEMENT, PERSISTENT columns) and 10.6's
// SKIP LOCKED and atomic DDL.
const (
	minMajor = 10
	minMinor = 6
	// MinServer names the oldest supported server in messages and docs.
	MinServer = "MariaDB 10.6"
)

// ErrUnsupportedServer: the server is not MariaDB >= 10.6; retrying cannot help.
var ErrUnsupportedServer = errors.New("unsupported database server")

// CheckServerVersion refuses a server version string (SELECT VERSION())
// that is not MariaDB at least MinServer, naming what it found.
func CheckServerVersion(version string) error {
	refuse := func() error {
		return fmt.Errorf("%w: found %q, %s or newer is required", ErrUnsupportedServer, version, MinServer)
	}
	if !strings.Contains(strings.ToLower(version), "mariadb") {
		return refuse()
	}
	// A replication-compatible prefix ("5.5.5-10.11.6-MariaDB") precedes
	// the real version on some servers and proxies.
	v := strings.TrimPrefix(version, "5.5.5-")
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return refuse()
	}
	major, err := strconv.Atoi(parts[0])
	if err != nil {
		return refuse()
	}
	minor, err := strconv.Atoi(strings.TrimFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	if err != nil {
		return refuse()
	}
	if major < minMajor || (major == minMajor && minor < minMinor) {
		return refuse()
	}
	return nil
}

// ServerVersion reads the server's version string.
func (s *Store) ServerVersion(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var v string
	if err := s.DB.QueryRowContext(ctx, "SELECT VERSION()").Scan(&v); err != nil {
		return "", fmt.Errorf("read server version: %w", err)
	}
	return v, nil
}
