// Command seckill is the flash-sale backend's single binary:
//
//	seckill api        serve the REST API
//	seckill worker     run the Temporal worker and the inbox relay
//	seckill migrate    apply the database migrations
//	seckill token      mint a JWT for a user (or an admin) to try the API
//	seckill demo       create and warm up a demo sale through the API
//
// Configuration comes from the environment (see config and the README).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/internal/authtoken"
	"github.com/seckill/seckill/internal/conn"
	"github.com/seckill/seckill/internal/telemetry"
	"github.com/seckill/seckill/worker"
)

const usage = `usage: seckill <command> [flags]

commands:
  api                                   serve the REST API
  worker                                run the Temporal worker and the inbox relay
  migrate                               apply the database migrations
  token --user N [--admin] [--ttl 24h]  print a JWT for user N
  demo [--api URL] [--id-file PATH]     create and warm up a demo sale, print its id
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one subcommand and returns the process's exit code.
func run(args []string, stdout, stderr io.Writer) int {
	logger := slog.New(slog.NewJSONHandler(stderr, nil))
	slog.SetDefault(logger)
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, usage)
		return 2
	}
	name, rest := args[0], args[1:]
	switch name {
	case "api", "worker", "migrate", "token", "demo":
	default:
		fmt.Fprintf(stderr, "seckill: unknown command %q\n\n%s", name, usage)
		return 2
	}

	cfg, err := config.Load()
	if err != nil {
		logger.Error("load configuration", "err", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if name == "api" || name == "worker" {
		// Traces, when the OTEL_* variables ask for them.
		shutdown, err := telemetry.Setup(ctx, cfg, "seckill-"+name)
		if err != nil {
			logger.Error("set up tracing", "err", err)
			return 1
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := shutdown(sctx); err != nil {
				logger.Warn("flush traces", "err", err)
			}
		}()
	}

	switch name {
	case "api":
		err = serve(ctx, cfg.ShutdownTimeout, logger.With("component", "api"), func(ctx context.Context, l *slog.Logger) error {
			return api.Run(ctx, cfg, l)
		})
	case "worker":
		err = serve(ctx, cfg.ShutdownTimeout, logger.With("component", "worker"), func(ctx context.Context, l *slog.Logger) error {
			return worker.Run(ctx, cfg, l)
		})
	case "migrate":
		err = migrate(ctx, cfg, logger)
	case "token":
		err = token(cfg, rest, stdout, stderr)
	case "demo":
		err = demo(ctx, cfg, rest, stdout, stderr, logger)
	}
	if errors.Is(err, flag.ErrHelp) {
		return 2
	}
	if err != nil {
		logger.Error("seckill "+name+" failed", "err", err)
		return 1
	}
	return 0
}

// serve runs a long-lived component until ctx is cancelled, then gives it
// shutdownTimeout to return. A component that stops because it was asked to
// is a success.
func serve(ctx context.Context, shutdownTimeout time.Duration, logger *slog.Logger, fn func(context.Context, *slog.Logger) error) error {
	done := make(chan error, 1)
	go func() { done <- fn(ctx, logger) }()
	select {
	case err := <-done:
		if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled)) {
			return nil
		}
		if err == nil {
			return errors.New("stopped unexpectedly")
		}
		return err
	case <-ctx.Done():
	}
	logger.Info("shutting down", "timeout", shutdownTimeout.String())
	timer := time.NewTimer(shutdownTimeout)
	defer timer.Stop()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("shut down: %w", err)
		}
		logger.Info("stopped")
		return nil
	case <-timer.C:
		return fmt.Errorf("did not stop within the shutdown timeout of %s", shutdownTimeout)
	}
}

// migrate applies the schema migrations (conn.Store does) and closes.
func migrate(ctx context.Context, cfg *config.Config, logger *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	st, err := conn.Store(ctx, cfg)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := st.Close(); err != nil {
		return fmt.Errorf("migrate: close store: %w", err)
	}
	logger.Info("migrations applied")
	return nil
}

// token prints a JWT per the contract, for trying the API by hand.
func token(cfg *config.Config, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	user := fs.Int64("user", 0, "user id (positive)")
	admin := fs.Bool("admin", false, "mint an admin token (role admin)")
	ttl := fs.Duration("ttl", 24*time.Hour, "validity")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("token: unexpected arguments %q", fs.Args())
	}
	if *ttl <= 0 {
		return fmt.Errorf("token: --ttl must be positive, got %s", *ttl)
	}
	role := authtoken.RoleUser
	if *admin {
		role = authtoken.RoleAdmin
	}
	tok, err := authtoken.Mint(cfg.JWTSecret, *user, role, *ttl)
	if err != nil {
		return fmt.Errorf("token: %w", err)
	}
	if _, err := fmt.Fprintln(stdout, tok); err != nil {
		return fmt.Errorf("token: write: %w", err)
	}
	return nil
}
