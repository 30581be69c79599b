package store_test

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/schema"
	"github.com/seckill/seckill/store"
)

// explainPartitions runs EXPLAIN PARTITIONS of query and returns, per
// table, the partitions the plan reads ("" for an unpartitioned table).
func explainPartitions(t *testing.T, st *store.Store, query string) map[string]string {
	t.Helper()
	rows, err := st.DB.QueryContext(ctx(t), "EXPLAIN PARTITIONS "+query)
	require.NoError(t, err)
	defer rows.Close()
	cols, err := rows.Columns()
	require.NoError(t, err)
	out := map[string]string{}
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		require.NoError(t, rows.Scan(ptrs...))
		row := map[string]string{}
		for i, c := range cols {
			row[c] = vals[i].String
		}
		out[row["table"]] = row["partitions"]
	}
	require.NoError(t, rows.Err())
	return out
}

// The orders and reservations are split by user: "my reservations" (with
// and without a sale) and a read by token each read one partition of
// reservations.
func TestMyReservationsReadOnePartition(t *testing.T) {
	st := testenv.MustStore(t)
	user := testenv.UniqueUser()
	var sale *domain.Sale
	for i := range 3 {
		sale = testenv.MustSale(t, st, 10)
		mustLegacyQueued(t, st, sale, user, fmt.Sprintf("mine-%d", i))
	}
	got, err := st.ListReservations(ctx(t), user, 0, 10)
	require.NoError(t, err)
	require.Len(t, got, 3)
	got, err = st.ListReservations(ctx(t), user, sale.ID, 10)
	require.NoError(t, err)
	require.Len(t, got, 1)

	for _, q := range []string{
		st.ListReservationsSQL(user, sale.ID, 10),
		st.ListReservationsSQL(user, 0, 10),
		st.GetReservationSQL(got[0].Token),
	} {
		// reservations (under bun's alias) is the one partitioned table
		// these read: one plan row names partitions, and only one.
		var read []string
		for _, p := range explainPartitions(t, st, q) {
			if p != "" {
				read = append(read, p)
			}
		}
		require.Len(t, read, 1, "plan rows reading partitions: %s", q)
		require.NotContains(t, read[0], ",", "more than one partition read: %s", q)
	}
	// Without the user, every partition is read: the plan names them.
	all := explainPartitions(t, st, "SELECT * FROM reservations WHERE sale_id = "+fmt.Sprint(sale.ID))
	require.Contains(t, all["reservations"], ",")
}

// otherPartitionUser is a fresh user whose reservations live in another
// partition than user's.
func otherPartitionUser(t *testing.T, st *store.Store, user int64) int64 {
	t.Helper()
	part := func(u int64) string {
		return explainPartitions(t, st, fmt.Sprintf("SELECT * FROM reservations WHERE user_id = %d", u))["reservations"]
	}
	mine := part(user)
	for range 64 {
		if other := testenv.UniqueUser(); part(other) != mine {
			return other
		}
	}
	t.Fatal("no user found in another partition")
	return 0
}

// The unique rules that span users hold across partitions: a token once, a
// Redis hold number once per sale, an order number once, a token's order
// once; and one live reservation and one live order per user and sale.
func TestUniqueRulesHoldAcrossPartitions(t *testing.T) {
	st := testenv.MustStore(t)
	sale := testenv.MustSale(t, st, 10)
	a := testenv.UniqueUser()
	b := otherPartitionUser(t, st, a)
	insert := func(token string, user int64, req string, seq any) error {
		_, err := st.DB.ExecContext(ctx(t), `INSERT INTO reservations (token, sale_id, user_id, request_id, path, status, redis_seq, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, NOW(3), NOW(3))`, token, sale.ID, user, req, string(domain.PathRedis), string(domain.StatusQueued), seq)
		return err
	}
	tok := func(s string) string { return fmt.Sprintf("%d-%s-%d", sale.ID, s, a) }
	require.NoError(t, insert(tok("a"), a, "r1", 1))
	// The same token for a user in another partition.
	require.True(t, store.IsDuplicate(insert(tok("a"), b, "r1", nil)), "token twice")
	// The same Redis hold number for another user.
	err := insert(tok("b"), b, "r1", 1)
	require.True(t, store.IsDuplicate(err), "hold number twice: %v", err)
	require.Contains(t, err.Error(), "reservations_redis_seq")
	// A second live reservation of the user in the sale.
	err = insert(tok("c"), a, "r2", nil)
	require.True(t, store.IsDuplicate(err), "two live reservations: %v", err)
	require.Contains(t, err.Error(), "reservations_live_user")
	// A refused insert leaves no key behind: the token goes in later.
	require.NoError(t, insert(tok("b"), b, "r1", 2))
	// An INSERT IGNORE of a row that is there (a replay) is ignored as
	// before; of its token for another user it is refused all the same.
	ignore := func(user int64) (int64, error) {
		res, err := st.DB.ExecContext(ctx(t), `INSERT IGNORE INTO reservations (token, sale_id, user_id, request_id, path, status, created_at, updated_at)
			VALUES (?, ?, ?, 'r9', ?, ?, NOW(3), NOW(3))`, tok("a"), sale.ID, user, string(domain.PathRedis), string(domain.StatusFailed))
		if err != nil {
			return 0, err
		}
		return res.RowsAffected()
	}
	n, err := ignore(a)
	require.NoError(t, err)
	require.Zero(t, n)
	_, err = ignore(b)
	require.True(t, store.IsDuplicate(err), "token twice under INSERT IGNORE: %v", err)

	order := func(orderNo, token string, user int64) error {
		_, err := st.DB.ExecContext(ctx(t), `INSERT INTO orders (order_no, token, sale_id, user_id, amount_cents, status, bucket_no, pay_by)
			VALUES (?, ?, ?, ?, 100, ?, 0, NOW(3))`, orderNo, token, sale.ID, user, string(domain.StatusPendingPayment))
		return err
	}
	no := func(s string) string { return (s + strings.Repeat("0", 26))[:26] }
	base := fmt.Sprintf("P%d", a%1_000_000_000)
	require.NoError(t, order(no(base+"A"), tok("a"), a))
	require.True(t, store.IsDuplicate(order(no(base+"A"), tok("b"), b)), "order number twice")
	require.True(t, store.IsDuplicate(order(no(base+"B"), tok("a"), b)), "a token's second order")
	require.True(t, store.IsDuplicate(order(no(base+"C"), tok("c"), a)), "two live orders")
	require.NoError(t, order(no(base+"D"), tok("b"), b))
}

