package mariadbnode

import (
	"context"
	"database/sql"
	"testing"
	"time"
)

// The replica follows the primary, stops applying while its SQL thread is
// stopped (its reads still answer, without the new rows), and catches up
// once the thread runs again.
func TestReplicaPairLagsWhileItsSQLThreadIsStopped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p, err := StartReplicaPair(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Error(err)
		}
	})
	if err := p.CreateDatabase(ctx, "pair"); err != nil {
		t.Fatal(err)
	}
	primary := mustOpen(t, p.PrimaryDSN("pair"))
	replica := mustOpen(t, p.ReplicaDSN("pair"))
	exec := func(stmt string) {
		t.Helper()
		if _, err := primary.ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	count := func() int {
		t.Helper()
		var n int
		if err := replica.QueryRowContext(ctx, "SELECT COUNT(*) FROM rows_").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	exec("CREATE TABLE rows_ (id INT PRIMARY KEY)")
	exec("INSERT INTO rows_ VALUES (1)")
	if err := p.CaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 1 {
		t.Fatalf("the replica has %d rows, want 1", n)
	}
	if err := p.StopSQLThread(ctx); err != nil {
		t.Fatal(err)
	}
	exec("INSERT INTO rows_ VALUES (2)")
	time.Sleep(500 * time.Millisecond)
	if n := count(); n != 1 {
		t.Fatalf("with its SQL thread stopped the replica has %d rows, want 1", n)
	}
	if err := p.StartSQLThread(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.CaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 2 {
		t.Fatalf("caught up, the replica has %d rows, want 2", n)
	}
}

func mustOpen(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}
