package store

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/uptrace/bun"

	"github.com/seckill/seckill/schema"
)

// Dialect is the server family the store speaks to, read from SELECT
// VERSION() when it opens (ParseServerVersion): the one place the store
// chooses between MariaDB's SQL and MySQL 8's. Most statements are the
// same on both; they differ in
//   - the transactions sent whole (script, group): MariaDB runs them as one
//     compound statement (BEGIN NOT ATOMIC), MySQL has no such statement
//     outside a stored program, so there they run statement by statement
//     in a transaction, each group part under its savepoint;
//   - a statement's own lock wait bound: MariaDB's SET STATEMENT ... FOR,
//     MySQL's session variable set around the statement (stmt.exec);
//   - the session's isolation variable (tx_isolation, transaction_isolation);
//   - the migrations that use MariaDB-only DDL (schema.FlavorMySQL8).
type Dialect int

// The server families the store accepts.
const (
	MariaDB Dialect = iota
	MySQL8
)

func (d Dialect) String() string {
	if d == MySQL8 {
		return "MySQL 8"
	}
	return "MariaDB"
}

// isolationVar is the session variable of the transaction isolation level.
func (d Dialect) isolationVar() string {
	if d == MySQL8 {
		return "transaction_isolation"
	}
	return "tx_isolation"
}

// flavor is the set of migrations the server takes.
func (d Dialect) flavor() schema.Flavor {
	if d == MySQL8 {
		return schema.FlavorMySQL8
	}
	return schema.FlavorMariaDB
}

// The oldest supported servers: MariaDB 10.6 (SKIP LOCKED, atomic DDL),
// MySQL 8.0.23 (invisible columns; SKIP LOCKED and atomic DDL since 8.0).
var minServers = map[Dialect][2]int{MariaDB: {10, 6}, MySQL8: {8, 23}}

// MinServer names the oldest supported servers in messages and docs.
const MinServer = "MariaDB 10.6 or MySQL 8.0.23"

// ErrUnsupportedServer: the server is neither MariaDB >= 10.6 nor MySQL 8
// from 8.0.23; retrying cannot help.
var ErrUnsupportedServer = errors.New("unsupported database server")

// ParseServerVersion reads a server version string (SELECT VERSION()):
// MariaDB at least 10.6 ("10.11.6-MariaDB", or behind the
// replication-compatible prefix "5.5.5-") or MySQL 8 from 8.0.23 ("8.0.36",
// "8.4.3-log"); anything else is refused, naming what it found.
func ParseServerVersion(version string) (Dialect, error) {
	refuse := func() (Dialect, error) {
		return 0, fmt.Errorf("%w: found %q, %s or newer is required", ErrUnsupportedServer, version, MinServer)
	}
	d, v := MySQL8, version
	if strings.Contains(strings.ToLower(version), "mariadb") {
		d, v = MariaDB, strings.TrimPrefix(version, "5.5.5-")
	}
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 3 {
		return refuse()
	}
	digits := func(s string) (int, error) {
		end := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' })
		if end >= 0 {
			s = s[:end]
		}
		return strconv.Atoi(s)
	}
	major, err1 := digits(parts[0])
	minor, err2 := digits(parts[1])
	patch, err3 := digits(parts[2])
	if err := errors.Join(err1, err2, err3); err != nil {
		return refuse()
	}
	minV := minServers[d]
	switch d {
	case MariaDB:
		if major < minV[0] || (major == minV[0] && minor < minV[1]) {
			return refuse()
		}
	case MySQL8:
		// 8.0 from its 23rd release, and the 8.x after it; 9 removes
		// what 8 deprecated and the store uses (VALUES() in ON DUPLICATE
		// KEY UPDATE).
		if major != minV[0] || (minor == 0 && patch < minV[1]) {
			return refuse()
		}
	}
	return d, nil
}

// CheckServerVersion refuses a server version string that ParseServerVersion
// refuses.
func CheckServerVersion(version string) error {
	_, err := ParseServerVersion(version)
	return err
}

// dialects holds the dialect of each open store's connection pool (the
// *sql.DB, which a bun.DB's clones share: a tracing hook clones it), for
// the code that is handed only the bun.DB (script.run, group.run); a pool
// not in it is MariaDB's.
var dialects sync.Map

// dialectOf is the dialect of db's server.
func dialectOf(db bun.IDB) Dialect {
	if d, ok := db.(*bun.DB); ok {
		if v, ok := dialects.Load(d.DB); ok {
			return v.(Dialect)
		}
	}
	return MariaDB
}

// Dialect is the dialect of the store's server.
func (s *Store) Dialect() Dialect { return dialectOf(s.DB) }
