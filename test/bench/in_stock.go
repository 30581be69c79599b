package bench

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/proc"
	"github.com/seckill/seckill/redisgateway"
)

// inStockConns is scenario 2's closed loop's connections; inStockRate is
// its open loop's rate, one a second of a 1,000-unit sale's wave, which
// both sides carry unsaturated here: the latency a user feels when the
// system keeps up, beside the closed loop's, which is mostly queueing
// (64 in flight over the throughput, Little's law).
const (
	inStockConns = 64
	inStockRate  = 1_000
)

// inStockRuns are scenario 2's four runs with their CPU readings (s).
type inStockRuns struct {
	base, api, baseOpen, apiOpen Result
	// CPU over the closed runs: the bare handler's and Redis's on its
	// run; the API's, Redis's and MariaDB's on the in-stock run.
	baseCPU, baseRedis, apiCPU, apiRedis, apiMySQL float64
	// CPU over the open runs, both sides at the same rate: the work per
	// 202 without the closed loop's difference in throughput, which moves
	// a process's cost per request (batched reads and writes, wake-ups).
	baseOpenCPU, apiOpenCPU float64
	notes                   []string
}

// inStock: scenario 2, the in-stock reservation path against a bare Fiber
// handler running one EVALSHA of the same script, closed-loop then
// open-loop. The API runs on a task queue nobody polls and no worker
// runs; its workflows are terminated and its keys deleted at the end.
func (r *runner) inStock(ctx context.Context) error {
	env := r.env("bench-unpolled-" + r.stamp)
	pprofURL := ""
	if r.o.ProfileDir != "" {
		addr, err := proc.FreeAddr()
		if err != nil {
			return err
		}
		pprofURL, env["SECKILL_PPROF_ADDR"] = "http://"+addr, addr
	}
	api, err := r.startAPIEnv(ctx, "api-instock", env)
	if err != nil {
		return err
	}
	defer api.Stop()
	s, err := r.sale(ctx, api, "in-stock", 1_000_000, 16, true)
	if err != nil {
		return err
	}
	base, err := r.startReserveBaseline(ctx)
	if err != nil {
		return err
	}
	defer base.Stop()
	runs, err := r.inStockRun(ctx, api, base, api.URL+client.ReservationsPath(s.ID), pprofURL)
	if err != nil {
		return err
	}
	if n := runs.api.Count(http.StatusAccepted) + runs.apiOpen.Count(http.StatusAccepted); n != runs.api.Requests+runs.apiOpen.Requests {
		r.o.Logger.Warn("in-stock runs had answers other than 202", "closed", runs.api.StatusLine(), "open", runs.apiOpen.StatusLine())
	}
	r.add(inStockScenario(runs))
	return nil
}

// inStockRun runs the bare handler and the API, closed-loop then
// open-loop, reading the processes' CPU around the closed runs and
// profiling the API over its closed run when pprofURL is set.
func (r *runner) inStockRun(ctx context.Context, api, base *Proc, url, pprofURL string) (inStockRuns, error) {
	var runs inStockRuns
	services := r.inStockServices(&runs)
	c := newDoer(inStockConns)
	baseOp := r.bareReserveOp(c, base)
	ClosedLoop(ctx, "warm-up", inStockConns, time.Second, 0, baseOp)
	cpu := func(m cpuMeter) float64 {
		v, err := m.read()
		if err != nil {
			runs.notes = append(runs.notes, fmt.Sprintf("CPU not read: %v", err))
		}
		return v
	}
	b0, rd0 := cpu(cpuMeter{base.CPU}), cpu(services.redis)
	runs.base = ClosedLoop(ctx, "bare Fiber + EVALSHA", inStockConns, r.o.Dur, 0, baseOp)
	runs.baseCPU, runs.baseRedis = cpu(cpuMeter{base.CPU})-b0, cpu(services.redis)-rd0

	open := int(inStockRate * r.o.Dur.Seconds())
	toks, _, err := r.users(int(max(60_000, 2.5*runs.base.RPS*r.o.Dur.Seconds())) + open)
	if err != nil {
		return runs, err
	}
	closedToks, openToks := toks[:len(toks)-open], toks[len(toks)-open:]
	profiled := make(chan error, 1)
	if pprofURL != "" {
		path := filepath.Join(r.o.ProfileDir, "api-instock.pprof")
		go func() { profiled <- profileCPU(ctx, pprofURL, int(max(1, r.o.Dur.Seconds())), path) }()
	}
	a0, rd0, my0 := cpu(cpuMeter{api.CPU}), cpu(services.redis), cpu(services.mysql)
	runs.api = ClosedLoop(ctx, "in-stock reserve", inStockConns, r.o.Dur, int64(len(closedToks)), reserveOp(c, url, closedToks))
	runs.apiCPU, runs.apiRedis, runs.apiMySQL = cpu(cpuMeter{api.CPU})-a0, cpu(services.redis)-rd0, cpu(services.mysql)-my0
	if pprofURL != "" {
		if err := <-profiled; err != nil {
			runs.notes = append(runs.notes, fmt.Sprintf("API CPU profile: %v", err))
		} else {
			runs.notes = append(runs.notes, "API CPU profile over the in-stock closed run: "+filepath.Join(r.o.ProfileDir, "api-instock.pprof"))
		}
	}
	b0 = cpu(cpuMeter{base.CPU})
	runs.baseOpen = OpenLoop(ctx, "bare, open loop", inStockRate, r.o.Dur, 4*inStockConns, baseOp)
	runs.baseOpenCPU = cpu(cpuMeter{base.CPU}) - b0
	a0 = cpu(cpuMeter{api.CPU})
	runs.apiOpen = OpenLoop(ctx, "in-stock, open loop", inStockRate, r.o.Dur, 4*inStockConns, reserveOp(c, url, openToks))
	runs.apiOpenCPU = cpu(cpuMeter{api.CPU}) - a0
	return runs, nil
}

