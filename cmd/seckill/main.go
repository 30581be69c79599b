// Command seckill is the flash-sale backend's single binary:
//
//	seckill api        serve the REST API
//	seckill worker     run the Temporal worker and the inbox relay
//	seckill migrate    apply the database migrations
//	seckill token      mint a JWT for a user (or an admin) to try the API
//	seckill demo       create and warm up a demo sale through the API
//	seckill admin      call the admin API as an operator
//	seckill version    print the build's version and commit
//
// Configuration comes from the environment (see config and docs/configuration.md).
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

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/internal/authtoken"
	"github.com/seckill/seckill/internal/buildinfo"
	"github.com/seckill/seckill/internal/cli"
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
  healthcheck [--url URL]               exit 0 when the API's /readyz answers 200
  admin [--api URL] [--token JWT] SUB   call the admin API (list, create, warmup, pause,
                                        resume, stop, stock, reconcile, appeals)
  version                               print the build's version and commit

"seckill <command> --help" describes a command. Configuration comes from
environment variables (see docs/configuration.md).
`

// action runs a command once its flags are parsed and the configuration read.
type action func(ctx context.Context, cfg *config.Config, stdout io.Writer, logger *slog.Logger) error

// command is one subcommand: its synopsis and its flags, registered before
// anything runs, so "--help" prints them and does nothing else.
type command struct {
	synopsis string
	flags    func(fs *flag.FlagSet) action
	// needs is the configuration it requires (config.LoadFor).
	needs config.Need
	// args: the command takes arguments after its flags.
	args bool
}

var commands = map[string]command{
	"api": {"serve the REST API until SIGINT/SIGTERM", func(*flag.FlagSet) action {
		return func(ctx context.Context, cfg *config.Config, _ io.Writer, logger *slog.Logger) error {
			stopWithin := cfg.ShutdownDelay + cfg.ShutdownTimeout + closeClients
			return serve(ctx, stopWithin, logger.With("component", "api"), func(ctx context.Context, l *slog.Logger) error {
				return runAPI(ctx, cfg, l)
			})
		}
	}, config.NeedAll, false},
	"worker": {"run the Temporal worker and the inbox relay until SIGINT/SIGTERM", func(*flag.FlagSet) action {
		return func(ctx context.Context, cfg *config.Config, _ io.Writer, logger *slog.Logger) error {
			return serve(ctx, cfg.ShutdownTimeout+closeClients, logger.With("component", "worker"), func(ctx context.Context, l *slog.Logger) error {
				return worker.Run(ctx, cfg, l)
			})
		}
	}, config.NeedAll, false},
	"migrate": {"apply the database migrations to MYSQL_DSN", func(*flag.FlagSet) action {
		return func(ctx context.Context, cfg *config.Config, _ io.Writer, logger *slog.Logger) error {
			return migrate(ctx, cfg, logger)
		}
	}, config.NeedDatabase, false},
	"token":       {"print a JWT for a user (or an admin), signed with SECKILL_JWT_SECRET (SECKILL_ADMIN_JWT_SECRET for --admin)", tokenFlags, 0, false},
	"demo":        {"create and warm up a demo sale through the API, print its id", demoFlags, config.NeedAdminSigner, false},
	"healthcheck": {"exit 0 when the API's /readyz answers 200 (an image's health check)", healthcheckFlags, 0, false},
	"admin":       {"call the admin API as an operator: list, create, warmup, pause, resume, stop, stock, reconcile, appeals", adminFlags, 0, true},
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one subcommand and returns the process's exit code: 0, 1 on
// failure, 2 on a usage error. Help goes to stdout and exits 0.
func run(args []string, stdout, stderr io.Writer) int {
	var level slog.LevelVar // LOG_LEVEL, once the configuration is read
	logger := slog.New(telemetry.LogHandler(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: &level})))
	slog.SetDefault(logger)
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	name, rest := args[0], args[1:]
	switch name {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	case "version", "--version":
		fmt.Fprintln(stdout, buildinfo.Read())
		return 0
	}
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "seckill: unknown command %q\n\n%s", name, usage)
		return 2
	}
	fs := flag.NewFlagSet("seckill "+name, flag.ContinueOnError)
	act := cmd.flags(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: seckill %s [flags]\n\n%s.\n", name, cmd.synopsis)
		if hasFlags(fs) {
			fmt.Fprintln(fs.Output(), "\nflags:")
			fs.PrintDefaults()
		}
		fmt.Fprintln(fs.Output(), "\nConfiguration comes from environment variables (see docs/configuration.md).")
	}
	parse := cli.Parse
	if cmd.args {
		parse = cli.ParseArgs
	}
	if code, done := parse(fs, rest, stdout, stderr); done {
		return code
	}

	cfg, err := config.LoadFor(cmd.needs)
	if err != nil {
		logger.Error("load configuration", "err", err)
		return 1
	}
	level.Set(cfg.LogLevel)
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
	if err := act(ctx, cfg, stdout, logger); err != nil {
		logger.Error("seckill "+name+" failed", "err", err)
		return 1
	}
	return 0
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// closeClients is what a stopping api or worker has, past its drain, to
// close its clients (Redis, MySQL, Temporal) and its metrics listener.
const closeClients = 3 * time.Second

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

func tokenFlags(fs *flag.FlagSet) action {
	user := fs.Int64("user", 0, "user id (positive)")
	admin := fs.Bool("admin", false, "mint an admin token (role admin)")
	ttl := fs.Duration("ttl", 24*time.Hour, "validity")
	return func(_ context.Context, cfg *config.Config, stdout io.Writer, _ *slog.Logger) error {
		return token(cfg, *user, *admin, *ttl, stdout)
	}
}

// token prints a JWT per the contract, for trying the API by hand.
func token(cfg *config.Config, user int64, admin bool, ttl time.Duration, stdout io.Writer) error {
	if ttl <= 0 {
		return fmt.Errorf("token: --ttl must be positive, got %s", ttl)
	}
	role, secret, name := authtoken.RoleUser, cfg.JWTSecret, "SECKILL_JWT_SECRET"
	if admin {
		role, secret, name = authtoken.RoleAdmin, cfg.AdminJWTSecret, "SECKILL_ADMIN_JWT_SECRET"
	}
	if len(secret) == 0 {
		return fmt.Errorf("token: %s is required outside development mode", name)
	}
	tok, err := authtoken.Mint(secret, user, role, ttl)
	if err != nil {
		return fmt.Errorf("token: %w", err)
	}
	if _, err := fmt.Fprintln(stdout, tok); err != nil {
		return fmt.Errorf("token: write: %w", err)
	}
	return nil
}
