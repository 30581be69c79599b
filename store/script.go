package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/uptrace/bun"
)

// stmt is one SQL statement with its arguments.
type stmt struct {
	query string
	args  []any
}

// exec runs the statement in tx.
func (st stmt) exec(ctx context.Context, tx bun.Tx) (int64, error) {
	r, err := tx.ExecContext(ctx, st.query, st.args...)
	if err != nil {
		return 0, err
	}
	return r.RowsAffected()
}

// exec runs the step's statement in tx. A lock wait bound is the
// session's for the statement (MySQL has no SET STATEMENT): set before it
// and put back after it, whatever it did.
func (st step) exec(ctx context.Context, tx bun.Tx) (n int64, err error) {
	if st.lockWait > 0 {
		if _, err := tx.ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = "+strconv.Itoa(st.lockWait)); err != nil {
			return 0, fmt.Errorf("bound the lock wait: %w", err)
		}
		defer func() {
			if _, rerr := tx.ExecContext(context.WithoutCancel(ctx), "SET SESSION innodb_lock_wait_timeout = DEFAULT"); rerr != nil {
				err = errors.Join(err, fmt.Errorf("unbound the lock wait: %w", rerr))
			}
		}()
	}
	return st.stmt.exec(ctx, tx)
}

// inline is the step's statement as one statement of a MariaDB compound
// statement: its lock wait bound by SET STATEMENT.
func (st step) inline() string {
	if st.lockWait > 0 {
		return "SET STATEMENT innodb_lock_wait_timeout = " + strconv.Itoa(st.lockWait) + " FOR " + st.query
	}
	return st.query
}

// step is a statement of an order's transaction with what its failure
// means, built once for both a transaction that runs it on its own (run)
// and a script that sends it with others (script.add): with dup, a
// duplicate key in it is dup; with none, a count of affected rows other
// than one is none; what names it in any other error. lockWait > 0 bounds,
// in seconds, its wait for a row lock (error 1205 after it).
type step struct {
	stmt
	what      string
	dup, none error
	lockWait  int
}

// run runs the step in tx, one round trip.
func (st step) run(ctx context.Context, tx bun.Tx) error {
	n, err := st.exec(ctx, tx)
	switch {
	case err != nil && st.dup != nil && IsDuplicate(err):
		return st.dup
	case err != nil:
		return fmt.Errorf("%s: %w", st.what, err)
	case st.none != nil && n != 1:
		return st.none
	}
	return nil
}

// runSteps runs steps in tx in order, one round trip each.
func runSteps(ctx context.Context, tx bun.Tx, steps []step) error {
	for _, st := range steps {
		if err := st.run(ctx, tx); err != nil {
			return err
		}
	}
	return nil
}

// script is a transaction sent to MariaDB whole, as one compound statement
// (BEGIN NOT ATOMIC ... END): one round trip in place of one per step, so
// a row lock it takes is held for no round trip of the client's. A step's
// duplicate key or count of rows fails the script with the step's error (a
// signal MariaDB raises with the step's number), as run would; any other
// error rolls the transaction back and comes back as MariaDB raised it.
// MySQL 8 has no compound statement outside a stored program: there the
// steps run one by one in a transaction (runSteps), to the same outcome.
//
// The script commits on the server, so a client that gave up waiting (a
// timeout, a killed process) may not know it committed: its outcome is
// unknown, as it is when a COMMIT's answer is lost.
type script struct {
	body  strings.Builder
	args  []any
	fails []error
	steps []step
}

// scriptFailure prefixes the message of a step's signal, before its number.
const scriptFailure = "seckill script step "

// add appends steps.
func (s *script) add(steps ...step) {
	s.steps = append(s.steps, steps...)
	for _, st := range steps {
		s.body.WriteString("BEGIN ")
		if st.dup != nil {
			s.body.WriteString("DECLARE EXIT HANDLER FOR 1062 " + s.fail(st.dup) + " ")
		}
		s.body.WriteString(st.inline() + "; ")
		if st.none != nil {
			s.body.WriteString("IF ROW_COUNT() <> 1 THEN " + s.fail(st.none) + " END IF; ")
		}
		s.body.WriteString("END;\n")
		s.args = append(s.args, st.args...)
	}
}

// fail is the statement that fails the script with err: a signal carrying
// err's number, which run maps back.
func (s *script) fail(err error) string {
	s.fails = append(s.fails, err)
	return "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '" + scriptFailure + strconv.Itoa(len(s.fails)-1) + "';"
}

