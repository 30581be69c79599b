package bench

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/proc"
	"github.com/seckill/seckill/redisgateway"
)

// inStock: scenario 2, the in-stock reservation path against a bare Fiber
// handler running one EVALSHA of the same script. The API runs on a task
// queue nobody polls and no worker runs; its workflows are terminated and
// its keys deleted at the end.
func (r *runner) inStock(ctx context.Context) error {
	const conns = 64
	api, err := r.startAPI(ctx, "api-instock", "bench-unpolled-"+r.stamp)
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

	c := newDoer(conns)
	// Users never repeat across the warm-up and the timed run.
	var userSeq atomic.Int64
	userSeq.Store(r.nextUser)
	r.nextUser += 10_000_000
	baseOp := func(ctx context.Context, i int64) (int, error) {
		user := userSeq.Add(1)
		return c.doWith(ctx, "POST", base.URL+"/reserve", "", nil, func(h *fasthttp.RequestHeader) {
			h.Set("X-Bench-User", strconv.FormatInt(user, 10))
			h.Set("X-Bench-Request", fmt.Sprintf("bench-%012d", user))
		})
	}
	ClosedLoop(ctx, "warm-up", conns, time.Second, 0, baseOp)
	baseCPU0, err := base.CPU()
	if err != nil {
		return err
	}
	baseRes := ClosedLoop(ctx, "bare Fiber + EVALSHA", conns, r.o.Dur, 0, baseOp)
	baseCPU1, err := base.CPU()
	if err != nil {
		return err
	}

	toks, _, err := r.users(int(max(60_000, 2.5*baseRes.RPS*r.o.Dur.Seconds())))
	if err != nil {
		return err
	}
	url := api.URL + client.ReservationsPath(s.ID)
	apiCPU0, err := api.CPU()
	if err != nil {
		return err
	}
	apiRes := ClosedLoop(ctx, "in-stock reserve", conns, r.o.Dur, int64(len(toks)), reserveOp(c, url, toks))
	apiCPU1, err := api.CPU()
	if err != nil {
		return err
	}
	// CPU per answer, in ms.
	basePer := perRequestMS(baseCPU1-baseCPU0, baseRes.Requests)
	apiPer := perRequestMS(apiCPU1-apiCPU0, apiRes.Requests)
	if apiRes.Count(http.StatusAccepted) != apiRes.Requests {
		r.o.Logger.Warn("in-stock run had answers other than 202", "answers", apiRes.StatusLine())
	}
	r.add(inStockScenario(baseRes, apiRes, basePer, apiPer))
	return nil
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
func inStockScenario(baseRes, apiRes Result, basePer, apiPer float64) Scenario {
	return Scenario{
		ID: "2 in-stock", Title: "In-stock reservation vs bare Fiber + one EVALSHA of reserve.lua, 64 connections",
		Runs: []Result{baseRes, apiRes},
		Figures: []Figure{
			{Name: "in-stock req/s", Value: apiRes.RPS, Unit: "req/s", Published: pubIssue17k},
			{Name: "in-stock / bare EVALSHA", Value: ratio(apiRes.RPS, baseRes.RPS), Unit: "×", Target: "≥ 0.9"},
			{Name: "in-stock p50", Value: apiRes.P50MS, Unit: "ms"},
			{Name: "in-stock p99", Value: apiRes.P99MS, Unit: "ms", Target: "< 10", Published: "p99 95 ms (JMeter run of design note 004)"},
			{Name: "in-stock p99.9", Value: apiRes.P999MS, Unit: "ms"},
			{Name: "in-stock API CPU per 202", Value: apiPer, Unit: "ms"},
			{Name: "bare handler CPU per 202", Value: basePer, Unit: "ms"},
			{Name: "in-stock CPU / bare CPU, per 202", Value: ratio(apiPer, basePer), Unit: "×", Target: "≤ 1.5"},
		},
		Notes: []string{
			"no worker runs here, so no order is processed and, as the API leaves each 202's start to the worker's relay (SECKILL_API_STARTS_REDIS_ORDERS, default off), no workflow starts; the bench then terminates the sale's workflows, if any (one batch operation), and deletes the sale's keys",
			"CPU: each process's user + system time (/proc) over its timed run, per answer; the API's includes no workflow start (the relay's is the worker's, in scenario 3); the Temporal server's is not counted",
		},
	}
}
