// Package conn opens seckill's connections to Redis, MySQL and Temporal from
// the configuration, the same way for the API, the worker and the tools.
package conn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	"github.com/uptrace/bun/extra/bunotel"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/workflow"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/internal/reqid"
	"github.com/seckill/seckill/internal/telemetry"
	"github.com/seckill/seckill/store"
)

// Redis returns a client for one Redis or a Redis Cluster (several
// addresses, or REDIS_CLUSTER=true discovering it from one), addressed by
// REDIS_URL or REDIS_ADDR(S), or for the master a Sentinel group names
// (REDIS_SENTINELS): go-redis's failover client, a *redis.Client that asks
// the sentinels for the master's address on every dial and drops its
// connections to the old master when they announce a new one, so the rest
// of the process sees one Redis either way. Every call is bounded by the
// client's timeouts and, when its context has an earlier deadline, by that
// deadline: without ContextTimeoutEnabled go-redis v9 applies a context's
// deadline to the socket only through ReadTimeout, so a frozen Redis held
// each hot-path call for 2 s instead of SECKILL_REDIS_TIMEOUT.
func Redis(cfg *config.Config) (redis.UniversalClient, error) {
	opts, err := redisOptions(cfg)
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	redis.SetLogger(goRedisLogger{})
	var rdb redis.UniversalClient
	if opts.MasterName != "" {
		rdb = redis.NewFailoverClient(opts.Failover())
	} else {
		rdb = redis.NewUniversalClient(opts)
	}
	if cfg.Tracing {
		// Fails only on bad options; a trace without Redis spans is
		// better than a process that will not start.
		if err := redisotel.InstrumentTracing(rdb, redisotel.WithDBStatement(false),
			redisotel.WithTracerProvider(telemetry.ChildrenOnly())); err != nil {
			slog.Warn("redis tracing", "err", err)
		}
	}
	return rdb, nil
}

// goRedisLogger sends go-redis's own messages (the master a failover
// client switched to, a pool that cannot dial) to slog instead of
// go-redis's stderr logger.
type goRedisLogger struct{}

func (goRedisLogger) Printf(_ context.Context, format string, v ...any) {
	slog.Warn("go-redis", "detail", fmt.Sprintf(format, v...))
}

// redisOptions builds the one set of options every Redis client of the
// process uses (redisgateway.Client.Aside copies them).
func redisOptions(cfg *config.Config) (*redis.UniversalOptions, error) {
	opts := &redis.UniversalOptions{
		Addrs:                 cfg.RedisAddrs,
		Password:              cfg.RedisPassword,
		DialTimeout:           2 * time.Second,
		ReadTimeout:           2 * time.Second,
		WriteTimeout:          2 * time.Second,
		PoolSize:              256,
		ContextTimeoutEnabled: true,
		MinIdleConns:          16,
		IsClusterMode:         cfg.RedisCluster || len(cfg.RedisAddrs) > 1,
	}
	if len(cfg.RedisSentinels) > 0 {
		// The sentinels' addresses, and the password of their own; the
		// data nodes' password stays REDIS_PASSWORD. The timeouts and
		// pool above serve the master; go-redis gives each sentinel a
		// client with the same ones.
		opts.Addrs, opts.MasterName, opts.SentinelPassword = cfg.RedisSentinels, cfg.RedisSentinelMaster, cfg.RedisSentinelPassword
		opts.IsClusterMode = false
		if cfg.RedisSentinelTLS {
			// No ServerName: each sentinel and node is verified under the
			// host it is dialled by.
			opts.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
	}
	if cfg.RedisURL != "" {
		u, err := redis.ParseURL(cfg.RedisURL)
		if err != nil {
			// The URL may hold a password: name the variable, not its value.
			return nil, errors.New("REDIS_URL does not parse")
		}
		if cfg.RedisCluster && u.DB != 0 {
			return nil, errors.New("REDIS_URL: a Redis Cluster has database 0 only")
		}
		opts.Addrs, opts.Username, opts.Password, opts.DB, opts.TLSConfig = []string{u.Addr}, u.Username, u.Password, u.DB, u.TLSConfig
		opts.IsClusterMode = cfg.RedisCluster
	}
	if cfg.RedisCAFile != "" {
		if opts.TLSConfig == nil {
			return nil, errors.New("REDIS_CA_FILE needs a rediss:// REDIS_URL or REDIS_SENTINEL_TLS=true")
		}
		roots, err := caPool("REDIS_CA_FILE", cfg.RedisCAFile)
		if err != nil {
			return nil, err
		}
		opts.TLSConfig.RootCAs = roots
	}
	return opts, nil
}

// caPool reads a PEM CA bundle named by the variable name.
func caPool(name, path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s %s: no PEM certificate", name, path)
	}
	return roots, nil
}

// MySQLTLSName is the DSN's tls= value that verifies the server against
// MYSQL_CA_FILE.
const MySQLTLSName = "custom"

