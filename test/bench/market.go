package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	batchpb "go.temporal.io/api/batch/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/domain"
)

// marketWorkers is how many admin calls scenario 13 keeps in flight while
// it creates and warms its sales: enough to keep the API busy, few enough
// that the two cores are not spent on the client.
const marketWorkers = 16

// marketIdle is the length of scenario 13's idle window: long enough to
// take in the dev server's periodic work (its runtime's forced collection
// every 2 min among it) at its share, not all or none of it.
const marketIdle = 2 * time.Minute

// marketPayWindow is the payment window of the sales scenario 13 takes
// holds on: longer than the scenario, so no order of theirs expires
// (waking its workflow) during an idle window, and the sold-out sale's
// one unit does not come back for sale.
const marketPayWindow = 3 * 3600

// marketPaths are one round of scenario 13's two paths on one sale, with
// the paths' API's cost over each run.
type marketPaths struct {
	soldOut, inStock         Result
	soldOutCost, inStockCost runCost
	profiles                 []string // the notes of the runs' CPU profiles, if taken
}

// market: scenario 13, a marketplace's day, on a Redis of its own. With
// only its own few sales live it measures the fleet's idle cost and the
// recovery from three faults on sales of its own; it then creates and
// warms o.MarketSales more sales and measures the same again with all of
// them live beside (the idle difference is what the sales cost), whether
// a listing reaches every sale, and the sold-out and in-stock paths on one
// sale, in rounds taking turns with the same paths on a twin of the stack
// with only those sales live (marketTwin). The paths and the faults run on
// an API of their own whose task queue nobody polls; the worker's relay
// starts their holds' order workflows on its own, so the sales are made,
// and the idle window with them measured, once that backlog has drained.
// That API, and the one the cut fault cuts from Redis, idle with the
// others and count as instances.
func (r *runner) market(ctx context.Context) error {
	red, err := r.startMarketRedis(ctx, "redis-market")
	if err != nil {
		return err
	}
	defer red.stop(r)
	defer r.useRedis(red)()
	st, err := r.startMarketStack(ctx)
	if err != nil {
		return err
	}
	defer st.stop(r)
	run, holds, err := r.marketPathsRunner(ctx, st.paths, st.pathsPprof)
	if err != nil {
		return err
	}
	fault, err := r.saleWindow(ctx, st.paths, "market fault", 10_000_000, 16, true, marketPayWindow)
	if err != nil {
		return err
	}
	twin, err := r.startMarketTwin(ctx)
	if err != nil {
		return err
	}
	defer twin.stop(context.WithoutCancel(ctx), r)
	m := marketFigures{holdSales: append(holds, fault.ID), few: twin.live}
	m.wait0 = []marketWait{r.waitQuiet(ctx, st.worker, "the scenario's three sales' opening", marketQuietFor),
		r.waitQuiet(ctx, twin.worker, "the twin's two sales' opening", marketQuietFor)}
	if m.idle0, err = r.measureIdleOf(ctx, st, "market-idle-before"); err != nil {
		return err
	}
	if m.rec1, err = r.marketRecovery(ctx, red, st, fault, "1 live"); err != nil {
		return err
	}
	// After the faults: their holds' records are no part of the sales'.
	if m.memBefore, err = redisUsedMemory(ctx, r.rdb); err != nil {
		return err
	}
	// The sales' starts would wait behind the relay's starts of the
	// faults' holds (on the dev server, 4 sales a second against 100 with
	// tens of thousands of holds to start).
	m.waitMake = r.waitInboxes(ctx, m.holdSales)
	ids, rate, opens, err := r.createMarket(ctx, st.api, r.o.MarketSales)
	defer func() {
		// The worker goes first: its resync would put back the keys of a
		// sale stopped but not yet marked finished.
		st.worker.Stop()
		r.teardownMarket(st.api, ids)
	}()
	if err != nil {
		return err
	}
	m.n, m.rate = len(ids), rate
	if rate > 0 {
		m.created = time.Duration(float64(m.n) / rate * float64(time.Second))
	}
	if err := r.marketLive(ctx, red, st, fault, ids, opens, marketSides{many: run, few: twin.run}, &m); err != nil {
		return err
	}
	r.add(marketScenario(m))
	return nil
}

