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

	"github.com/seckill/seckill/internal/testkit/proc"
)

// Server is one mariadbd of its own on a free loopback port, with no
// replication: the single server a harness compares a cluster with.
type Server struct {
	Addr string
	o    Options
	proc *proc.Proc
	db   *sql.DB // root, no database
}

// StartServer installs and starts a server of o in o.Dir (its log there
// too), on a free port when o.Port is 0, and returns once it answers.
// Stop ends it.
func StartServer(ctx context.Context, o Options) (*Server, error) {
	if o.Port == 0 {
		addr, err := proc.FreeAddr()
		if err != nil {
			return nil, fmt.Errorf("mariadb server: %w", err)
		}
		_, port, _ := net.SplitHostPort(addr)
		if o.Port, err = strconv.Atoi(port); err != nil {
			return nil, fmt.Errorf("mariadb server: port of %s: %w", addr, err)
		}
	}
	s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(o.Port), o: o}
	if err := Install(ctx, o); err != nil {
		return nil, fmt.Errorf("mariadb server: %w", err)
	}
	db, err := sql.Open("mysql", "root@tcp("+s.Addr+")/?timeout=2s&readTimeout=30s&writeTimeout=30s")
	if err != nil {
		return nil, fmt.Errorf("mariadb server: %w", err)
	}
	s.db = db
	s.proc = &proc.Proc{Name: "mariadb", Bin: "mariadbd", Args: Args(o), LogPath: filepath.Join(o.Dir, "mariadbd.log"),
		Ready: func(ctx context.Context) error { return db.PingContext(ctx) }}
	if err := s.proc.Start(ctx, 90*time.Second); err != nil {
		return nil, errors.Join(fmt.Errorf("mariadb server: %w", err), s.Stop())
	}
	return s, nil
}

// DSN is root's DSN of database on the server.
func (s *Server) DSN(database string) string { return "root@tcp(" + s.Addr + ")/" + database }

// Port is the server's port, as its command line names it.
func (s *Server) Port() int { return s.o.Port }

// Stop kills the server and closes the harness's connection.
func (s *Server) Stop() error {
	var errs []error
	if s.proc != nil {
		errs = append(errs, s.proc.Kill())
	}
	if s.db != nil {
		errs = append(errs, s.db.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("mariadb server: stop: %w", err)
	}
	return nil
}
