package conn_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/internal/conn"
	"github.com/seckill/seckill/internal/testkit/netproxy"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/store"
)

// A process started while MySQL is unreachable waits for it (a worker
// restarted during a database outage used to exit at once).
func TestStoreWhenReadyWaitsForTheDatabase(t *testing.T) {
	testenv.MustStore(t) // the package's database exists
	cfg := testenv.Config(t)
	dsn, err := mysql.ParseDSN(cfg.MySQLDSN)
	require.NoError(t, err)
	proxy, err := netproxy.Start(dsn.Addr, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	proxy.SetCut(true)
	dsn.Addr = proxy.Addr()
	cfg.MySQLDSN = dsn.FormatDSN()

	healAt := time.Now().Add(2 * time.Second)
	time.AfterFunc(time.Until(healAt), func() { proxy.SetCut(false) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := conn.StoreWhenReady(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	require.False(t, time.Now().Before(healAt), "opened before the link healed")
	require.NoError(t, st.Ping(ctx))
}

func TestStoreWhenReadyGivesUpOnAnInvalidDSN(t *testing.T) {
	cfg := testenv.Config(t)
	cfg.MySQLDSN = "not a dsn"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := conn.StoreWhenReady(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.ErrorIs(t, err, store.ErrInvalidDSN)
	require.NoError(t, ctx.Err(), "an invalid DSN is not retried")
}

// The Temporal client sends its requests uncompressed unless TEMPORAL_GZIP
// asks for gzip (the SDK's default).
func TestTemporalGzipOnlyWhenAsked(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := testenv.Config(t)
	opts, err := conn.TemporalOptions(cfg, logger)
	require.NoError(t, err)
	require.IsType(t, &client.GrpcCompressionNone{}, opts.ConnectionOptions.GrpcCompression)

	cfg.TemporalGzip = true
	opts, err = conn.TemporalOptions(cfg, logger)
	require.NoError(t, err)
	require.Nil(t, opts.ConnectionOptions.GrpcCompression, "the SDK's default, gzip")
}