// measureIdleOf is measureIdle over the stack's instances, with the
// worker's CPU profile over the window when profiles are asked for.
func (r *runner) measureIdleOf(ctx context.Context, st *marketStack, profile string) (marketIdleCost, error) {
	wait := r.profileIdle(ctx, st.worker, profile)
	ic, err := r.measureIdle(ctx, st.procs())
	ic.profile = wait()
	return ic, err
}

// marketSides run a round of the paths with the market's sales live,
// and on the twin.
type marketSides struct{ many, few func(string) marketPaths }

// marketLive measures scenario 13 with the market's sales live: once the
// faults' backlog drained and the sales settled, the idle cost, their
// keys' weight, the faults, the paths' rounds in turns with the twin's,
// and the listing.
func (r *runner) marketLive(ctx context.Context, red *marketRedis, st *marketStack, fault *domain.Sale, ids []int64, opens time.Time, sides marketSides, m *marketFigures) error {
	m.settled, m.starts = r.settleMarket(ctx, ids, opens)
	m.waitN = []marketWait{r.waitInboxes(ctx, m.holdSales)}
	m.waitN = append(m.waitN, r.waitQuiet(ctx, st.worker, "the sales' opening and the faults' orders", marketSettledQuietFor))
	var err error
	if m.idleN, err = r.measureIdleOf(ctx, st, "market-idle-with-sales"); err != nil {
		return err
	}
	if m.keyBytes, err = r.saleKeyBytes(ctx, ids); err != nil {
		return err
	}
	label := fmt.Sprintf("%d live", len(ids))
	if m.recN, err = r.marketRecovery(ctx, red, st, fault, label); err != nil {
		return err
	}
	// The faults' holds (the cut's runs, thousands) would be started by the
	// market's relay during the turns, beside the twin's none.
	m.waitTurns = r.waitInboxes(ctx, m.holdSales)
	m.many, m.one = r.marketTurns(sides.many, sides.few, label, fmt.Sprintf("%d live (twin)", m.few))
	m.listed, m.dup, err = r.listed(ctx, st.api, ids)
	return err
}

// marketTurns runs a round of the two paths on each side left out (the
// API's first burst after an idle window: its heap and the host's caches
// grow into it), then o.MarketRounds rounds on each, the sides taking
// turns: many first in odd rounds, few first in even ones, so a round's
// two sides run back to back and neither always follows the other.
func (r *runner) marketTurns(many, few func(string) marketPaths, manyLabel, fewLabel string) (manyRounds, fewRounds []marketPaths) {
	many(manyLabel + ", warm-up (left out)")
	few(fewLabel + ", warm-up (left out)")
	n := max(r.o.MarketRounds, 1)
	manyRounds, fewRounds = make([]marketPaths, n), make([]marketPaths, n)
	for i := range n {
		runMany := func() { manyRounds[i] = many(fmt.Sprintf("%s, round %d", manyLabel, i+1)) }
		runFew := func() { fewRounds[i] = few(fmt.Sprintf("%s, round %d", fewLabel, i+1)) }
		if i%2 == 0 {
			runMany()
			runFew()
		} else {
			runFew()
			runMany()
		}
	}
	return manyRounds, fewRounds
}

// marketPathsRunner makes the two paths' sales on api (a sold-out one of
// one unit, an in-stock one of ten million) and returns a function that
// runs one round of both, each for o.Dur, on fresh users, metering api
// over each run and profiling it (at pprofURL) over each, and
// the in-stock sale's id (the sold-out one holds one unit, taken at its
// set-up).
func (r *runner) marketPathsRunner(ctx context.Context, api *Proc, pprofURL string) (func(label string) marketPaths, []int64, error) {
	const conns = 64
	c, soldURL, soldToks, err := r.soldOutSaleWindow(ctx, api, "market sold-out", conns, marketPayWindow)
	if err != nil {
		return nil, nil, err
	}
	s, err := r.saleWindow(ctx, api, "market in-stock", 10_000_000, 16, true, marketPayWindow)
	if err != nil {
		return nil, nil, err
	}
	inURL := api.URL + client.ReservationsPath(s.ID)
	health := func(ctx context.Context, _ int64) (int, error) { return c.do(ctx, "GET", api.URL+"/healthz", "", nil) }
	ClosedLoop(ctx, "warm-up", conns, time.Second, 0, health)
	return func(label string) marketPaths {
		var p marketPaths
		p.soldOut, p.soldOutCost = r.costed(ctx, api, func() Result {
			return r.profiledRun(ctx, pprofURL, "sold-out "+label, &p.profiles, func() Result {
				return ClosedLoop(ctx, "sold-out reserve, "+label, conns, r.o.Dur, 0, reserveOp(c, soldURL, soldToks))
			})
		})
		if n := p.soldOut.Count(http.StatusAccepted); n > 0 {
			r.violation("scenario 13: %d reservations accepted on a sold-out sale of 1 unit", n)
		}
		toks, _, err := r.users(60_000)
		if err != nil {
			r.o.Logger.Warn("scenario 13: mint users", "err", err)
			return p
		}
		p.inStock, p.inStockCost = r.costed(ctx, api, func() Result {
			return r.profiledRun(ctx, pprofURL, "in-stock "+label, &p.profiles, func() Result {
				return ClosedLoop(ctx, "in-stock reserve, "+label, conns, r.o.Dur, int64(len(toks)), reserveOp(c, inURL, toks))
			})
		})
		return p
	}, []int64{s.ID}, nil
}

