package mariadbnode

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"time"

	_ "github.com/go-sql-driver/mysql" // the driver of the harness's own connections

	"github.com/seckill/seckill/internal/testkit/proc"
)

// ReplicaPair is a primary and one asynchronous replica following it by
// GTID (MASTER_USE_GTID=slave_pos), each a mariadbd on a free loopback
// port with its own binary log: the shape of a read replica, for tests
// that make it lag (StopSQLThread) while the primary takes every write.
type ReplicaPair struct {
	PrimaryAddr, ReplicaAddr string
	procs                    []*proc.Proc
	primary, replica         *sql.DB // root, no database
}

// pairTimeout bounds one statement of the harness.
const pairTimeout = 30 * time.Second

// StartReplicaPair installs and starts both servers under dir (dir/primary,
// dir/replica, each with its log) and starts the replica following the
// primary from its first transaction. Stop ends both.
func StartReplicaPair(ctx context.Context, dir string) (*ReplicaPair, error) {
	p := &ReplicaPair{}
	if err := p.start(ctx, dir); err != nil {
		return nil, errors.Join(err, p.Stop())
	}
	return p, nil
}

func (p *ReplicaPair) start(ctx context.Context, dir string) error {
	for i, name := range []string{"primary", "replica"} {
		addr, err := proc.FreeAddr()
		if err != nil {
			return fmt.Errorf("replica pair: %w", err)
		}
		if err := p.startNode(ctx, name, addr, filepath.Join(dir, name), i+1); err != nil {
			return err
		}
	}
	_, port, _ := net.SplitHostPort(p.PrimaryAddr)
	if err := p.exec(ctx, p.replica, "CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT="+port+
		", MASTER_USER='root', MASTER_PASSWORD='', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1"); err != nil {
		return err
	}
	if err := p.exec(ctx, p.replica, "START SLAVE"); err != nil {
		return err
	}
	return p.CaughtUp(ctx)
}

// startNode installs and starts one server with server id id.
func (p *ReplicaPair) startNode(ctx context.Context, name, addr, dir string, id int) error {
	_, portStr, _ := net.SplitHostPort(addr)
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return fmt.Errorf("replica pair: port of %s: %w", addr, err)
	}
	o := Options{Port: port, Dir: dir, MaxConns: 300, BufferPool: "64M", ServerID: id}
	if err := Install(ctx, o); err != nil {
		return fmt.Errorf("replica pair: %s: %w", name, err)
	}
	db, err := sql.Open("mysql", "root@tcp("+addr+")/?timeout=2s&readTimeout=30s&writeTimeout=30s")
	if err != nil {
		return fmt.Errorf("replica pair: %s: %w", name, err)
	}
	if id == 1 {
		p.primary, p.PrimaryAddr = db, addr
	} else {
		p.replica, p.ReplicaAddr = db, addr
	}
	pr := &proc.Proc{Name: "mariadb-" + name, Bin: "mariadbd", Args: Args(o), LogPath: filepath.Join(dir, "mariadbd.log"),
		Ready: func(ctx context.Context) error { return db.PingContext(ctx) }}
	p.procs = append(p.procs, pr)
	if err := pr.Start(ctx, 90*time.Second); err != nil {
		return fmt.Errorf("replica pair: %w", err)
	}
	return nil
}

func (p *ReplicaPair) exec(ctx context.Context, db *sql.DB, stmt string) error {
	ctx, cancel := context.WithTimeout(ctx, pairTimeout)
	defer cancel()
	if _, err := db.ExecContext(ctx, stmt); err != nil {
		return fmt.Errorf("replica pair: %s: %w", stmt, err)
	}
	return nil
}

// PrimaryDSN and ReplicaDSN are root's DSNs of database on each server.
func (p *ReplicaPair) PrimaryDSN(database string) string {
	return "root@tcp(" + p.PrimaryAddr + ")/" + database
}

// ReplicaDSN: see PrimaryDSN.
func (p *ReplicaPair) ReplicaDSN(database string) string {
	return "root@tcp(" + p.ReplicaAddr + ")/" + database
}

// CreateDatabase creates database on the primary and waits until the
// replica has it too.
func (p *ReplicaPair) CreateDatabase(ctx context.Context, database string) error {
	if err := p.exec(ctx, p.primary, "CREATE DATABASE IF NOT EXISTS `"+database+"`"); err != nil {
		return err
	}
	return p.CaughtUp(ctx)
}

// StopSQLThread stops the replica applying what it receives (its I/O
// thread keeps fetching the primary's binary log): its lag grows from now
// on while every read of it still answers.
func (p *ReplicaPair) StopSQLThread(ctx context.Context) error {
	return p.exec(ctx, p.replica, "STOP SLAVE SQL_THREAD")
}

// StartSQLThread resumes applying.
func (p *ReplicaPair) StartSQLThread(ctx context.Context) error {
	return p.exec(ctx, p.replica, "START SLAVE SQL_THREAD")
}

// CaughtUp waits until the replica has applied every transaction the
// primary has committed so far (MASTER_GTID_WAIT, within pairTimeout).
func (p *ReplicaPair) CaughtUp(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, pairTimeout)
	defer cancel()
	var pos string
	if err := p.primary.QueryRowContext(ctx, "SELECT @@gtid_binlog_pos").Scan(&pos); err != nil {
		return fmt.Errorf("replica pair: the primary's position: %w", err)
	}
	var got int
	if err := p.replica.QueryRowContext(ctx, "SELECT MASTER_GTID_WAIT(?, ?)", pos, int(pairTimeout.Seconds())-1).Scan(&got); err != nil {
		return fmt.Errorf("replica pair: wait for %s: %w", pos, err)
	}
	if got != 0 {
		return fmt.Errorf("replica pair: the replica did not reach %s within %s", pos, pairTimeout)
	}
	return nil
}

// Stop kills both servers and closes the harness's connections.
func (p *ReplicaPair) Stop() error {
	var errs []error
	for _, pr := range p.procs {
		errs = append(errs, pr.Kill())
	}
	for _, db := range []*sql.DB{p.primary, p.replica} {
		if db != nil {
			errs = append(errs, db.Close())
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("replica pair: stop: %w", err)
	}
	return nil
}
