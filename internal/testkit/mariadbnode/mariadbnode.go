// Package mariadbnode is how the test harnesses (test/chaos, test/faults)
// run their own mariadbd: one set of arguments (no option files read, its
// own pid file and socket, no name resolution, no binary log unless it
// replicates, root without a password on 127.0.0.1) and a data directory
// initialised by Install; a server of its own (StartServer); and a
// primary with one asynchronous replica (ReplicaPair).
// scripts/mariadb.sh runs the development and test services' server with
// the same settings but Debian's option files.
package mariadbnode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
)

// Options are one mariadbd's: its port, its directory (the data lives in
// Dir/data), how many connections it takes, and whether a commit reaches
// the disk before it is acknowledged (Durable: a killed server keeps every
// acknowledged commit, which a run that SIGKILLs it proves; otherwise a
// commit is flushed once a second, enough where the server is not killed).
type Options struct {
	Port     int
	Dir      string
	MaxConns int
	Durable  bool
	// BufferPool is InnoDB's buffer pool ("64M"; "": the server's default).
	BufferPool string
	// User runs the server ("": User()).
	User string
	// ServerID, when above 0, turns the binary log on (row format, in
	// Dir) under this server id, for a replication primary or replica
	// (ReplicaPair); 0: no binary log.
	ServerID int
}

// user is the account o's server runs as.
func (o Options) user() string {
	if o.User != "" {
		return o.User
	}
	return User()
}

// DataDir is where o's data lives.
func (o Options) DataDir() string { return filepath.Join(o.Dir, "data") }

// User runs the server: the current user, or root.
func User() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "root"
}

// Install initialises o's data directory (mariadb-install-db), root
// authenticated without a password.
func Install(ctx context.Context, o Options) error {
	out, err := exec.CommandContext(ctx, "mariadb-install-db", "--datadir="+o.DataDir(), "--auth-root-authentication-method=normal",
		"--user="+o.user(), "--skip-test-db").CombinedOutput()
	if err != nil {
		return fmt.Errorf("mariadb-install-db: %w\n%s", err, out)
	}
	return nil
}

// Args are mariadbd's arguments for o.
func Args(o Options) []string {
	flush := "2"
	if o.Durable {
		flush = "1"
	}
	args := []string{"--no-defaults", "--datadir=" + o.DataDir(), "--port=" + strconv.Itoa(o.Port), "--bind-address=127.0.0.1",
		"--socket=" + filepath.Join(o.Dir, "mysqld.sock"), "--pid-file=" + filepath.Join(o.Dir, "mariadbd.pid"),
		"--user=" + o.user(), "--skip-name-resolve", "--innodb-flush-log-at-trx-commit=" + flush,
		"--max-connections=" + strconv.Itoa(o.MaxConns)}
	if o.ServerID > 0 {
		args = append(args, "--server-id="+strconv.Itoa(o.ServerID), "--log-bin="+filepath.Join(o.Dir, "binlog"),
			"--binlog-format=ROW", "--log-slave-updates", "--gtid-strict-mode=1")
	} else {
		args = append(args, "--skip-log-bin")
	}
	if o.BufferPool != "" {
		args = append(args, "--innodb-buffer-pool-size="+o.BufferPool)
	}
	return args
}
