package store

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/uptrace/bun"
)

// stmt is one SQL statement with its arguments, built once for both a
// transaction that runs it on its own and a script that sends it with
// others.
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

// script is a transaction sent to MariaDB whole, as one compound statement
// (BEGIN NOT ATOMIC ... END): one round trip in place of one per
// statement, so a row lock it takes is held for no round trip of the
// client's. A step that must touch exactly one row, or must not hit a
// unique key, fails the script with the error its caller expects (a
// signal MariaDB raises with the step's number); any other error rolls the
// transaction back and comes back as MariaDB raised it. MariaDB-only, as
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

// step appends st. With dup, a duplicate key in it fails the script with
// dup; with none, a count of affected rows other than one does, with none.
func (s *script) step(st stmt, dup, none error) {
	fail := func(err error) string {
		s.fails = append(s.fails, err)
		return "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '" + scriptFailure + strconv.Itoa(len(s.fails)-1) + "';"
	}
	s.body.WriteString("BEGIN ")
	if dup != nil {
		s.body.WriteString("DECLARE EXIT HANDLER FOR 1062 " + fail(dup) + " ")
	}
	s.body.WriteString(st.query + "; ")
	if none != nil {
		s.body.WriteString("IF ROW_COUNT() <> 1 THEN " + fail(none) + " END IF; ")
	}
	s.body.WriteString("END;\n")
	s.args = append(s.args, st.args...)
}

// run sends the script in one transaction of its own; db must not be in
// one.
func (s *script) run(ctx context.Context, db bun.IDB) error {
	q := "BEGIN NOT ATOMIC DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;\nSTART TRANSACTION;\n" +
		s.body.String() + "COMMIT;\nEND"
	if _, err := db.ExecContext(ctx, q, s.args...); err != nil {
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.SQLState == [5]byte{'4', '5', '0', '0', '0'} {
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
