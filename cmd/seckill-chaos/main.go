// Command seckill-chaos runs seckill's seeded chaos run: two APIs and two
// workers on their own Redis, MariaDB and Temporal, a client workload and a
// nemesis for -duration, a quiet period, then the history checker. It
// writes <out>/<seed>.md and <seed>.png and exits 1 when an invariant broke.
// With -redis cluster, Redis is a three-master Redis Cluster and the report
// is <out>/cluster-<seed>.md and .png; with -db galera, the database is a
// three-node Galera cluster behind HAProxy, the report <out>/galera-<seed>.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/test/chaos"
)

func main() { os.Exit(run()) }

func run() int {
	var (
		seed      = flag.Int64("seed", 1, "seed of the workload and the fault schedule (the same seed replays the same schedule)")
		duration  = flag.Duration("duration", 3*time.Minute, "how long the workload and the nemesis run")
		faults    = flag.String("faults", "all", "comma-separated fault classes, or all: "+strings.Join(chaos.AllFaults, ","))
		out       = flag.String("out", "test/chaos/results", "directory of <seed>.md and <seed>.png")
		work      = flag.String("work", "", "directory of the services' data, logs and the history, always kept (default: a new temp dir, removed after a run without violation)")
		clients   = flag.Int("clients", 16, "concurrent clients")
		redisMode = flag.String("redis", chaos.RedisSingle, "single: one redis-server; cluster: a three-master Redis Cluster (report cluster-<seed>.md)")
		dbMode    = flag.String("db", chaos.DBSingle, "single: one mariadbd; galera: a three-node Galera cluster behind HAProxy, with the database failover faults (report galera-<seed>.md)")
		quiet     = flag.Duration("quiet", 0, "wait after the faults healed (default: longest payment window + two reconciliation passes + 15s)")
		seckill   = flag.String("seckill", "", "the seckill binary (default: go build ./cmd/seckill)")
		temporal  = flag.String("temporal", "", "the Temporal CLI (default: $SECKILL_TEMPORAL_BIN or .data/bin/temporal)")
		server    = flag.String("temporal-server", "", "scripts/temporal-server.sh: run on the production-shaped Temporal (PostgreSQL, 8 shards) instead of the dev server (report server-<seed>.md)")
		plan      = flag.Bool("plan", false, "print the fault schedule of -seed and -duration, and exit")
		recheck   = flag.String("recheck", "", "run the checker again over the history and final state saved in this work dir, and exit")
	)
	flag.Parse()
	logf := runLog()

	classes, err := faultClasses(*faults)
	if err != nil {
		fmt.Fprintf(os.Stderr, "seckill-chaos: %v\n", err)
		return 2
	}
	if err := checkModes(*redisMode, *dbMode); err != nil {
		fmt.Fprintf(os.Stderr, "seckill-chaos: %v\n", err)
		return 2
	}
	opts := chaos.Options{Seed: *seed, Duration: *duration, Faults: classes, Clients: *clients, Quiet: *quiet, Redis: *redisMode, DB: *dbMode,
		TemporalServer: *server}
	if *recheck != "" {
		res, err := chaos.Recheck(*recheck, classes)
		if err != nil {
			fmt.Fprintf(os.Stderr, "seckill-chaos: %v\n", err)
			return 1
		}
		if err := res.Write(*out); err != nil {
			fmt.Fprintf(os.Stderr, "seckill-chaos: %v\n", err)
			return 1
		}
		return summarize(res, *faults)
	}
	if *plan {
		for _, p := range chaos.Schedule(*seed, *duration, opts.FaultsFor(classes)) {
			fmt.Printf("#%-3d at %7.1fs for %6.1fs  %-20s pick %d\n", p.ID, p.At.Seconds(), p.Span.Seconds(), p.Class, p.Pick)
		}
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	madeWork := *work == ""
	if err := fillPaths(*seed, work, seckill, temporal); err != nil {
		fmt.Fprintf(os.Stderr, "seckill-chaos: %v\n", err)
		return 1
	}
	logf("seed %d, %s, redis %s, db %s, work dir %s", *seed, *duration, *redisMode, *dbMode, *work)
	opts.WorkDir, opts.OutDir, opts.SeckillBin, opts.TemporalBin, opts.Logf = *work, *out, *seckill, *temporal, logf
	res, err := chaos.Run(ctx, opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "seckill-chaos: seed %d: %v (logs in %s)\n", *seed, err, *work)
		return 1
	}
	code := summarize(res, *faults)
	if code == 0 && madeWork {
		// A run's services leave hundreds of megabytes; one that broke
		// nothing has its report, and a temp dir per run fills a disk.
		if err := os.RemoveAll(*work); err != nil {
			fmt.Fprintf(os.Stderr, "seckill-chaos: remove work dir: %v\n", err)
			return 1
		}
	}
	return code
}

