package mariadbnode

import (
	"slices"
	"testing"
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