// run sends the script in one transaction of its own; db must not be in
// one.
func (s *script) run(ctx context.Context, db bun.IDB) error {
	if dialectOf(db) == MySQL8 {
		return db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error { return runSteps(ctx, tx, s.steps) })
	}
	q := "BEGIN NOT ATOMIC DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;\nSTART TRANSACTION;\n" +
		s.body.String() + "COMMIT;\nEND"
	if _, err := db.ExecContext(ctx, q, s.args...); err != nil {
		var me *mysql.MySQLError
		if errors.As(err, &me) && string(me.SQLState[:]) == "45000" {
			if n, ok := strings.CutPrefix(me.Message, scriptFailure); ok {
				if i, perr := strconv.Atoi(n); perr == nil && i >= 0 && i < len(s.fails) {
					return s.fails[i]
				}
			}
		}
		return err
	}
	return nil
}

// group is a transaction of independent parts sent to MariaDB whole, as
// one compound statement: the group commit of several requests' writes in
// one round trip and one commit. Each part runs under a savepoint; a part
// whose step meets its dup or none, or waits on a lock past its statement's
// bound, is rolled back alone to its savepoint, and the other parts commit.
// run answers, part by part, whether it committed. Any other error rolls
// the whole transaction back (a deadlock victim has lost its savepoints
// too), and its outcome is unknown as a script's is when its answer is lost.
// On MySQL 8 the parts run statement by statement in one transaction, each
// under its savepoint, to the same outcome (runParts).
type group struct {
	body  strings.Builder
	args  []any
	parts int
	steps [][]step
}

// add appends a part made of steps.
func (g *group) add(steps ...step) {
	label := "seckill_part_" + strconv.Itoa(g.parts)
	g.parts++
	g.steps = append(g.steps, steps)
	undo := "ROLLBACK TO SAVEPOINT seckill_part; SET parts = CONCAT(parts, '0');"
	g.body.WriteString("SAVEPOINT seckill_part;\n" + label + ": BEGIN DECLARE EXIT HANDLER FOR " +
		strconv.Itoa(errDupEntry) + ", " + strconv.Itoa(errLockWait) + " BEGIN " + undo + " END; ")
	for _, st := range steps {
		g.body.WriteString(st.inline() + "; ")
		if st.none != nil {
			g.body.WriteString("IF ROW_COUNT() <> 1 THEN " + undo + " LEAVE " + label + "; END IF; ")
		}
		g.args = append(g.args, st.args...)
	}
	g.body.WriteString("SET parts = CONCAT(parts, '1'); END;\n")
}

// run sends the group in one transaction of its own (db must not be in
// one) and reports, for each part in the order added, whether it committed.
func (g *group) run(ctx context.Context, db bun.IDB) ([]bool, error) {
	if dialectOf(db) == MySQL8 {
		return g.runParts(ctx, db)
	}
	q := "BEGIN NOT ATOMIC DECLARE parts TEXT DEFAULT ''; DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;\nSTART TRANSACTION;\n" +
		g.body.String() + "COMMIT;\nSELECT parts;\nEND"
	rows, err := db.QueryContext(ctx, q, g.args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var parts string
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return nil, err
		}
		return nil, errors.New("group: no answer after its commit")
	}
	if err := rows.Scan(&parts); err != nil {
		return nil, fmt.Errorf("group: read its answer: %w", err)
	}
	if len(parts) != g.parts {
		return nil, fmt.Errorf("group: %d answers for %d parts", len(parts), g.parts)
	}
	committed := make([]bool, g.parts)
	for i := range parts {
		committed[i] = parts[i] == '1'
	}
	return committed, rows.Close()
}

// runParts is run statement by statement: each part under a savepoint,
// rolled back to it alone on a duplicate key, a lock wait past its bound
// or a step's count of rows other than one.
func (g *group) runParts(ctx context.Context, db bun.IDB) ([]bool, error) {
	committed := make([]bool, len(g.steps))
	err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		for i, part := range g.steps {
			if _, err := tx.ExecContext(ctx, "SAVEPOINT seckill_part"); err != nil {
				return fmt.Errorf("group: savepoint: %w", err)
			}
			ok, err := runPart(ctx, tx, part)
			if err != nil {
				return err
			}
			if !ok {
				if _, err := tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT seckill_part"); err != nil {
					return fmt.Errorf("group: roll a part back: %w", err)
				}
			}
			committed[i] = ok
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return committed, nil
}

// runPart runs a group's part, reporting false where the group rolls the
// part back alone.
func runPart(ctx context.Context, tx bun.Tx, part []step) (bool, error) {
	for _, st := range part {
		n, err := st.exec(ctx, tx)
		switch no := mysqlErrNo(err); {
		case no == errDupEntry || no == errLockWait:
			return false, nil
		case err != nil:
			return false, err
		case st.none != nil && n != 1:
			return false, nil
		}
	}
	return true, nil
}
