// Command seckill-bench runs seckill's benchmarks against running Redis,
// MariaDB and Temporal servers: it starts its own API and worker processes
// (bin/seckill) on a task queue of its own, runs the ten scenarios with
// their baselines, and writes test/bench/results/latest.{json,md,png}. It exits
// non-zero on any correctness violation, never on a slow figure.
//
//	seckill-bench [flags]             run the benchmarks
//	seckill-bench baseline [flags]    serve the bare Fiber + EVALSHA baseline
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/cli"
	"github.com/seckill/seckill/test/bench"
)

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

const usage = `usage: seckill-bench [flags]            run the benchmarks
       seckill-bench baseline [flags]   serve the bare Fiber + EVALSHA baseline

"seckill-bench --help" and "seckill-bench baseline --help" list the flags.
`

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

// realMain parses the command line before anything runs, so --help prints
// the usage and exits 0 with no side effect; 2 is a usage error, 1 a failure.
func realMain(args []string, stdout, stderr io.Writer) int {
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	slog.SetDefault(logger)
	name, synopsis := "seckill-bench", "run the benchmarks against the running services"
	var fs *flag.FlagSet
	var act func(context.Context) error
	if len(args) > 0 && args[0] == "baseline" {
		name, synopsis = "seckill-bench baseline", "serve the bare Fiber + EVALSHA baseline until SIGINT/SIGTERM"
		fs = flag.NewFlagSet(name, flag.ContinueOnError)
		act = baselineFlags(fs)
		args = args[1:]
	} else {
		fs = flag.NewFlagSet(name, flag.ContinueOnError)
		act = runFlags(fs, logger)
	}
	fs.Usage = func() {
		if name == "seckill-bench" {
			fmt.Fprint(fs.Output(), usage)
		} else {
			fmt.Fprintf(fs.Output(), "usage: %s [flags]\n", name)
		}
		fmt.Fprintf(fs.Output(), "\n%s.\n\nflags:\n", synopsis)
		fs.PrintDefaults()
	}
	if code, done := cli.Parse(fs, args, stdout, stderr); done {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := act(ctx); err != nil {
		logger.Error(name, "err", err)
		return 1
	}
	return 0
}

func runFlags(fs *flag.FlagSet, logger *slog.Logger) func(context.Context) error {
	o := bench.Options{Logger: logger}
	fs.StringVar(&o.SeckillBin, "seckill", "bin/seckill", "the seckill binary to start as API and worker")
	fs.StringVar(&o.RedisAddr, "redis", env("REDIS_ADDR", "127.0.0.1:6379"), "Redis address")
	fs.StringVar(&o.MySQLDSN, "mysql", env("MYSQL_DSN", "root@tcp(127.0.0.1:3306)/seckill"), "MariaDB DSN")
	fs.StringVar(&o.TemporalAddress, "temporal", env("TEMPORAL_ADDRESS", "127.0.0.1:7233"), "Temporal frontend")
	fs.DurationVar(&o.Dur, "dur", 5*time.Second, "length of each timed run")
	fs.DurationVar(&o.ChurnDur, "churn-dur", 10*time.Minute, "length of the churn soak (scenario 9)")
	fs.IntVar(&o.MarketSales, "market-sales", 10_000, "idle sales scenario 13 creates and warms")
	fs.IntVar(&o.MarketRounds, "market-rounds", 3, "rounds of scenario 13's two paths with few sales live and with all of them (medians compared)")
	fs.IntVar(&o.BurstUsers, "burst-users", 100_000, "distinct users of the flash-sale burst")
	fs.Int64Var(&o.BurstStock, "burst-stock", 1_000, "stock of the flash-sale burst")
	fallback, _ := strconv.ParseFloat(env("SECKILL_FALLBACK_RPS", "500"), 64)
	fs.Float64Var(&o.FallbackRPS, "fallback-rps", fallback, "database path rate limit")
	out := fs.String("out", "test/bench/results", "results directory")
	scenarios := fs.String("scenarios", "", "comma-separated scenario numbers to run, e.g. 5 or 1,3 (default: all)")
	fs.StringVar(&o.LogDir, "logs", "", "directory of the started processes' logs (default: a temp dir)")
	fs.StringVar(&o.ProfileDir, "profile", "", "directory for CPU profiles of scenario 3's API and worker over the burst and drain (api.pprof, worker.pprof), of scenario 2's API over its closed run (api-instock.pprof), of scenario 13's worker over its idle windows (market-idle-before.pprof, market-idle-with-sales.pprof) and of its two paths' APIs over each paths run (market-sold-out-....pprof, market-in-stock-....pprof)")
	stacks := fs.String("temporal-stacks", "", "scenario 12 alone: the burst on each Temporal stack in turn, name=host:port,... (e.g. dev=127.0.0.1:7233,server-8=127.0.0.1:7533)")
	ab := fs.String("ab", "", "scenario 12 alone as an A/B: the burst with the API and worker given KEY=VALUE, then without, on -temporal")
	db := fs.String("db", "", "scenarios 3 and 5 on each database tier in turn, e.g. single,galera: single is one MariaDB, galera three nodes behind HAProxy, each started by the run with the same settings; ratios to the first")
	rounds := fs.Int("rounds", 3, "with -db: rounds of the tiers in turn (ABAB...), the figures' medians compared")
	return func(ctx context.Context) error {
		var variants []bench.Stack
		var err error
		switch {
		case *db != "" && (*stacks != "" || *ab != ""):
			return fmt.Errorf("-db, -temporal-stacks or -ab: one of them")
		case *db != "":
			tiers, err := bench.ParseDatabases(*db)
			if err != nil {
				return err
			}
			if *rounds < 1 {
				return fmt.Errorf("-rounds %d: at least 1", *rounds)
			}
			return run(ctx, logger, o, *out, *scenarios, func(ctx context.Context, o bench.Options) (*bench.Report, error) {
				return bench.RunDatabases(ctx, o, tiers, *rounds)
			})
		case *stacks != "" && *ab != "":
			return fmt.Errorf("-temporal-stacks or -ab, not both")
		case *stacks != "":
			variants, err = bench.ParseStacks(*stacks)
		case *ab != "":
			variants, err = bench.ABStacks(*ab, o.TemporalAddress)
		}
		if err != nil {
			return err
		}
		runner := bench.Run
		if len(variants) > 0 {
			runner = func(ctx context.Context, o bench.Options) (*bench.Report, error) {
				return bench.RunStacks(ctx, o, variants)
			}
		}
		return run(ctx, logger, o, *out, *scenarios, runner)
	}
}

// run runs the benchmarks with runner and writes the report.
func run(ctx context.Context, logger *slog.Logger, o bench.Options, out, scenarios string, runner func(context.Context, bench.Options) (*bench.Report, error)) error {
	for _, id := range strings.Split(scenarios, ",") {
		if id = strings.TrimSpace(id); id != "" {
			if n, err := strconv.Atoi(id); err != nil || n < 1 || n > 13 || n == 12 || strconv.Itoa(n) != id {
				return fmt.Errorf("-scenarios: unknown scenario %q (1 to 11 or 13; 12 is -temporal-stacks)", id)
			}
			o.Scenarios = append(o.Scenarios, id)
		}
	}
	if o.LogDir == "" {
		d, err := os.MkdirTemp("", "seckill-bench-")
		if err != nil {
			return fmt.Errorf("log dir: %w", err)
		}
		o.LogDir = d
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("own path: %w", err)
	}
	o.SelfBin = self
	if o.SeckillBin, err = filepath.Abs(o.SeckillBin); err != nil {
		return fmt.Errorf("seckill binary: %w", err)
	}
	logger.Info("bench starting", "redis", o.RedisAddr, "temporal", o.TemporalAddress, "logs", o.LogDir)
	start := time.Now()
	rep, runErr := runner(ctx, o)
	if rep != nil && len(rep.Scenarios) > 0 {
		if err := rep.Write(out); err != nil {
			return err
		}
		fmt.Println(rep.Markdown())
		logger.Info("bench written", "dir", out, "took", time.Since(start).Round(time.Second))
	}
	if runErr != nil {
		return runErr
	}
	if len(rep.Violations) > 0 {
		return fmt.Errorf("%d correctness violation(s): %v", len(rep.Violations), rep.Violations)
	}
	return nil
}

func baselineFlags(fs *flag.FlagSet) func(context.Context) error {
	addr := fs.String("addr", "127.0.0.1:8099", "listen address")
	redisAddr := fs.String("redis", "127.0.0.1:6379", "Redis address")
	sale := fs.Int64("sale", 0, "warmed sale id")
	epoch := fs.Int64("epoch", 1, "the sale's epoch")
	return func(ctx context.Context) error { return baseline(ctx, *addr, *redisAddr, *sale, *epoch) }
}

// baseline serves the bare Fiber + EVALSHA handler until signalled.
func baseline(ctx context.Context, addr, redisAddr string, sale, epoch int64) error {
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{redisAddr}, PoolSize: 128})
	defer rdb.Close()
	app := bench.BaselineApp(rdb, sale, epoch)
	errc := make(chan error, 1)
	go func() { errc <- app.Listen(addr) }()
	select {
	case err := <-errc:
		return fmt.Errorf("baseline listen: %w", err)
	case <-ctx.Done():
		return app.ShutdownWithTimeout(5 * time.Second)
	}
}
