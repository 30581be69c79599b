package bench

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	batchpb "go.temporal.io/api/batch/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	seckill "github.com/seckill/seckill/client"
	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/authtoken"
	"github.com/seckill/seckill/internal/testkit/proc"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/sales"
	"github.com/seckill/seckill/store"
)

// Options configure a bench run.
type Options struct {
	SeckillBin string // bin/seckill, started as the API and the worker
	SelfBin    string // this binary, started with `baseline` for scenario 2
	RedisAddr  string
	MySQLDSN   string
	// MySQLPorts are the ports of the mariadbd processes behind MySQLDSN
	// whose CPU scenario 3 meters; empty: the DSN's own port.
	MySQLPorts      []string
	TemporalAddress string
	LogDir          string
	Dur             time.Duration // length of each timed run
	BurstUsers      int
	BurstStock      int64
	HelloN          int
	FallbackRPS     float64
	// ChurnDur is the length of the churn soak (scenario 9).
	ChurnDur time.Duration
	// MarketSales is how many idle sales scenario 13 creates and warms.
	MarketSales int
	// MarketRounds is how many rounds of its two paths scenario 13 runs
	// with few sales live and with all of them; it compares the medians.
	MarketRounds int
	// Scenarios selects scenarios by number ("1".."11", "13"); empty runs all.
	Scenarios []string
	// ProfileDir, when set, receives CPU profiles of scenario 3's API and
	// worker over its burst and drain (api.pprof, worker.pprof), and of
	// scenario 2's API over its closed run (api-instock.pprof).
	ProfileDir string
	// SaleIDFloor is the least id of this run's sales: runs on several
	// databases share Redis and Temporal, where a sale is known by its id
	// alone, so each run's ids follow the last run's.
	SaleIDFloor int64
	// Env overrides the API's and worker's environment (an A/B variant).
	Env    map[string]string
	Logger *slog.Logger
}

// want reports whether scenario id is selected.
func (o Options) want(id string) bool {
	if len(o.Scenarios) == 0 {
		return true
	}
	for _, s := range o.Scenarios {
		if s == id {
			return true
		}
	}
	return false
}

// runner holds a bench run's connections and bookkeeping.
type runner struct {
	o        Options
	pprofURL string // the scenario 3 API's profiler (Options.ProfileDir)
	st       *store.Store
	rdb      redis.UniversalClient
	tc       client.Client
	scripts  *redisgateway.Scripts
	rep      *Report
	nextUser int64
	stamp    string
	saleIDs  []int64 // every sale this run created, torn down at the end
	// twinSaleIDs are the sales of scenario 13's twin, in a database of
	// its own: the cleanup terminates their workflows with the run's.
	twinSaleIDs []int64
	procs       []*Proc
	adminMu     sync.Mutex
	admins      map[string]*seckill.Client // admin, by API base URL
}

// Run runs every scenario and returns the report. A correctness violation
// is listed in Report.Violations (the caller exits non-zero); slow figures
// are only reported.
func Run(ctx context.Context, o Options) (*Report, error) {
	r := &runner{o: o, scripts: redisgateway.New(), stamp: strconv.FormatInt(time.Now().Unix(), 36)}
	r.nextUser = time.Now().UnixMilli() % 1_000_000_000 * 1000
	r.rep = &Report{GeneratedAt: time.Now().UTC(), Machine: machine(), Client: "fasthttp.Client, MaxConnsPerHost = connections; load generator in the same host"}
	if err := r.connect(ctx); err != nil {
		return nil, err
	}
	defer r.close()
	for _, st := range r.stages() {
		if slices.ContainsFunc(st.ids, o.want) {
			if err := st.run(ctx); err != nil {
				return r.rep, err
			}
		}
	}
	ordered := make([]Scenario, 0, len(r.rep.Scenarios))
	for _, id := range []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "13"} {
		for _, s := range r.rep.Scenarios {
			if s.ID == id || strings.HasPrefix(s.ID, id+" ") {
				ordered = append(ordered, s)
			}
		}
	}
	r.rep.Scenarios = ordered
	for _, id := range r.saleIDs {
		if id < fakeSaleBase {
			r.rep.lastSaleID = max(r.rep.lastSaleID, id)
		}
	}
	return r.rep, nil
}

// stage runs the scenarios ids (the wanted ones among them) on processes
// of its own.
type stage struct {
	ids []string
	run func(context.Context) error
}

