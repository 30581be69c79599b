package mariadbnode

import (
	"context"
	"database/sql"
	"slices"
	"testing"
	"time"
)

// Durable decides the one flag a killed server's commits depend on; no
// option file is read, so the harnesses' servers are alike on any machine.
func TestArgs(t *testing.T) {
	o := Options{Port: 3307, Dir: "/d", MaxConns: 300}
	args := Args(o)
	for _, want := range []string{"--no-defaults", "--datadir=/d/data", "--port=3307", "--max-connections=300", "--innodb-flush-log-at-trx-commit=2"} {
		if !slices.Contains(args, want) {
			t.Errorf("%s missing from %v", want, args)
		}
	}
	if args[0] != "--no-defaults" {
		t.Errorf("--no-defaults must come first: %v", args)
	}
	o.Durable, o.BufferPool = true, "64M"
	args = Args(o)
	if !slices.Contains(args, "--innodb-flush-log-at-trx-commit=1") || !slices.Contains(args, "--innodb-buffer-pool-size=64M") {
		t.Errorf("durable with a 64M pool: %v", args)
	}
}

// A server of its own starts on a free port, takes a database and a row
// through its DSN, and is gone once stopped.
func TestStartServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := StartServer(ctx, Options{Dir: t.TempDir(), MaxConns: 50, BufferPool: "32M"})
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("mysql", s.DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, stmt := range []string{"CREATE DATABASE h", "CREATE TABLE h.t (id INT PRIMARY KEY)", "INSERT INTO h.t VALUES (7)"} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	var id int
	if err := db.QueryRowContext(ctx, "SELECT id FROM h.t").Scan(&id); err != nil || id != 7 {
		t.Fatalf("read back: %d, %v", id, err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := db.PingContext(ctx); err == nil {
		t.Fatal("the stopped server still answers")
	}
}