// inStockMeters are the Redis and MariaDB meters of scenario 2 (nil when
// not found, with a note).
type inStockMeters struct{ redis, mysql cpuMeter }

func (r *runner) inStockServices(runs *inStockRuns) inStockMeters {
	ports, err := mysqlPorts(r.o.MySQLDSN, r.o.MySQLPorts)
	var m cpuMeter
	if err == nil {
		m, err = servicesCPU(r.o.RedisAddr, ports)
	}
	if err != nil {
		runs.notes = append(runs.notes, fmt.Sprintf("Redis and MariaDB CPU not measured: %v", err))
		return inStockMeters{}
	}
	// servicesCPU's first reading is redis-server's, the rest mariadbd's.
	return inStockMeters{redis: m[:1], mysql: m[1:]}
}

// bareReserveOp reserves on the bare handler for a fresh user each time:
// users never repeat across its runs.
func (r *runner) bareReserveOp(c httpDoer, base *Proc) Op {
	var userSeq atomic.Int64
	userSeq.Store(r.nextUser)
	r.nextUser += 10_000_000
	return func(ctx context.Context, i int64) (int, error) {
		user := userSeq.Add(1)
		return c.doWith(ctx, "POST", base.URL+"/reserve", "", nil, func(h *fasthttp.RequestHeader) {
			h.Set("X-Bench-User", strconv.FormatInt(user, 10))
			h.Set("X-Bench-Request", fmt.Sprintf("bench-%012d", user))
		})
	}
}

// startReserveBaseline starts the bare baseline (a Fiber handler running
// reserve.lua once per request) on a sale that lives only in Redis,
// warmed by the same script.
func (r *runner) startReserveBaseline(ctx context.Context) (*Proc, error) {
	fake := fakeSaleBase + time.Now().Unix()
	r.saleIDs = append(r.saleIDs, fake)
	now := time.Now()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, _, err := r.scripts.Warmup(wctx, r.rdb, redisgateway.WarmupArgs{
		SaleID: fake, StartsMS: now.Add(-time.Minute).UnixMilli(), EndsMS: now.Add(time.Hour).UnixMilli(),
		Control: string(domain.ControlActive), Epoch: 1, Mode: string(domain.ModeRedis), Stock: 1_000_000,
	})
	cancel()
	if err != nil {
		return nil, fmt.Errorf("warm baseline sale: %w", err)
	}
	addr, err := proc.FreeAddr()
	if err != nil {
		return nil, err
	}
	base, err := StartProc(ctx, "baseline", r.o.SelfBin,
		[]string{"baseline", "-addr", addr, "-redis", r.o.RedisAddr, "-sale", strconv.FormatInt(fake, 10), "-epoch", "1"},
		nil, r.o.LogDir, "http://"+addr, "http://"+addr+"/healthz")
	if err != nil {
		return nil, err
	}
	r.procs = append(r.procs, base)
	return base, nil
}

