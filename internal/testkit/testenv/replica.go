package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/mariadbnode"
)

// ReplicaDatabase is the database MustReplicaPair creates on its primary.
const ReplicaDatabase = "seckill"

// MustReplicaPair starts a primary MariaDB with one asynchronous replica
// of its own (mariadbnode.ReplicaPair), with ReplicaDatabase on both; it
// is stopped at the end of the test.
func MustReplicaPair(tb testing.TB) *mariadbnode.ReplicaPair {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p, err := mariadbnode.StartReplicaPair(ctx, tb.TempDir())
	if err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	tb.Cleanup(func() {
		if err := p.Stop(); err != nil {
			tb.Errorf("testenv: %v", err)
		}
	})
	if err := p.CreateDatabase(ctx, ReplicaDatabase); err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	return p
}