// stages are the bench's stages in the order they run.
func (r *runner) stages() []stage {
	return []stage{
		// Scenario 5 runs its own API and worker, both with Redis behind a
		// cuttable proxy, after the shared stack stopped: a worker that
		// reaches Redis would resynchronise the sale back to Redis mode in
		// the middle of the run.
		{[]string{"1", "3"}, r.sharedStack},
		{[]string{"6", "7", "8"}, r.notify},
		{[]string{"4"}, r.mysql},
		{[]string{"5"}, r.fallback},
		{[]string{"9"}, r.churn},
		{[]string{"10"}, r.fairness},
		{[]string{"11"}, r.tracing},
		{[]string{"13"}, r.market},
		// The in-stock scenario runs last on an API whose task queue nobody
		// polls, with no worker running, so its workflow starts leave no
		// backlog of orders behind for the other scenarios.
		{[]string{"2"}, r.inStock},
	}
}

// sharedStack runs scenarios 1 and 3 on one API and worker.
func (r *runner) sharedStack(ctx context.Context) error {
	env := r.env("bench-" + r.stamp)
	if r.o.ProfileDir != "" {
		addr, err := proc.FreeAddr()
		if err != nil {
			return err
		}
		r.pprofURL, env["SECKILL_PPROF_ADDR"] = "http://"+addr, addr
	}
	api, worker, err := r.startStackEnv(ctx, "api", "worker", env)
	if err != nil {
		return err
	}
	defer worker.Stop()
	defer api.Stop()
	if r.o.want("1") {
		if err := r.soldOut(ctx, api); err != nil {
			return err
		}
	}
	if r.o.want("3") {
		return r.burst(ctx, api, worker)
	}
	return nil
}

func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "model name") {
				if i := strings.Index(line, ":"); i > 0 {
					model = strings.TrimSpace(line[i+1:])
				}
				break
			}
		}
	}
	return fmt.Sprintf("%d cores (%s), %s/%s, %s; Redis, MariaDB, Temporal dev server, API, worker and load generator all on this host", runtime.NumCPU(), model, runtime.GOOS, runtime.GOARCH, runtime.Version())
}

func (r *runner) connect(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	dsn, err := BenchDSN(cctx, r.o.MySQLDSN)
	if err != nil {
		return err
	}
	r.o.MySQLDSN = dsn // the started API and workers use it too
	if r.st, err = openBenchStore(cctx, r.o.MySQLDSN, max(r.o.SaleIDFloor, benchSaleBase)); err != nil {
		return err
	}
	r.rdb = redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{r.o.RedisAddr}, PoolSize: 256})
	if err := r.rdb.Ping(cctx).Err(); err != nil {
		return fmt.Errorf("redis %s: %w", r.o.RedisAddr, err)
	}
	tc, err := client.DialContext(cctx, client.Options{HostPort: r.o.TemporalAddress, Logger: quietLogger{}})
	if err != nil {
		return fmt.Errorf("temporal %s: %w", r.o.TemporalAddress, err)
	}
	r.tc = tc
	return nil
}