// inStockScenario is scenario 2's report.
func inStockScenario(runs inStockRuns) Scenario {
	baseRes, apiRes := runs.base, runs.api
	basePer := perRequestMS(runs.baseCPU, baseRes.Requests)
	apiPer := perRequestMS(runs.apiCPU, apiRes.Requests)
	baseOpenPer := perRequestMS(runs.baseOpenCPU, runs.baseOpen.Requests)
	apiOpenPer := perRequestMS(runs.apiOpenCPU, runs.apiOpen.Requests)
	rate := commas(inStockRate)
	return Scenario{
		ID: "2 in-stock", Title: "In-stock reservation vs bare Fiber + one EVALSHA of reserve.lua: 64 connections closed-loop, then " + rate + "/s open-loop",
		Runs: []Result{baseRes, apiRes, runs.baseOpen, runs.apiOpen},
		Figures: []Figure{
			{Name: "in-stock req/s", Value: apiRes.RPS, Unit: "req/s", Published: pubIssue17k},
			{Name: "in-stock / bare EVALSHA", Value: ratio(apiRes.RPS, baseRes.RPS), Unit: "×", Target: "≥ 0.9"},
			{Name: "in-stock p50", Value: apiRes.P50MS, Unit: "ms"},
			{Name: "in-stock p99", Value: apiRes.P99MS, Unit: "ms", Target: "< 10", Published: "p99 95 ms (JMeter run of design note 004)"},
			{Name: "in-stock p99.9", Value: apiRes.P999MS, Unit: "ms"},
			{Name: "in-stock p99 / bare p99, closed", Value: ratio(apiRes.P99MS, baseRes.P99MS), Unit: "×", Target: "≤ 2"},
			{Name: "in-stock mean / (64 / req/s), closed", Value: ratio(apiRes.MeanMS, 1000*inStockConns/apiRes.RPS), Unit: "×"},
			{Name: "in-stock p50 at " + rate + "/s", Value: runs.apiOpen.P50MS, Unit: "ms"},
			{Name: "in-stock p99 at " + rate + "/s", Value: runs.apiOpen.P99MS, Unit: "ms"},
			{Name: "bare p50 at " + rate + "/s", Value: runs.baseOpen.P50MS, Unit: "ms"},
			{Name: "bare p99 at " + rate + "/s", Value: runs.baseOpen.P99MS, Unit: "ms"},
			{Name: "in-stock p99 / bare p99 at " + rate + "/s", Value: ratio(runs.apiOpen.P99MS, runs.baseOpen.P99MS), Unit: "×", Target: "≤ 2"},
			{Name: "in-stock API CPU per 202", Value: apiPer, Unit: "ms"},
			{Name: "bare handler CPU per 202", Value: basePer, Unit: "ms"},
			{Name: "in-stock CPU / bare CPU, per 202", Value: ratio(apiPer, basePer), Unit: "×", Target: "≤ 1.5"},
			{Name: "in-stock API CPU per 202 at " + rate + "/s", Value: apiOpenPer, Unit: "ms"},
			{Name: "bare handler CPU per 202 at " + rate + "/s", Value: baseOpenPer, Unit: "ms"},
			{Name: "in-stock CPU / bare CPU, per 202 at " + rate + "/s", Value: ratio(apiOpenPer, baseOpenPer), Unit: "×", Target: "≤ 1.8"},
			{Name: "MariaDB CPU per in-stock 202", Value: perRequestMS(runs.apiMySQL, apiRes.Requests), Unit: "ms"},
			{Name: "Redis CPU per in-stock 202", Value: perRequestMS(runs.apiRedis, apiRes.Requests), Unit: "ms"},
			{Name: "Redis CPU per bare 202", Value: perRequestMS(runs.baseRedis, baseRes.Requests), Unit: "ms"},
		},
		Notes: append([]string{
			"no worker runs here, so no order is processed and, as the API leaves each 202's start to the worker's relay (SECKILL_API_STARTS_REDIS_ORDERS, default off), no workflow starts; the bench then terminates the sale's workflows, if any (one batch operation), and deletes the sale's keys",
			"CPU: each process's user + system time (/proc) over its closed run, per answer, and over its open run (both sides at the same rate); the API's includes no workflow start (the relay's is the worker's, in scenario 3); the Temporal server's is not counted",
			"closed loop: 64 requests always in flight, so the mean latency is 64 / req/s (Little's law) and its p99 mostly the queue; open loop: " + rate + " requests a second whatever the answers, latency from each request's intended send, so its percentiles are each 202's own time while the system keeps up",
		}, runs.notes...),
	}
}