// createMarket creates and warms n sales through api's admin routes,
// marketWorkers at a time, all opening at one time after they are made,
// and returns their ids, the rate (sales created and warmed per second)
// and their opening.
func (r *runner) createMarket(ctx context.Context, api *Proc, n int) ([]int64, float64, time.Time, error) {
	c, err := r.admin(api)
	if err != nil {
		return nil, 0, time.Time{}, err
	}
	now := time.Now().UTC()
	// A wave opens together, made and warmed ahead of its opening; a sale
	// made after it (creation slower than marketOpenRate) is made open.
	opens := now.Add(time.Duration(n)*time.Second/marketOpenRate + 15*time.Second)
	var (
		mu    sync.Mutex
		ids   []int64
		first error
		next  atomic.Int64
		wg    sync.WaitGroup
	)
	start := time.Now()
	for range marketWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(n) && ctx.Err() == nil; i = next.Add(1) {
				id, err := marketSale(ctx, c, client.NewSale{GoodsID: 1000 + i, Title: r.saleTitle(fmt.Sprintf("market %d", i)),
					PriceCents: 999, Stock: 10, Buckets: 1, StartsAt: opens, EndsAt: now.Add(3 * time.Hour), PaymentWindowSeconds: 900})
				mu.Lock()
				if id > 0 {
					ids = append(ids, id)
				}
				if err != nil && first == nil {
					first = err
					next.Store(int64(n)) // the others stop at their next sale
				}
				mu.Unlock()
				if i%1000 == 0 {
					r.o.Logger.Info("scenario 13: sales created and warmed", "n", i, "elapsed", time.Since(start).Round(time.Second))
				}
			}
		}()
	}
	wg.Wait()
	return ids, float64(len(ids)) / time.Since(start).Seconds(), opens, first
}

// marketSale creates and warms one sale; its id is returned when it was
// created, even if its warm-up failed, so it is torn down.
func marketSale(ctx context.Context, c *client.Client, ns client.NewSale) (int64, error) {
	v, err := c.CreateSale(ctx, ns, "")
	if err != nil {
		return 0, fmt.Errorf("create sale %q: %w", ns.Title, err)
	}
	if _, err := c.Warmup(ctx, v.SaleID); err != nil {
		return v.SaleID, fmt.Errorf("warm up sale %d: %w", v.SaleID, err)
	}
	return v.SaleID, nil
}

