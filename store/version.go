package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

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
