// Package schema holds the MariaDB and MySQL 8 DDL as versioned
// migrations, embedded in the binary and recorded in the schema_migrations
// table.
package schema

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"time"
)

//go:embed migrations/*.sql migrations/mysql8/*.sql
var migrations embed.FS

// Flavor names the server family a set of migrations is written for.
type Flavor string

const (
	// FlavorMariaDB: the files of migrations/.
	FlavorMariaDB Flavor = "mariadb"
	// FlavorMySQL8: the files of migrations/, each replaced by its
	// namesake in migrations/mysql8/ where MariaDB's DDL is not MySQL's
	// (PERSISTENT columns, ADD COLUMN IF NOT EXISTS, SET STATEMENT, ...).
	FlavorMySQL8 Flavor = "mysql8"
)

// Migration is one versioned DDL file.
type Migration struct {
	Version string
	SQL     string
}

// Statements are the migration's statements, in order, as Migrate sends
// them.
func (m Migration) Statements() []string { return splitStatements(m.SQL) }

// Migrations returns the embedded MariaDB migrations in version order.
func Migrations() ([]Migration, error) { return MigrationsFor(FlavorMariaDB) }

// MigrationsFor returns the embedded migrations of the flavor in version
// order.
func MigrationsFor(f Flavor) ([]Migration, error) {
	entries, err := fs.ReadDir(migrations, "migrations")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var out []Migration
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		path := "migrations/" + e.Name()
		if f == FlavorMySQL8 {
			if _, err := fs.Stat(migrations, "migrations/mysql8/"+e.Name()); err == nil {
				path = "migrations/mysql8/" + e.Name()
			}
		}
		b, err := migrations.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", path, err)
		}
		out = append(out, Migration{Version: strings.TrimSuffix(e.Name(), ".sql"), SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// Migrate applies the MariaDB migrations (MigrateFlavor).
func Migrate(ctx context.Context, db *sql.DB) error { return MigrateFlavor(ctx, db, FlavorMariaDB) }

// MigrateFlavor applies the flavor's migrations not yet recorded, one at a
// time, under a named lock so that several processes starting together
// apply each once. The servers commit DDL implicitly, so each statement
// must be safe to find half-applied only if the process dies mid-file; the
// record is written last.
func MigrateFlavor(ctx context.Context, db *sql.DB, f Flavor) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migrate: connect: %w", err)
	}
	defer conn.Close()

	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK('seckill_migrate', 60)").Scan(&got); err != nil {
		return fmt.Errorf("migrate: lock: %w", err)
	}
	if !got.Valid || got.Int64 != 1 {
		return fmt.Errorf("migrate: lock not granted within 60s")
	}
	defer func() {
		// A dropped connection releases the lock too; this is the tidy path.
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), "DO RELEASE_LOCK('seckill_migrate')")
	}()

	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version VARCHAR(64) NOT NULL PRIMARY KEY,
		applied_at DATETIME(3) NOT NULL)`); err != nil {
		return fmt.Errorf("migrate: create schema_migrations: %w", err)
	}
	all, err := MigrationsFor(f)
	if err != nil {
		return err
	}
	for _, m := range all {
		var n int
		if err := conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM schema_migrations WHERE version = ?", m.Version).Scan(&n); err != nil {
			return fmt.Errorf("migrate %s: check: %w", m.Version, err)
		}
		if n > 0 {
			continue
		}
		for _, stmt := range splitStatements(m.SQL) {
			if _, err := conn.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("migrate %s: %w", m.Version, err)
			}
		}
		if _, err := conn.ExecContext(ctx, "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)", m.Version, time.Now().UTC()); err != nil {
			return fmt.Errorf("migrate %s: record: %w", m.Version, err)
		}
	}
	return nil
}

// splitStatements splits a migration on semicolons at line ends, dropping
// comment-only lines. Migrations do not put semicolons inside strings.
func splitStatements(src string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(src, "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "--") {
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
		if strings.HasSuffix(trimmed, ";") {
			stmt := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(cur.String()), ";"))
			if stmt != "" {
				out = append(out, stmt)
			}
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}
