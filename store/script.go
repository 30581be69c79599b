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

// step is a statement of an order's transaction with what its failure
// means, built once for both a transaction that runs it on its own (run)
// and a script that sends it with others (script.add): with dup, a
// duplicate key in it is dup; with none, a count of affected rows other
// than one is none; what names it in any other error.
type step struct {
	stmt
	what      string
	dup, none error
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
// error rolls the transaction back and comes back as MariaDB raised it. MariaDB-only, as
// SET STATEMENT and the orders' PERSISTENT column already are.
//
// The script commits on the server, so a client that gave up waiting (a
// timeout, a killed process) may not know it committed: its outcome is
// unknown, as it is when a COMMIT's answer is lost.
type script struct {
	body  strings.Builder
	args  []any
	fails []error
}

// scriptFailure prefixes the message of a step's signal, before its number.
const scriptFailure = "seckill script step "

// add appends steps.
func (s *script) add(steps ...step) {
	for _, st := range steps {
		s.body.WriteString("BEGIN ")
		if st.dup != nil {
			s.body.WriteString("DECLARE EXIT HANDLER FOR 1062 " + s.fail(st.dup) + " ")
		}
		s.body.WriteString(st.query + "; ")
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
