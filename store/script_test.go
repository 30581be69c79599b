package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/store"
)

// A script is one transaction: a step that fails (by its own error, or by
// one of MariaDB's) rolls back every step before it, and the connection is
// not left in a transaction.
func TestScriptIsOneTransaction(t *testing.T) {
	st := testenv.MustStore(t)
	st.DB.SetMaxOpenConns(1) // every script and check on one connection
	table := probeTable(t, st, "script_probe")
	insert := func(id int) store.ScriptStep {
		return store.ScriptStep{Query: "INSERT INTO " + table + " (id, v) VALUES (?, 0)", Args: []any{id}}
	}
	errDup, errNone := errors.New("duplicate"), errors.New("no row")
	rows := func() []int {
		var ids []int
		require.NoError(t, st.DB.NewRaw("SELECT id FROM "+table+" ORDER BY id").Scan(ctx(t), &ids))
		return ids
	}
	notInTx := func() {
		var inTx int
		require.NoError(t, st.DB.QueryRowContext(ctx(t), "SELECT @@in_transaction").Scan(&inTx))
		require.Zero(t, inTx, "the connection is left in a transaction")
	}

	require.NoError(t, st.RunScript(ctx(t), insert(1),
		store.ScriptStep{Query: "UPDATE " + table + " SET v = 2 WHERE id = ?", Args: []any{1}, None: errNone}))
	require.Equal(t, []int{1}, rows())
	notInTx()

	dup := insert(1)
	dup.Dup = errDup
	require.ErrorIs(t, st.RunScript(ctx(t), insert(2), dup), errDup)
	require.Equal(t, []int{1}, rows(), "the step before rolled back")
	notInTx()

	require.ErrorIs(t, st.RunScript(ctx(t), insert(3),
		store.ScriptStep{Query: "UPDATE " + table + " SET v = 1 WHERE id = ?", Args: []any{99}, None: errNone}), errNone)
	require.Equal(t, []int{1}, rows(), "the step before rolled back")
	notInTx()

	err := st.RunScript(ctx(t), insert(4), insert(1))
	require.True(t, store.IsDuplicate(err), "MariaDB's own error comes back as it raised it: %v", err)
	require.Equal(t, []int{1}, rows(), "the step before rolled back")
	notInTx()

	var v int
	require.NoError(t, st.DB.QueryRowContext(ctx(t), "SELECT v FROM "+table+" WHERE id = 1").Scan(&v))
	require.Equal(t, 2, v)
}

// A group is one transaction of independent parts: a part that meets its
// duplicate or its count of rows is rolled back alone, the others commit,
// and the answer says which did; MariaDB's other errors roll back all.
func TestGroupCommitsEachPartOnItsOwn(t *testing.T) {
	st := testenv.MustStore(t)
	st.DB.SetMaxOpenConns(1) // every group and check on one connection
	table := probeTable(t, st, "group_probe")
	errDup, errNone := errors.New("duplicate"), errors.New("no row")
	insert := func(id int) store.ScriptStep {
		return store.ScriptStep{Query: "INSERT INTO " + table + " (id, v) VALUES (?, 0)", Args: []any{id}, Dup: errDup}
	}
	bump := func(id int) store.ScriptStep {
		return store.ScriptStep{Query: "UPDATE " + table + " SET v = v + 1 WHERE id = ?", Args: []any{id}, None: errNone}
	}
	rows := func() map[int]int {
		var got []struct{ ID, V int }
		require.NoError(t, st.DB.NewRaw("SELECT id, v FROM "+table).Scan(ctx(t), &got))
		m := map[int]int{}
		for _, r := range got {
			m[r.ID] = r.V
		}
		return m
	}

	committed, err := st.RunGroup(ctx(t),
		[]store.ScriptStep{insert(1), bump(1)},
		[]store.ScriptStep{insert(2), insert(1)}, // its duplicate: rolled back whole, insert(2) too
		[]store.ScriptStep{insert(3), bump(99)},  // no row: rolled back whole
		[]store.ScriptStep{insert(4), bump(4), bump(4)},
	)
	require.NoError(t, err)
	require.Equal(t, []bool{true, false, false, true}, committed)
	require.Equal(t, map[int]int{1: 1, 4: 2}, rows())

	_, err = st.RunGroup(ctx(t),
		[]store.ScriptStep{insert(5)},
		[]store.ScriptStep{{Query: "INSERT INTO " + table + " (id, v) VALUES (6, NULL)"}}, // not a part's failure
	)
	require.Error(t, err)
	require.Equal(t, map[int]int{1: 1, 4: 2}, rows(), "MariaDB's other errors roll the whole group back")
	var inTx int
	require.NoError(t, st.DB.QueryRowContext(ctx(t), "SELECT @@in_transaction").Scan(&inTx))
	require.Zero(t, inTx)
}

// probeTable creates a table of its own for a test (id, v), dropped at
// its end.
func probeTable(t *testing.T, st *store.Store, prefix string) string {
	t.Helper()
	table := fmt.Sprintf("%s_%d", prefix, testenv.UniqueUser())
	_, err := st.DB.ExecContext(ctx(t), "CREATE TABLE "+table+" (id INT PRIMARY KEY, v INT NOT NULL)")
	require.NoError(t, err)
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := st.DB.ExecContext(c, "DROP TABLE "+table)
		require.NoError(t, err)
	})
	return table
}
