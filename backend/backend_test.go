package backend_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/backend"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/store"
)

// Ping answers while the database does and fails, naming it, once it is
// gone.
func TestPing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, backend.New(testenv.MustStore(t)).Ping(ctx))

	closed, err := store.Open(ctx, testenv.MySQLDSN())
	require.NoError(t, err)
	require.NoError(t, closed.Close())
	require.ErrorContains(t, backend.New(closed).Ping(ctx), "ping the database")
}