// Store opens the database and applies the migrations.
func Store(ctx context.Context, cfg *config.Config) (*store.Store, error) {
	if cfg.MySQLCAFile != "" {
		roots, err := caPool("MYSQL_CA_FILE", cfg.MySQLCAFile)
		if err != nil {
			return nil, fmt.Errorf("open store: %w: %w", store.ErrInvalidDSN, err)
		}
		if err := mysql.RegisterTLSConfig(MySQLTLSName, &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}); err != nil {
			return nil, fmt.Errorf("open store: %w", err)
		}
	}
	st, err := store.Open(ctx, cfg.MySQLDSN)
	if err != nil {
		return nil, err
	}
	migrateCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := st.Migrate(migrateCtx); err != nil {
		_ = st.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	if cfg.Tracing {
		st.DB = st.DB.WithQueryHook(bunotel.NewQueryHook(bunotel.WithDBName("seckill"),
			bunotel.WithTracerProvider(telemetry.ChildrenOnly())))
	}
	if cfg.MySQLReadDSN != "" {
		// After the migrations: the heartbeat's table is one of them.
		r, err := store.OpenReplica(cfg.MySQLReadDSN, cfg.MySQLReadMaxLag, slog.Default())
		if err != nil {
			_ = st.Close()
			return nil, fmt.Errorf("open store: %w", err)
		}
		st.UseReplica(r)
	}
	return st, nil
}

// StoreWhenReady opens the store like Store, retrying with backoff (capped
// at storeMaxBackoff) until the database answers or ctx ends: a process
// restarted while MySQL is down or unreachable waits for it instead of
// exiting. An invalid MYSQL_DSN is not retried.
func StoreWhenReady(ctx context.Context, cfg *config.Config, logger *slog.Logger) (*store.Store, error) {
	backoff := 500 * time.Millisecond
	for attempt := 1; ; attempt++ {
		st, err := Store(ctx, cfg)
		if err == nil {
			return st, nil
		}
		if errors.Is(err, store.ErrInvalidDSN) || errors.Is(err, store.ErrUnsupportedServer) {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("open store: %w (last error: %v)", ctx.Err(), err)
		}
		logger.Warn("mysql not answering; retrying", "attempt", attempt, "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("open store: %w (last error: %v)", ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, storeMaxBackoff)
	}
}

// storeMaxBackoff caps StoreWhenReady's wait between attempts.
const storeMaxBackoff = 5 * time.Second

// TemporalOptions are the client options of the configuration.
func TemporalOptions(cfg *config.Config, logger *slog.Logger) (client.Options, error) {
	// TLS, mTLS, the API key and gRPC metadata: the temporal CLI's
	// variables and TEMPORAL_PROFILE of its configuration file.
	opts, err := envconfig.LoadClientOptions(envconfig.LoadClientOptionsRequest{})
	if err != nil {
		return client.Options{}, fmt.Errorf("temporal client configuration: %w", err)
	}
	opts.HostPort = cfg.TemporalAddress
	opts.Namespace = cfg.TemporalNamespace
	if !cfg.TemporalGzip {
		opts.ConnectionOptions.GrpcCompression = &client.GrpcCompressionNone{}
	}
	opts.Logger = tlog.NewStructuredLogger(logger)
	// A request's X-Request-Id rides on the workflows it starts.
	opts.ContextPropagators = []workflow.ContextPropagator{reqid.Propagator()}
	if cfg.Tracing {
		// Client and worker: the start, the workflow and its activities
		// join the caller's trace through the start's headers.
		tracing, err := temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{})
		if err != nil {
			logger.Warn("temporal tracing", "err", err)
		} else {
			opts.Interceptors = append(opts.Interceptors, tracing)
		}
	}
	return opts, nil
}

func temporalOptions(cfg *config.Config, logger *slog.Logger, extra []TemporalOption) (client.Options, error) {
	opts, err := TemporalOptions(cfg, logger)
	if err != nil {
		return opts, err
	}
	for _, o := range extra {
		o(&opts)
	}
	return opts, nil
}

// Temporal dials Temporal, waiting at most timeout for it to answer.
func Temporal(ctx context.Context, cfg *config.Config, logger *slog.Logger, timeout time.Duration, extra ...TemporalOption) (client.Client, error) {
	dialCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	opts, err := temporalOptions(cfg, logger, extra)
	if err != nil {
		return nil, err
	}
	c, err := client.DialContext(dialCtx, opts)
	if err != nil {
		return nil, fmt.Errorf("dial temporal at %s: %w", cfg.TemporalAddress, err)
	}
	return c, nil
}

// LazyTemporal returns a client that connects on first use, so a process
// starts and serves while Temporal is down.
func LazyTemporal(cfg *config.Config, logger *slog.Logger, extra ...TemporalOption) (client.Client, error) {
	opts, err := temporalOptions(cfg, logger, extra)
	if err != nil {
		return nil, err
	}
	c, err := client.NewLazyClient(opts)
	if err != nil {
		return nil, fmt.Errorf("temporal lazy client: %w", err)
	}
	return c, nil
}
