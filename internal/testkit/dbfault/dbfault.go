// Package dbfault loses a database's answers on purpose: a layer of the
// database/sql connector that lets a chosen statement (or a transaction's
// COMMIT) reach the server and then tells the caller the connection broke
// (the server applied it, the client never learned), or breaks the
// connection before the statement is sent (nothing applied). Either way
// the caller gets go-sql-driver's ErrInvalidConn and the connection is
// gone, as after a reset or a failover.
package dbfault

import (
	"context"
	"database/sql/driver"
	"errors"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-sql-driver/mysql"
)

// When says where the answer is lost.
type When int

const (
	// AfterApply: the server runs the statement (commits it); its answer
	// is lost.
	AfterApply When = iota
	// BeforeSend: the connection breaks before the statement is sent; a
	// transaction it was in rolls back.
	BeforeSend
)

// CommitQuery is the text a transaction's COMMIT is matched by.
const CommitQuery = "COMMIT"

// Layer is the fault layer; the zero value loses nothing.
type Layer struct {
	mu    sync.Mutex
	rules []*rule
	lost  atomic.Int64
}

type rule struct {
	match func(query string) bool
	when  When
	left  int
	// answer, when set, is the server's answer in place of the statement's
	// (Answer): the connection stays up.
	answer error
}

// Lose loses the answers of the next n statements whose text match
// accepts, at when. A statement's arguments are in its text (the store
// sends them interpolated); a transaction's COMMIT is CommitQuery.
func (l *Layer) Lose(match func(query string) bool, when When, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rules = append(l.rules, &rule{match: match, when: when, left: n})
}

// Answer answers the next n statements whose text match accepts with err,
// without sending them, as a server refusing them would (a Galera node
// outside the primary component answers 1047); the connection stays up.
func (l *Layer) Answer(match func(query string) bool, err error, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rules = append(l.rules, &rule{match: match, left: n, answer: err})
}

// Lost is how many answers the layer lost (or answered itself) so far.
func (l *Layer) Lost() int { return int(l.lost.Load()) }

// Armed is how many losses are still to come.
func (l *Layer) Armed() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.rules {
		n += r.left
	}
	return n
}

// Containing matches a statement whose text contains every part.
func Containing(parts ...string) func(string) bool {
	return func(q string) bool {
		for _, p := range parts {
			if !strings.Contains(q, p) {
				return false
			}
		}
		return true
	}
}

// take reports whether query's answer is to be lost, and where, or the
// answer to give in its place.
func (l *Layer) take(query string) (When, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.rules {
		if r.left > 0 && r.match(query) {
			r.left--
			l.lost.Add(1)
			return r.when, true, r.answer
		}
	}
	return 0, false, nil
}

// Wrap puts the layer in front of c (store.WithConnectorLayer).
func (l *Layer) Wrap(c driver.Connector) driver.Connector { return connector{Connector: c, l: l} }

type connector struct {
	driver.Connector
	l *Layer
}

func (c connector) Connect(ctx context.Context) (driver.Conn, error) {
	inner, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &conn{Conn: inner, l: c.l}, nil
}

// conn is a connection whose chosen answers are lost.
type conn struct {
	driver.Conn
	l    *Layer
	dead atomic.Bool
}

// lose breaks the connection and answers as go-sql-driver does when a
// connection broke under a statement.
func (c *conn) lose() error {
	c.dead.Store(true)
	_ = c.Conn.Close()
	return mysql.ErrInvalidConn
}

// before decides a statement's fate before it is sent: the layer's own
// answer, a connection broken before sending (err), or an answer to lose
// once the server applied it (lost).
func (c *conn) before(query string) (lost bool, err error) {
	when, lost, answer := c.l.take(query)
	switch {
	case answer != nil:
		return false, answer
	case lost && when == BeforeSend:
		return false, c.lose()
	}
	return lost, nil
}

func (c *conn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	ex, ok := c.Conn.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	lost, err := c.before(query)
	if err != nil {
		return nil, err
	}
	r, err := ex.ExecContext(ctx, query, args)
	if lost && err == nil {
		return nil, c.lose()
	}
	return r, err
}

func (c *conn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := c.Conn.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	lost, err := c.before(query)
	if err != nil {
		return nil, err
	}
	rows, err := q.QueryContext(ctx, query, args)
	if lost && err == nil {
		// Closing the rows reads the statement to its end: every result
		// the server sends, after its commit.
		if cerr := rows.Close(); cerr != nil {
			return nil, errors.Join(c.lose(), cerr)
		}
		return nil, c.lose()
	}
	return rows, err
}

func (c *conn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if p, ok := c.Conn.(driver.ConnPrepareContext); ok {
		return p.PrepareContext(ctx, query)
	}
	return c.Prepare(query)
}

func (c *conn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	b, ok := c.Conn.(driver.ConnBeginTx)
	if !ok {
		return nil, errors.New("dbfault: the driver does not begin transactions with options")
	}
	tx, err := b.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &txn{Tx: tx, c: c}, nil
}

func (c *conn) Ping(ctx context.Context) error {
	if p, ok := c.Conn.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

func (c *conn) ResetSession(ctx context.Context) error {
	if c.dead.Load() {
		return driver.ErrBadConn
	}
	if r, ok := c.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *conn) IsValid() bool {
	if c.dead.Load() {
		return false
	}
	if v, ok := c.Conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (c *conn) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := c.Conn.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

// txn is a transaction whose COMMIT's answer may be lost.
type txn struct {
	driver.Tx
	c *conn
}

func (t *txn) Commit() error {
	when, lost, answer := t.c.l.take(CommitQuery)
	if answer != nil {
		// The server refused the COMMIT: the transaction is rolled back.
		return errors.Join(answer, t.Tx.Rollback())
	}
	if !lost {
		return t.Tx.Commit()
	}
	if when == AfterApply {
		if err := t.Tx.Commit(); err != nil {
			return err
		}
	}
	// Before the COMMIT is sent, the broken connection rolls the
	// transaction back on the server.
	return t.c.lose()
}
