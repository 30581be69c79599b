package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof" // served only on SECKILL_PPROF_ADDR in development mode
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/backend"
	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/internal/buildinfo"
	"github.com/seckill/seckill/internal/conn"
	"github.com/seckill/seckill/redisgateway"
)

// newRegistry is the API's metrics registry, holding the build's
// seckill_build_info from the start (a fresh registry has nothing it could
// clash with).
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(buildinfo.Collector())
	return reg
}

// runAPI connects the API's clients and serves it until ctx is cancelled
// (serveAPI), then closes them.
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
	rdb := redisgateway.NewClient(redisClient)
	defer func() { _ = rdb.Close() }()
	reg := newRegistry()
	if err := rdb.InstrumentScripts(reg); err != nil {
		return fmt.Errorf("api: %w", err)
	}
	if err := conn.InstrumentReplica(reg, st); err != nil {
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
	var operators *auth.AdminProvider
	if cfg.AdminJWKSURL != "" {
		if operators, err = auth.NewAdminProvider(ctx, cfg.AdminJWKSURL, cfg.AdminJWTIssuer, cfg.AdminJWTAudience,
			auth.RoleGrant{Claim: cfg.AdminJWTRoleClaim, Value: cfg.AdminJWTRole}, 10*time.Second); err != nil {
			return fmt.Errorf("api: %w", err)
		}
	}
	services := backend.Build(backend.Deps{Config: cfg, Logger: logger, Store: st, Redis: rdb, Temporal: tc, Registry: reg})
	srv := api.NewServer(api.Deps{Config: cfg, Logger: logger, Services: services, IdentityProvider: idp, AdminIdentityProvider: operators})
	if cfg.PprofAddr != "" {
		go func() {
			srv := &http.Server{Addr: cfg.PprofAddr, ReadHeaderTimeout: 5 * time.Second}
			logger.Info("pprof listening (development mode)", "addr", cfg.PprofAddr)
			if err := srv.ListenAndServe(); err != nil {
				logger.Warn("pprof server", "err", err)
			}
		}()
	}
	return serveAPI(ctx, cfg, srv, logger)
}

// serveAPI serves srv on cfg.APIAddr (and ADMIN_ADDR) until ctx is
// cancelled, then stops it in two steps: for cfg.ShutdownDelay it keeps
// serving while it fails /readyz and closes each connection after its
// answer (api.Server.Drain), so load balancers and keep-alive clients
// move to other instances before the listener closes; then it stops
// accepting and finishes what is in flight within cfg.ShutdownTimeout.
func serveAPI(ctx context.Context, cfg *config.Config, srv *api.Server, logger *slog.Logger) error {
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
			return errors.Join(fmt.Errorf("api: listen on ADMIN_ADDR %s: %w", cfg.AdminAddr, err), srv.Shutdown(context.Background()))
		}
		logger.Info("admin listening", "addr", aln.Addr().String())
		go func() {
			if err := srv.ServeAdmin(aln); err != nil {
				served <- fmt.Errorf("admin listener: %w", err)
			}
		}()
	}
	select {
	case err := <-served:
		return errors.Join(fmt.Errorf("api: serve: %w", err), srv.Shutdown(context.Background()))
	case <-ctx.Done():
	}
	srv.Drain()
	logger.Info("api draining", "delay", cfg.ShutdownDelay.String(), "timeout", cfg.ShutdownTimeout.String())
	drainDelay(cfg.ShutdownDelay, logger)
	logger.Info("api shutting down: no new connections", "timeout", cfg.ShutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("api: shutdown: %w", err)
	}
	if err := <-served; err != nil {
		return fmt.Errorf("api: serve: %w", err)
	}
	return nil
}

// drainDelay waits out the shutdown delay; a second SIGINT or SIGTERM
// ends it early (an operator who wants the instance gone now).
func drainDelay(delay time.Duration, logger *slog.Logger) {
	if delay <= 0 {
		return
	}
	again := make(chan os.Signal, 1)
	signal.Notify(again, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(again)
	timer := time.NewTimer(delay)
	defer timer.Stop()
	select {
	case <-timer.C:
	case sig := <-again:
		logger.Info("api: second signal, shutdown delay cut short", "signal", sig.String())
	}
}