// Migration 0015 moves a database the release before left, rows and all:
// the rows' keys are copied, the tables partitioned, the rules hold on the
// rows moved, a read by token finds them, and running the migration's
// statements again changes nothing.
func TestMigrationPartitionsAnExistingDatabase(t *testing.T) {
	dsn := testenv.MustEmptyDatabase(t)
	db, err := sql.Open("mysql", dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	c := ctx(t)
	// The release before's schema: its migrations, recorded as Migrate
	// records them.
	_, err = db.ExecContext(c, "CREATE TABLE schema_migrations (version VARCHAR(64) NOT NULL PRIMARY KEY, applied_at DATETIME(3) NOT NULL)")
	require.NoError(t, err)
	all, err := schema.Migrations()
	require.NoError(t, err)
	var last schema.Migration
	for _, m := range all {
		if m.Version >= "0015" {
			last = m
			break
		}
		for _, stmt := range m.Statements() {
			_, err := db.ExecContext(c, stmt)
			require.NoError(t, err, m.Version)
		}
		_, err := db.ExecContext(c, "INSERT INTO schema_migrations (version, applied_at) VALUES (?, NOW(3))", m.Version)
		require.NoError(t, err)
	}
	require.Equal(t, "0015_partition_by_user", last.Version)
	exec := func(q string, args ...any) error { _, err := db.ExecContext(c, q, args...); return err }
	reservation := func(token string, user int64, status string, seq any) error {
		return exec(`INSERT INTO reservations (token, sale_id, user_id, request_id, path, status, redis_seq) VALUES (?, 1, ?, ?, 'redis', ?, ?)`,
			token, user, token, status, seq)
	}
	require.NoError(t, reservation("tok-a", 1, string(domain.StatusPendingPayment), 1))
	require.NoError(t, reservation("tok-b", 2, string(domain.StatusExpired), 2))
	require.NoError(t, exec(`INSERT INTO orders (order_no, token, sale_id, user_id, amount_cents, status, bucket_no, pay_by)
		VALUES ('01ORDERA000000000000000000', 'tok-a', 1, 1, 100, ?, 0, ?)`, string(domain.StatusPendingPayment), time.Now().UTC()))

	require.NoError(t, schema.Migrate(c, db))
	var keys, orderKeys int
	require.NoError(t, db.QueryRowContext(c, "SELECT COUNT(*) FROM reservation_keys WHERE (token, user_id, redis_seq) IN (('tok-a', 1, 1), ('tok-b', 2, 2))").Scan(&keys))
	require.NoError(t, db.QueryRowContext(c, "SELECT COUNT(*) FROM order_keys WHERE token = 'tok-a' AND user_id = 1").Scan(&orderKeys))
	require.Equal(t, []int{2, 1}, []int{keys, orderKeys})
	for _, table := range []string{"reservations", "orders"} {
		var name, ddl string
		require.NoError(t, db.QueryRowContext(c, "SHOW CREATE TABLE "+table).Scan(&name, &ddl))
		require.Contains(t, ddl, "PARTITION BY HASH (`user_id`)", table)
	}
	require.True(t, store.IsDuplicate(reservation("tok-a", 3, string(domain.StatusFailed), nil)), "a moved row's token")
	require.True(t, store.IsDuplicate(reservation("tok-c", 3, string(domain.StatusQueued), 2)), "a moved row's hold number")
	require.True(t, store.IsDuplicate(reservation("tok-d", 1, string(domain.StatusQueued), nil)), "a moved row's live user")

	st, err := store.Open(c, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	got, err := st.GetReservation(c, "tok-a")
	require.NoError(t, err)
	require.EqualValues(t, 1, got.UserID)
	for _, stmt := range last.Statements() {
		require.NoError(t, exec(stmt), "run again: %s", stmt)
	}
	require.NoError(t, db.QueryRowContext(c, "SELECT COUNT(*) FROM reservation_keys").Scan(&keys))
	require.Equal(t, 2, keys)
}