// listed pages through the storefront's list of live sales (GET
// /api/v1/sales, pages of 200) and counts how many of ids it names and
// how many it names twice.
func (r *runner) listed(ctx context.Context, api *Proc, ids []int64) (int, int, error) {
	c, err := r.admin(api)
	if err != nil {
		return 0, 0, err
	}
	want := make(map[int64]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	seen := map[int64]int{}
	found, dup := 0, 0
	for v, err := range c.AllSales(ctx, client.SaleQuery{Status: "live", Limit: 200}) {
		if err != nil {
			return 0, 0, fmt.Errorf("list sales: %w", err)
		}
		if seen[v.SaleID]++; seen[v.SaleID] > 1 {
			dup++
		} else if want[v.SaleID] {
			found++
		}
	}
	return found, dup, nil
}

// teardownMarket stops the market's sales through the admin API,
// marketWorkers at a time, deletes their keys and marks them finished,
// and terminates their workflows, as close does for the others (whose
// one-by-one pass and list of ids in one query do not fit ten thousand
// sales).
func (r *runner) teardownMarket(api *Proc, ids []int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := r.admin(api)
	if err != nil {
		r.o.Logger.Warn("scenario 13: tear down", "err", err)
		return
	}
	var next, failed, notOurs atomic.Int64
	var wg sync.WaitGroup
	for range marketWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(len(ids)) && ctx.Err() == nil; i = next.Add(1) - 1 {
				if err := r.teardownSale(ctx, c, ids[i]); err != nil {
					failed.Add(1)
					if errors.Is(err, errNotOurs) {
						notOurs.Add(1)
					}
					r.o.Logger.Warn("scenario 13: tear down sale", "sale_id", ids[i], "err", err)
				}
			}
		}()
	}
	wg.Wait()
	r.o.Logger.Info("scenario 13: sales torn down", "n", len(ids), "failed", failed.Load(), "not_ours", notOurs.Load())
	if notOurs.Load() > 0 {
		// The batch names a range of ids, some of them another run's.
		r.o.Logger.Warn("scenario 13: the sales' workflows are left running", "err", errNotOurs)
		return
	}
	r.terminateMarket(ctx, ids)
}

// terminateMarket ends the running workflows of the market's sales in one
// server-side batch.
func (r *runner) terminateMarket(ctx context.Context, ids []int64) {
	if len(ids) == 0 {
		return
	}
	// The ids were allotted in one run of creations: a range names them.
	_, err := r.tc.WorkflowService().StartBatchOperation(ctx, &workflowservice.StartBatchOperationRequest{
		Namespace: "default",
		JobId:     "bench-market-cleanup-" + r.stamp,
		VisibilityQuery: fmt.Sprintf("%s >= %d AND %s <= %d AND ExecutionStatus = 'Running'",
			domain.SearchAttrSaleID, slices.Min(ids), domain.SearchAttrSaleID, slices.Max(ids)),
		Reason:    "seckill-bench cleanup",
		Operation: &workflowservice.StartBatchOperationRequest_TerminationOperation{TerminationOperation: &batchpb.BatchOperationTermination{}},
	})
	if err != nil {
		r.o.Logger.Warn("scenario 13: terminate the sales' workflows", "err", err)
	}
}

// Bounds of scenario 13's settling: the sales' workflows are all running
// (the API starts them at what Temporal takes, about 70 a second on the
// dev server, and the worker's sweeper those it left) and the sales have
// opened, then each has had its look at the opening and what a change
// then costs, a minute on. marketStartWait is four times what 10,000
// starts take at that pace, so the idle window measures sleeping sales.
const (
	marketOpenRate   = 150 // sales made per second the wave's opening assumes
	marketStartWait  = 10 * time.Minute
	marketStartEvery = 5 * time.Second
	marketLookWait   = 75 * time.Second
)

// settleMarket waits until the market's sale workflows run (at most
// marketStartWait), counting them every marketStartEvery, and the sales
// opened, then marketLookWait, so the idle window sees idle sales, not
// their start; it answers how long it waited and the running counts.
func (r *runner) settleMarket(ctx context.Context, ids []int64, opens time.Time) (time.Duration, []startSample) {
	start := time.Now()
	var samples []startSample
	if len(ids) > 0 {
		q := fmt.Sprintf("%s >= %d AND %s <= %d AND ExecutionStatus = 'Running'",
			domain.SearchAttrSaleID, slices.Min(ids), domain.SearchAttrSaleID, slices.Max(ids))
		for time.Since(start) < marketStartWait && ctx.Err() == nil {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			resp, err := r.tc.CountWorkflow(cctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: "default", Query: q})
			cancel()
			if err == nil {
				samples = append(samples, startSample{at: time.Since(start), running: resp.GetCount()})
				if resp.GetCount() >= int64(len(ids)) {
					break
				}
			}
			r.o.Logger.Info("scenario 13: waiting for the sales' workflows", "running", resp.GetCount(), "sales", len(ids), "err", err)
			sleepCtx(ctx, marketStartEvery)
		}
		if running := lastRunning(samples); running < int64(len(ids)) {
			r.o.Logger.Warn("scenario 13: not every sale workflow runs; the idle window measures their starts too",
				"running", running, "sales", len(ids), "waited", marketStartWait)
		}
	}
	sleepCtx(ctx, time.Until(opens))
	sleepCtx(ctx, marketLookWait)
	return time.Since(start), samples
}