// close stops the processes and tears the bench's sales down: Redis keys
// deleted, sales marked finished, their workflows terminated.
func (r *runner) close() {
	for _, p := range r.procs {
		p.Stop()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	own := r.ownSaleIDs(ctx)
	for _, id := range own {
		if id < fakeSaleBase {
			if _, err := r.st.SetSaleControl(ctx, id, domain.ControlStopped); err != nil {
				r.o.Logger.Warn("stop bench sale", "sale_id", id, "err", err)
			}
			if err := sales.Teardown(ctx, r.st, redisgateway.NewClient(r.rdb), id); err != nil {
				r.o.Logger.Warn("tear down bench sale", "sale_id", id, "err", err)
			}
			continue
		}
		for _, k := range redisgateway.SaleKeys(id).All() {
			if err := r.rdb.Del(ctx, k).Err(); err != nil {
				r.o.Logger.Warn("delete baseline key", "key", k, "err", err)
			}
		}
	}
	r.terminate(ctx, own)
	r.tc.Close()
	_ = r.rdb.Close()
	_ = r.st.Close()
}

// terminate ends every running workflow of the sales own (ownSaleIDs) and
// of scenario 13's twin (its database gone by now; its ids are its run's
// alone, twinSaleFloor) in one server-side batch (the dev server runs one
// batch at a time).
func (r *runner) terminate(ctx context.Context, own []int64) {
	var ids []string
	for _, id := range append(slices.Clone(own), r.twinSaleIDs...) {
		if id < fakeSaleBase {
			ids = append(ids, strconv.FormatInt(id, 10))
		}
	}
	if len(ids) == 0 {
		return
	}
	_, err := r.tc.WorkflowService().StartBatchOperation(ctx, &workflowservice.StartBatchOperationRequest{
		Namespace:       "default",
		JobId:           "bench-cleanup-" + r.stamp,
		VisibilityQuery: fmt.Sprintf("%s IN (%s) AND ExecutionStatus = 'Running'", domain.SearchAttrSaleID, strings.Join(ids, ",")),
		Reason:          "seckill-bench cleanup",
		Operation:       &workflowservice.StartBatchOperationRequest_TerminationOperation{TerminationOperation: &batchpb.BatchOperationTermination{}},
	})
	if err != nil {
		r.o.Logger.Warn("terminate bench workflows", "sales", ids, "err", err)
	}
}

// fakeSaleBase starts the ids of baseline sales that exist only in Redis
// (no database row, so no worker ever sweeps them).
const fakeSaleBase = 9_000_000_000_000

func (r *runner) env(taskQueue string) map[string]string {
	env := map[string]string{
		"SECKILL_ENV":              "dev",
		"REDIS_ADDR":               r.o.RedisAddr,
		"REDIS_ADDRS":              "",
		"MYSQL_DSN":                r.o.MySQLDSN,
		"TEMPORAL_ADDRESS":         r.o.TemporalAddress,
		"SECKILL_TASK_QUEUE":       taskQueue,
		"SECKILL_GLOBAL_RPS":       "10000000",
		"SECKILL_GLOBAL_BURST":     "1000000",
		"SECKILL_RELAY_MIN_IDLE":   "3s",
		"SECKILL_SHUTDOWN_TIMEOUT": "3s",
		"SECKILL_FALLBACK_RPS":     strconv.FormatFloat(r.o.FallbackRPS, 'f', -1, 64),
	}
	maps.Copy(env, r.o.Env)
	return env
}

func (r *runner) startAPI(ctx context.Context, name, taskQueue string) (*Proc, error) {
	return r.startAPIEnv(ctx, name, r.env(taskQueue))
}

// startAPIEnv starts an API with env (its address added).
func (r *runner) startAPIEnv(ctx context.Context, name string, env map[string]string) (*Proc, error) {
	addr, err := proc.FreeAddr()
	if err != nil {
		return nil, err
	}
	env["API_ADDR"] = addr
	p, err := StartProc(ctx, name, r.o.SeckillBin, []string{"api"}, env, r.o.LogDir, "http://"+addr, "http://"+addr+"/healthz")
	if err != nil {
		return nil, err
	}
	r.procs = append(r.procs, p)
	return p, nil
}

// startStackEnv starts an API and a worker with the given environment.
func (r *runner) startStackEnv(ctx context.Context, apiName, workerName string, base map[string]string) (*Proc, *Proc, error) {
	env := maps.Clone(base)
	addr, err := proc.FreeAddr()
	if err != nil {
		return nil, nil, err
	}
	env["API_ADDR"] = addr
	api, err := StartProc(ctx, apiName, r.o.SeckillBin, []string{"api"}, env, r.o.LogDir, "http://"+addr, "http://"+addr+"/healthz")
	if err != nil {
		return nil, nil, err
	}
	r.procs = append(r.procs, api)
	env = maps.Clone(base)
	if addr, err = proc.FreeAddr(); err != nil {
		return nil, nil, err
	}
	env["WORKER_METRICS_ADDR"] = addr
	env["SECKILL_RELAY_CONSUMER"] = "bench-" + r.stamp
	w, err := StartProc(ctx, workerName, r.o.SeckillBin, []string{"worker"}, env, r.o.LogDir, "http://"+addr, "http://"+addr+"/metrics")
	if err != nil {
		return nil, nil, err
	}
	r.procs = append(r.procs, w)
	return api, w, nil
}

// users pre-mints n tokens of fresh, distinct users (before any timing).
func (r *runner) users(n int) ([]string, int64, error) {
	first := r.nextUser
	r.nextUser += int64(n)
	toks := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, runtime.NumCPU())
	per := (n + runtime.NumCPU() - 1) / runtime.NumCPU()
	for lo := 0; lo < n; lo += per {
		hi := min(lo+per, n)
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			for i := lo; i < hi; i++ {
				t, err := authtoken.Mint([]byte(config.DevJWTSecret), first+int64(i), authtoken.RoleUser, 2*time.Hour)
				if err != nil {
					errs <- err
					return
				}
				toks[i] = t
			}
		}(lo, hi)
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, 0, fmt.Errorf("mint tokens: %w", err)
	}
	return toks, first, nil
}

// reserveOp posts a reservation for user i of toks.
func reserveOp(c httpDoer, url string, toks []string) Op {
	return func(ctx context.Context, i int64) (int, error) {
		body := []byte(fmt.Sprintf(`{"request_id":"bench-%012d"}`, i))
		return c.do(ctx, "POST", url, toks[i%int64(len(toks))], body)
	}
}

func (r *runner) violation(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.o.Logger.Error("correctness violation", "what", msg)
	r.rep.Violations = append(r.rep.Violations, msg)
}

func (r *runner) add(s Scenario) {
	r.rep.Scenarios = append(r.rep.Scenarios, s)
	for _, f := range s.Figures {
		r.o.Logger.Info("figure", "scenario", s.ID, "name", f.Name, "value", num(f.Value), "unit", f.Unit, "target", f.Target)
	}
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
