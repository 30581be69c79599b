package store_test

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
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
