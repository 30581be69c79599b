package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof" // served only on SECKILL_PPROF_ADDR in development mode
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/internal/buildinfo"
	"github.com/seckill/seckill/internal/conn"
	"github.com/seckill/seckill/lua"
)

// newRegistry is the API's metrics registry, holding the build's
// seckill_build_info from the start (a fresh registry has nothing it could
// clash with).
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(buildinfo.Collector())
	return reg
}

// runAPI serves the API on cfg.APIAddr until ctx is cancelled, then shuts down
// gracefully: stop accepting, finish in-flight requests within
// cfg.ShutdownTimeout, drain the workflow starter best-effort.
func runAPI(ctx context.Context, cfg *config.Config, logger *slog.Logger) error {
	st, err := conn.StoreWhenReady(ctx, cfg, logger)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped before the database answered
		}
		return fmt.Errorf("api: %w", err)
	}
	defer func() { _ = st.Close() }()
	redisClient, err := conn.Redis(cfg)
	if err != nil {
		return fmt.Errorf("api: %w", err)
	}
	rdb := lua.NewClient(redisClient)
	defer func() { _ = rdb.Close() }()
	reg := newRegistry()
	if err := rdb.InstrumentScripts(reg); err != nil {
		return fmt.Errorf("api: %w", err)
	}
	temporalMetrics, closeMetrics := conn.TemporalMetrics(reg, logger)
	defer func() { _ = closeMetrics.Close() }()
	tc, err := conn.LazyTemporal(cfg, logger, conn.WithMetrics(temporalMetrics))
	if err != nil {
		return fmt.Errorf("api: %w", err)
	}
	defer tc.Close()

	var idp *auth.IdentityProvider
	if cfg.JWKSURL != "" {
		if idp, err = auth.NewIdentityProvider(ctx, cfg.JWKSURL, cfg.JWTIssuer, cfg.JWTAudience,
			auth.IdentityClaims{User: cfg.JWTUserClaim, Role: cfg.JWTRoleClaim}, 10*time.Second); err != nil {
			return fmt.Errorf("api: %w", err)
		}
	}
	srv := api.NewServer(api.Deps{Config: cfg, Logger: logger, Store: st, Redis: rdb, Temporal: tc, Registry: reg, IdentityProvider: idp})
	app := srv.App
	if cfg.PprofAddr != "" {
		go func() {
			srv := &http.Server{Addr: cfg.PprofAddr, ReadHeaderTimeout: 5 * time.Second}
			logger.Info("pprof listening (development mode)", "addr", cfg.PprofAddr)
			if err := srv.ListenAndServe(); err != nil {
				logger.Warn("pprof server", "err", err)
			}
		}()
	}
	ln, err := net.Listen("tcp", cfg.APIAddr)
	if err != nil {
		return fmt.Errorf("api: listen on %s: %w", cfg.APIAddr, err)
	}
	logger.Info("api listening", "addr", ln.Addr().String(), "env", cfg.Env, "max_connections", srv.MaxConns())
	served := make(chan error, 2)
	go func() { served <- srv.Serve(ln) }()
	if srv.Admin != nil {
		aln, err := net.Listen("tcp", cfg.AdminAddr)
		if err != nil {
			_ = app.Shutdown()
			return fmt.Errorf("api: listen on ADMIN_ADDR %s: %w", cfg.AdminAddr, err)
		}
		logger.Info("admin listening", "addr", aln.Addr().String())
		go func() {
			if err := srv.ServeAdmin(aln); err != nil {
				served <- fmt.Errorf("admin listener: %w", err)
			}
		}()
		defer func() { _ = srv.Admin.ShutdownWithTimeout(cfg.ShutdownTimeout) }()
	}
	select {
	case err := <-served:
		return fmt.Errorf("api: serve: %w", err)
	case <-ctx.Done():
	}
	logger.Info("api shutting down", "timeout", cfg.ShutdownTimeout)
	if err := app.ShutdownWithTimeout(cfg.ShutdownTimeout); err != nil {
		return fmt.Errorf("api: shutdown: %w", err)
	}
	if err := <-served; err != nil {
		return fmt.Errorf("api: serve: %w", err)
	}
	return nil
}
