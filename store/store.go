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
	// replica answers the reads that may lag (UseReplica); nil: the
	// primary answers them.
	replica *Replica
	// sales is the process's directory of open sales (OpenSales).
	sales directory
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

// Open connects to MariaDB or MySQL 8 (MinServer or newer, anything else
// refused) with times in UTC and every call bounded. One connection first
// reads the server's version, which names the dialect (and so the session
// variable of the isolation level every connection of the pool sets). A
// connection that meets a node taking no writes is dropped
// (rejectReadOnly, guardedConnector), so the next attempt dials the
// writer again.
func Open(ctx context.Context, dsn string, opts ...Option) (*Store, error) {
	var o openOptions
	for _, opt := range opts {
		opt(&o)
	}
	cfg, err := poolConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	d, err := probeDialect(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	cfg.Params[d.isolationVar()] = "'READ-COMMITTED'"
	sqldb, err := openPool(cfg, o)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if err := pingPool(ctx, sqldb); err != nil {
		_ = sqldb.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	st := &Store{}
	st.holds.inFlight = holdGroupsInFlight
	st.dbpath.inFlight = dbGroupsInFlight
	st.DB = bun.NewDB(sqldb, mysqldialect.New()).WithQueryHook(salesWrites{&st.sales})
	st.setDialect(d)
	return st, nil
}

// poolConfig is dsn's driver configuration with the store's settings: UTC,
// bounded calls, read-only servers refused.
func poolConfig(dsn string) (*mysql.Config, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidDSN, err)
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
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
	return cfg, nil
}

// probeDialect reads the server's version on a connection of its own
// (without the pool's isolation variable, whose name depends on it) and
// returns its dialect; a server not supported is refused.
func probeDialect(ctx context.Context, cfg *mysql.Config) (Dialect, error) {
	sqldb, err := openPool(cfg, openOptions{})
	if err != nil {
		return 0, err
	}
	defer sqldb.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var version string
	if err := sqldb.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return 0, fmt.Errorf("read server version: %w", err)
	}
	return ParseServerVersion(version)
}

// openPool is the connection pool of cfg, connecting on first use.
func openPool(cfg *mysql.Config, o openOptions) (*sql.DB, error) {
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("connector: %w", err)
	}
	if o.layer != nil {
		connector = o.layer(connector)
	}
	sqldb := sql.OpenDB(guardedConnector{connector})
	sqldb.SetMaxOpenConns(64)
	sqldb.SetMaxIdleConns(64)
	sqldb.SetConnMaxLifetime(30 * time.Minute)
	return sqldb, nil
}

// pingPool checks a pool reaches its server.
func pingPool(ctx context.Context, sqldb *sql.DB) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := sqldb.PingContext(ctx); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	return nil
}

// setDialect records the dialect of the store's pool.
func (s *Store) setDialect(d Dialect) { dialects.Store(s.DB.DB, d) }

// Close closes the pool, and the replica's.
func (s *Store) Close() error {
	var err error
	if s.replica != nil {
		err = s.replica.close(s.DB)
	}
	dialects.Delete(s.DB.DB)
	return errors.Join(err, s.DB.Close())
}

// Migrate applies the embedded schema migrations of the server's flavor.
func (s *Store) Migrate(ctx context.Context) error {
	return schema.MigrateFlavor(ctx, s.DB.DB, s.Dialect().flavor())
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
