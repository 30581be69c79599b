package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Fault is what a failed write tells of whether it was applied. A
// replicated database (a Galera cluster behind a proxy, a primary that is
// promoted, a managed service's failover) loses answers: the connection
// resets after the COMMIT was sent, a node leaves the cluster, the writer
// moves. Every write path decides a fault by its class (Classify), never
// by hoping it did not happen.
type Fault int

const (
	// FaultNone: not a fault of the link or the node. The write answered
	// (a refusal, a duplicate, a bug); a retry changes nothing.
	FaultNone Fault = iota
	// FaultUnknown: the write may have been applied or not; its answer was
	// lost (the connection broke after the statement was sent, the server
	// went away, the caller's deadline interrupted it). It is retried only
	// where it is idempotent (its retry finds what the first applied) or
	// read back before it is decided.
	FaultUnknown
	// FaultRefused: the transaction was rolled back (a deadlock victim, a
	// Galera certification failure, a lock wait timeout our transaction
	// rolls back): nothing applied, a retry is safe.
	FaultRefused
	// FaultNodeUnusable: the node takes no writes (a Galera node not
	// primary, a read-only server after a failover) or the connection was
	// unusable before anything was sent: nothing applied. The connection is
	// dropped, so the retry dials again, through the proxy, to the writer.
	FaultNodeUnusable
)

func (f Fault) String() string {
	switch f {
	case FaultUnknown:
		return "outcome unknown"
	case FaultRefused:
		return "refused"
	case FaultNodeUnusable:
		return "node unusable"
	}
	return "none"
}

// MySQL and MariaDB error numbers by the fault they mean (docs/architecture.md
// lists them).
const (
	errLockWait       = 1205 // ER_LOCK_WAIT_TIMEOUT
	errDeadlock       = 1213 // ER_LOCK_DEADLOCK, also Galera's certification failure
	errWsrepNotReady  = 1047 // ER_UNKNOWN_COM_ERROR: "WSREP has not yet prepared node for application use"
	errReadOnly       = 1290 // ER_OPTION_PREVENTS_STATEMENT: --read-only
	errReadOnlyTx     = 1792 // ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION
	errReadOnlyMode   = 1836 // ER_READ_ONLY_MODE
	errServerShutdown = 1053 // ER_SERVER_SHUTDOWN
	errQueryAborted   = 1317 // ER_QUERY_INTERRUPTED
	errConnKilled     = 1927 // ER_CONNECTION_KILLED
	errServerGone     = 2006 // CR_SERVER_GONE_ERROR
	errLostDuring     = 2013 // CR_SERVER_LOST
)

// Classify tells what err says of its write's outcome.
func Classify(err error) Fault {
	if err == nil {
		return FaultNone
	}
	switch mysqlErrNo(err) {
	case errDeadlock, errLockWait:
		return FaultRefused
	case errWsrepNotReady, errReadOnly, errReadOnlyTx, errReadOnlyMode:
		return FaultNodeUnusable
	case errServerShutdown, errQueryAborted, errConnKilled, errServerGone, errLostDuring:
		return FaultUnknown
	case 0:
	default:
		return FaultNone
	}
	switch {
	case errors.Is(err, driver.ErrBadConn):
		// database/sql's contract: a driver answers ErrBadConn only when
		// nothing was sent (go-sql-driver also when it met a read-only
		// server, rejectReadOnly).
		return FaultNodeUnusable
	case errors.Is(err, mysql.ErrInvalidConn), errors.Is(err, sql.ErrConnDone),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return FaultUnknown
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return FaultUnknown
	}
	return FaultNone
}

// IsRetryable reports errors a retry of an idempotent write can cure:
// every fault (Classify) but the caller's own deadline, which ends its
// retries.
func IsRetryable(err error) bool {
	return Classify(err) != FaultNone && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled)
}

// writeAttempts bounds the attempts of a write retried on its faults.
const writeAttempts = 4

// retryPause is the first wait before a write's next attempt after a node
// was unusable or the link broke (a failover takes seconds); it doubles
// each attempt. A refused transaction is retried at once.
const retryPause = 50 * time.Millisecond

// againIdempotent runs write until it answers something other than a fault,
// writeAttempts times at most, while ctx lasts. Only for writes whose
// retry finds what an earlier attempt applied (a unique key, a guard on
// the row's state), so an outcome unknown is retried like a refusal.
func againIdempotent(ctx context.Context, write func(ctx context.Context) error) error {
	for attempt := 1; ; attempt++ {
		err := write(ctx)
		if err == nil || !IsRetryable(err) || attempt == writeAttempts || !pauseAfter(ctx, attempt, err) {
			return err
		}
	}
}

// pauseAfter waits before the attempt after attempt, which failed with
// err: not at all after a refusal (its rollback freed what it waited for
// or lost to), retryPause doubling per attempt after the node or the link
// failed. False when ctx ended first.
func pauseAfter(ctx context.Context, attempt int, err error) bool {
	if Classify(err) == FaultRefused {
		return ctx.Err() == nil
	}
	t := time.NewTimer(retryPause << (attempt - 1))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// guardedConnector drops a connection once it met a node that takes no
// writes: go-sql-driver closes it only for read-only servers
// (rejectReadOnly), and a Galera node that left the primary component
// answers 1047 on the same connection until it rejoins.
type guardedConnector struct{ driver.Connector }

func (c guardedConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &guardedConn{Conn: conn}, nil
}

// guardedConn is a connection that reports itself invalid to the pool
// after a statement or commit on it met FaultNodeUnusable.
type guardedConn struct {
	driver.Conn
	unusable atomic.Bool
}

func (c *guardedConn) note(err error) error {
	if err != nil && Classify(err) == FaultNodeUnusable {
		c.unusable.Store(true)
	}
	return err
}

func (c *guardedConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	ex, ok := c.Conn.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	r, err := ex.ExecContext(ctx, query, args)
	return r, c.note(err)
}

func (c *guardedConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := c.Conn.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	r, err := q.QueryContext(ctx, query, args)
	return r, c.note(err)
}

func (c *guardedConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if p, ok := c.Conn.(driver.ConnPrepareContext); ok {
		st, err := p.PrepareContext(ctx, query)
		return st, c.note(err)
	}
	st, err := c.Prepare(query)
	return st, c.note(err)
}

func (c *guardedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	b, ok := c.Conn.(driver.ConnBeginTx)
	if !ok {
		return nil, errors.New("guarded connection: the driver does not begin transactions with options")
	}
	tx, err := b.BeginTx(ctx, opts)
	if err != nil {
		return nil, c.note(err)
	}
	return guardedTx{tx: tx, conn: c}, nil
}

func (c *guardedConn) Ping(ctx context.Context) error {
	if p, ok := c.Conn.(driver.Pinger); ok {
		return c.note(p.Ping(ctx))
	}
	return nil
}

func (c *guardedConn) ResetSession(ctx context.Context) error {
	if c.unusable.Load() {
		return driver.ErrBadConn
	}
	if r, ok := c.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *guardedConn) IsValid() bool {
	if c.unusable.Load() {
		return false
	}
	if v, ok := c.Conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (c *guardedConn) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := c.Conn.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

type guardedTx struct {
	tx   driver.Tx
	conn *guardedConn
}

func (t guardedTx) Commit() error   { return t.conn.note(t.tx.Commit()) }
func (t guardedTx) Rollback() error { return t.conn.note(t.tx.Rollback()) }