// runLog is the run's own log; the harness's libraries log errors only.
func runLog() func(format string, args ...any) {
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	// The proxies warn at every refused dial while a fault holds a service
	// down: thousands of lines that say what the history already records.
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	// Likewise the MySQL driver's notes on connections a fault broke.
	if err := mysql.SetLogger(log.New(io.Discard, "", 0)); err != nil {
		logger.Warn("silence the MySQL driver's log", "err", err)
	}
	return func(format string, args ...any) { logger.Info(fmt.Sprintf(format, args...)) }
}

// checkModes refuses a -redis or -db the run does not know.
func checkModes(redisMode, dbMode string) error {
	if redisMode != chaos.RedisSingle && redisMode != chaos.RedisCluster {
		return fmt.Errorf("-redis %q: single or cluster", redisMode)
	}
	if dbMode != chaos.DBSingle && dbMode != chaos.DBGalera {
		return fmt.Errorf("-db %q: single or galera", dbMode)
	}
	return nil
}

// faultClasses parses -faults: all, or a comma-separated list of known
// classes.
func faultClasses(list string) ([]string, error) {
	if list == "all" {
		return chaos.AllFaults, nil
	}
	var classes []string
	for _, c := range strings.Split(list, ",") {
		c = strings.TrimSpace(c)
		if c == "" {
			continue
		}
		if !slices.Contains(chaos.AllFaults, c) {
			return nil, fmt.Errorf("unknown fault class %q (known: %s)", c, strings.Join(chaos.AllFaults, ", "))
		}
		classes = append(classes, c)
	}
	return classes, nil
}

// fillPaths gives the paths not set on the command line their defaults: a
// new work dir, bin/seckill built into it, the Temporal CLI of
// $SECKILL_TEMPORAL_BIN or .data/bin/temporal.
func fillPaths(seed int64, work, seckill, temporal *string) error {
	if *work == "" {
		dir, err := os.MkdirTemp("", fmt.Sprintf("seckill-chaos-%d-", seed))
		if err != nil {
			return fmt.Errorf("work dir: %w", err)
		}
		*work = dir
	}
	if *seckill == "" {
		*seckill = filepath.Join(*work, "seckill")
		cmd := exec.Command("go", "build", "-o", *seckill, "./cmd/seckill")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go build ./cmd/seckill: %w", err)
		}
	}
	if *temporal == "" {
		*temporal = os.Getenv("SECKILL_TEMPORAL_BIN")
		if *temporal == "" {
			*temporal = filepath.Join(".data", "bin", "temporal")
		}
	}
	if _, err := os.Stat(*temporal); err != nil {
		return fmt.Errorf("the Temporal CLI (go tool task temporal:build): %w", err)
	}
	return nil
}

// summarize prints a run's figures and its violations with the history
// around each; it answers the exit code.
func summarize(res *chaos.Result, faults string) int {
	seed, duration := res.Opts.Seed, res.Opts.Duration
	c := chaos.Count(res.History)
	fmt.Printf("seed %d: %d requests, %d 202s, %d payments, %d faults; report %s\n", seed, c.Requests, c.Accepted, c.Paid, c.Faults, res.Report)
	if len(res.Violations) == 0 {
		fmt.Println("no violation")
		return 0
	}
	redisFlag := ""
	if res.Opts.Cluster() {
		redisFlag = " -redis cluster"
	}
	if res.Opts.Galera() {
		redisFlag += " -db galera"
	}
	fmt.Printf("%d VIOLATIONS (seed %d; replay: -seed %d -duration %s%s -faults %s)\n", len(res.Violations), seed, seed, duration, redisFlag, faults)
	fmt.Println("fault schedule:")
	for _, f := range chaos.Spans(res.History) {
		fmt.Printf("  #%d %s %s at %.1fs for %.1fs\n", f.ID, f.Class, f.Target, f.From.Sub(res.Started).Seconds(), f.To.Sub(f.From).Seconds())
	}
	for i, v := range res.Violations {
		if i == 10 {
			fmt.Printf("... %d more in %s\n", len(res.Violations)-i, res.Report)
			break
		}
		fmt.Printf("\n%s\n", v)
		for _, e := range chaos.Around(res.History, v, 20*time.Second, 12) {
			fmt.Println("  " + chaos.FormatEvent(e, res.Started))
		}
	}
	return 1
}
