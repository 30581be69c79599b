package bench

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/proc"
	"github.com/seckill/seckill/redisgateway"
)

// Scenario 13's faults: Redis frozen for marketPause; a recovery not seen
// within marketRecoverWithin is reported as -1.
const (
	marketPause         = 4 * time.Second
	marketRecoverWithin = 2 * time.Minute
	// probeConns reservations at a time probe a fault's sale, each
	// connection probeGap apart: enough to see a 202 within tens of
	// milliseconds, few enough to leave the machine to the recovery.
	probeConns = 4
	probeGap   = 20 * time.Millisecond
	// cutUsers are the fresh users of each run on the healthy instance.
	cutUsers = 30_000
)

// marketRecovery is scenario 13's faults on one side: the keys' deletion
// and the freeze -market-rounds times each, each on a sale made for it
// (their figures the medians of the rounds, -1 when a round did not
// recover), and the cut's pairs on the fault sale.
type marketRecovery struct {
	keys float64 // seconds from the keys' deletion to the next 202
	left bool    // the sale left Redis while it was frozen, every round
	back float64 // seconds from the thaw to the sale back on Redis
	// sells is the seconds from then to the healthy instance's first 202
	// on the sale (-1: none within marketRecoverWithin).
	sells                 float64
	keysEach, backEach    []float64 // each round's keys and back
	keysProbe, pauseProbe string    // the probes' answers around the deletions, and the freezes
	cuts                  []cutPair // the API cut's pairs of runs, in the order taken
}

// recovered is the rounds' median, or -1 when a round did not recover.
func recovered(rounds []float64) float64 {
	if slices.ContainsFunc(rounds, func(v float64) bool { return v < 0 }) {
		return -1
	}
	return median(rounds)
}

// cutPair is one pair of the API cut's runs on the healthy instance: one
// with the other instance reaching Redis (before) and one with it cut
// (during).
type cutPair struct {
	before, during Result
	// beforeWhy and duringWhy are the healthy instance's outcomes over
	// each run (pathsOutcomes' difference, outcomesLine).
	beforeWhy, duringWhy string
	// beforeCost and duringCost are the processes' costs over each run
	// (cutCost).
	beforeCost, duringCost cutCost
	ready                  int   // the cut instance's /readyz answer at the cut's end
	switches               int64 // the fault sale's mode switches during the cut
}

// faultProbe reserves on the probed sale, each request for a fresh user.
type faultProbe struct {
	op      Op
	next    atomic.Int64
	n       int64 // users minted
	mu      sync.Mutex
	answers Result // the answers since the last take
	lastErr error  // the latest transport error, for a warning
}

// newFaultProbe mints the probe's users and returns it.
func (r *runner) newFaultProbe(c httpDoer, url string, users int) (*faultProbe, error) {
	toks, _, err := r.users(users)
	if err != nil {
		return nil, err
	}
	return &faultProbe{op: reserveOp(c, url, toks), n: int64(len(toks))}, nil
}

// load reserves, probeConns at a time, until ctx ends, the users run out
// or done answers true for an answer's status and the time it came.
func (p *faultProbe) load(ctx context.Context, done func(status int, at time.Time) bool) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for range probeConns {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := p.next.Add(1) - 1
				if i >= p.n {
					return
				}
				st, err := p.op(ctx, i)
				p.tally(st, err)
				if done(st, time.Now()) {
					cancel()
				}
				sleepCtx(ctx, probeGap)
			}
		})
	}
	wg.Wait()
}

// tally counts an answer, or a transport error (a frozen Redis's
// timeouts among them).
func (p *faultProbe) tally(status int, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.answers.Status == nil {
		p.answers.Status = map[string]int64{}
	}
	if err != nil {
		p.answers.Errors++
		p.lastErr = err
		return
	}
	p.answers.Status[strconv.Itoa(status)]++
}

// take answers the answers counted so far, by status, and starts over.
func (p *faultProbe) take() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	line := strings.TrimSpace(p.answers.StatusLine())
	p.answers = Result{}
	return line
}

// sofar answers the answers counted so far, by status, and the latest
// transport error, for a warning.
func (p *faultProbe) sofar() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	line := strings.TrimSpace(p.answers.StatusLine())
	if p.lastErr != nil {
		line += "; latest error: " + p.lastErr.Error()
	}
	return line
}

// firstAccepted probes until a 202 (at most within) and answers when it
// came; an error when none came.
func (p *faultProbe) firstAccepted(ctx context.Context, within time.Duration) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	var mu sync.Mutex
	var first time.Time
	p.load(ctx, func(st int, at time.Time) bool {
		if st != http.StatusAccepted {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		if first.IsZero() {
			first = at
		}
		return true
	})
	if first.IsZero() {
		return first, fmt.Errorf("no 202 within %s (%d probes sent)", within, p.next.Load())
	}
	return first, nil
}

// marketRecovery runs the three faults: the keys' deletion and the freeze
// -market-rounds times each, each on a sale made for it, then the cut on
// the fault sale s, with the probe and the healthy instance's load through
// the paths' API.
func (r *runner) marketRecovery(ctx context.Context, red *marketRedis, st *marketStack, s *domain.Sale, label string) (marketRecovery, error) {
	rec := marketRecovery{left: true}
	var sells []float64
	for range max(r.o.MarketRounds, 1) {
		keys, probe, err := r.freshKeysDeleted(ctx, st, label)
		if err != nil {
			return rec, err
		}
		rec.keysEach, rec.keysProbe = append(rec.keysEach, keys), joinProbes(rec.keysProbe, probe)
	}
	for range max(r.o.MarketRounds, 1) {
		f, err := r.freshFreeze(ctx, red, st, label)
		if err != nil {
			return rec, err
		}
		rec.left = rec.left && f.left
		rec.backEach, sells = append(rec.backEach, f.back), append(sells, f.sells)
		rec.pauseProbe = joinProbes(rec.pauseProbe, f.probe)
	}
	rec.keys, rec.back, rec.sells = recovered(rec.keysEach), recovered(rec.backEach), recovered(sells)
	url := st.paths.URL + client.ReservationsPath(s.ID)
	var err error
	rec.cuts, err = r.cutInstance(ctx, red, st, url, s.ID, label)
	r.o.Logger.Info("scenario 13: recovery", "live", label, "keys_s", rec.keysEach, "left_redis", rec.left, "back_s", rec.backEach, "sells_s", sells,
		"cut_503", rec.cut503s(), "cut_ratio", rec.cutRatio())
	return rec, err
}

// joinProbes adds a round's probe answers to the rounds' so far.
func joinProbes(sofar, next string) string {
	if sofar == "" {
		return next
	}
	return sofar + "; " + next
}

// freezeRound is one freeze's outcome (marketRecovery's fields).
type freezeRound struct {
	left        bool
	back, sells float64
	probe       string
}

// freshFreeze freezes Redis under the probe of a sale made for it and
// notes whether the sale left Redis, when it came back and when the
// healthy instance sold it again. A sale of its own, as for the keys: a
// resync lists the sale's QUEUED order workflows, and the fault sale
// gathers the cut runs' (tens of thousands, seconds of listing).
func (r *runner) freshFreeze(ctx context.Context, red *marketRedis, st *marketStack, label string) (freezeRound, error) {
	f := freezeRound{sells: -1}
	s, err := r.saleWindow(ctx, st.paths, "market freeze, "+label, 10_000_000, 16, true, marketPayWindow)
	if err != nil {
		return f, err
	}
	p, err := r.newFaultProbe(newDoer(probeConns), st.paths.URL+client.ReservationsPath(s.ID), 40_000)
	if err != nil {
		return f, err
	}
	_, why := r.explained(ctx, st.paths.URL+"/metrics", func() Result {
		f.left, f.back, err = r.pausedRedis(ctx, red, p, s.ID)
		if err == nil && f.back >= 0 {
			f.sells = r.sellsAgain(ctx, p, s.ID)
		}
		return Result{}
	})
	if !f.left || f.sells < 0 {
		r.o.Logger.Warn("scenario 13: the healthy API's outcomes over the freeze", "sale_id", s.ID, "outcomes", why)
	}
	f.probe = p.take()
	return f, err
}

// freshKeysDeleted runs keysDeleted on a sale made for it, so the two
// sides of the comparison (few sales live, all of them) delete the keys
// of sales of the same shape: the fault sale gathers the orders of the
// cut runs, which a rebuild reads.
func (r *runner) freshKeysDeleted(ctx context.Context, st *marketStack, label string) (float64, string, error) {
	s, err := r.saleWindow(ctx, st.paths, "market keys deleted, "+label, 10_000_000, 16, true, marketPayWindow)
	if err != nil {
		return 0, "", err
	}
	p, err := r.newFaultProbe(newDoer(probeConns), st.paths.URL+client.ReservationsPath(s.ID), 20_000)
	if err != nil {
		return 0, "", err
	}
	keys, err := r.keysDeleted(ctx, p, s.ID)
	return keys, p.take(), err
}

// keysDeleted deletes the sale's keys once it sells (all but its inbox,
// whose entries the rebuild counts, as a restart without AOF may leave
// them) and answers the seconds until the next 202 (-1: none within
// marketRecoverWithin, or the sale did not sell before: then its keys
// stay).
func (r *runner) keysDeleted(ctx context.Context, p *faultProbe, saleID int64) (float64, error) {
	if _, err := p.firstAccepted(ctx, marketRecoverWithin); err != nil {
		r.o.Logger.Warn("scenario 13: the probed sale does not sell; its keys stay", "sale_id", saleID, "err", err)
		return -1, nil
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	k := redisgateway.SaleKeys(saleID)
	deleted := time.Now()
	for _, key := range k.All() {
		if key == k.Inbox {
			continue
		}
		if err := r.rdb.Del(cctx, key).Err(); err != nil {
			return 0, fmt.Errorf("scenario 13: delete %s: %w", key, err)
		}
	}
	at, err := p.firstAccepted(ctx, marketRecoverWithin)
	if err != nil {
		r.o.Logger.Warn("scenario 13: the sale did not sell after its keys' deletion", "sale_id", saleID, "err", err)
		return -1, nil
	}
	return at.Sub(deleted).Seconds(), nil
}

// pausedRedis freezes Redis for marketPause while the probe reserves on
// the sale, and answers whether the sale left Redis and the seconds from
// the thaw until it was back (mode redis at a later epoch; -1: not within
// marketRecoverWithin). It freezes once the sale sells, as keysDeleted
// deletes: a sale refused before Redis (stopped, ended) would neither
// leave Redis nor sell again whatever the freeze did (-1, no freeze).
func (r *runner) pausedRedis(ctx context.Context, red *marketRedis, p *faultProbe, saleID int64) (bool, float64, error) {
	if _, err := p.firstAccepted(ctx, marketRecoverWithin); err != nil {
		r.o.Logger.Warn("scenario 13: the probed sale does not sell; Redis is not frozen", "sale_id", saleID, "err", err, "answers", p.sofar())
		return false, -1, nil
	}
	s0, err := r.st.GetSale(ctx, saleID)
	if err != nil {
		return false, 0, fmt.Errorf("scenario 13: read the probed sale: %w", err)
	}
	lctx, stopLoad := context.WithCancel(ctx)
	loaded := make(chan struct{})
	go func() {
		defer close(loaded)
		p.load(lctx, func(int, time.Time) bool { return false })
	}()
	defer func() { stopLoad(); <-loaded }()
	sleepCtx(ctx, time.Second)
	if err := red.Freeze(); err != nil {
		return false, 0, fmt.Errorf("scenario 13: freeze Redis: %w", err)
	}
	sleepCtx(ctx, marketPause)
	if err := red.Thaw(); err != nil {
		return false, 0, fmt.Errorf("scenario 13: thaw Redis: %w", err)
	}
	thawed := time.Now()
	s1, err := r.st.GetSale(ctx, saleID)
	if err != nil {
		return false, 0, fmt.Errorf("scenario 13: read the probed sale: %w", err)
	}
	if s1.ModeEpoch == s0.ModeEpoch {
		r.o.Logger.Warn("scenario 13: the sale did not leave Redis while it was frozen", "sale_id", saleID, "answers", p.sofar())
		return false, 0, nil
	}
	err = proc.Poll(ctx, marketRecoverWithin, "the probed sale back on Redis", func(ctx context.Context) error {
		s, err := r.st.GetSale(ctx, saleID)
		switch {
		case err != nil:
			return err
		case s.Mode != domain.ModeRedis:
			return fmt.Errorf("mode %s, epoch %d", s.Mode, s.ModeEpoch)
		}
		return nil
	})
	if err != nil {
		r.o.Logger.Warn("scenario 13: the sale did not come back to Redis", "sale_id", saleID, "err", err)
		return true, -1, nil
	}
	return true, time.Since(thawed).Seconds(), nil
}

// sellsAgain probes the probed sale until the healthy instance sells it
// again, and answers the seconds that took (-1: not within
// marketRecoverWithin). The database has the sale back on Redis first; an
// instance learns it at its sale cache's next refresh and until then
// answers 503 (the sale is switching back, retry): what a client sees, and
// so what the runs that follow wait for.
func (r *runner) sellsAgain(ctx context.Context, p *faultProbe, saleID int64) float64 {
	began := time.Now()
	at, err := p.firstAccepted(ctx, marketRecoverWithin)
	if err != nil {
		r.o.Logger.Warn("scenario 13: the healthy instance does not sell the sale again", "sale_id", saleID, "err", err, "answers", p.sofar())
		return -1
	}
	return at.Sub(began).Seconds()
}

// cutInstance runs max(o.MarketRounds, 1) pairs of reservation runs on
// the healthy paths' API, each run o.Dur: one with the other API reaching
// Redis, one with it cut from Redis for the run, the pairs taking them in
// turns (before first, then during first) so the machine's drift charges
// both alike; after each cut it waits for the cut instance to serve again.
func (r *runner) cutInstance(ctx context.Context, red *marketRedis, st *marketStack, url string, saleID int64, label string) ([]cutPair, error) {
	meter, err := r.newCutMeter(st, red)
	if err != nil {
		return nil, fmt.Errorf("scenario 13: meter the cut: %w", err)
	}
	pairs := make([]cutPair, max(r.o.MarketRounds, 1))
	for i := range pairs {
		pl := fmt.Sprintf("%s, pair %d", label, i+1)
		if i%2 == 0 {
			err = r.uncutRun(ctx, meter, st, url, pl, &pairs[i])
			if err == nil {
				err = r.cutRun(ctx, meter, st, url, saleID, pl, &pairs[i])
			}
		} else {
			err = r.cutRun(ctx, meter, st, url, saleID, pl, &pairs[i])
			if err == nil {
				err = r.uncutRun(ctx, meter, st, url, pl, &pairs[i])
			}
		}
		if err != nil {
			return pairs[:i], err
		}
	}
	return pairs, nil
}

// cutConns are the connections of each run of the API cut.
const cutConns = 64

// uncutRun is the pair's run on the healthy API with the other reaching
// Redis.
func (r *runner) uncutRun(ctx context.Context, meter *cutMeter, st *marketStack, url, label string, p *cutPair) error {
	toks, _, err := r.users(cutUsers)
	if err != nil {
		return err
	}
	c := newDoer(cutConns)
	p.before, p.beforeWhy = r.explained(ctx, st.paths.URL+"/metrics", func() (res Result) {
		res, p.beforeCost = meter.over(ctx, func() Result {
			return ClosedLoop(ctx, "healthy API, the other reaching Redis, "+label, cutConns, r.o.Dur, cutUsers, reserveOp(c, url, toks))
		})
		return res
	})
	return nil
}

// cutRun is the pair's run on the healthy API with the other cut from
// Redis for the run; it then waits for the cut instance to serve again.
func (r *runner) cutRun(ctx context.Context, meter *cutMeter, st *marketStack, url string, saleID int64, label string, p *cutPair) error {
	toks, _, err := r.users(cutUsers)
	if err != nil {
		return err
	}
	c := newDoer(cutConns)
	s0, err := r.st.GetSale(ctx, saleID)
	if err != nil {
		return fmt.Errorf("scenario 13: read the fault sale: %w", err)
	}
	st.proxy.SetCut(true)
	p.during, p.duringWhy = r.explained(ctx, st.paths.URL+"/metrics", func() (res Result) {
		res, p.duringCost = meter.over(ctx, func() Result {
			return ClosedLoop(ctx, "healthy API, the other cut, "+label, cutConns, r.o.Dur, cutUsers, reserveOp(c, url, toks))
		})
		return res
	})
	p.ready, err = c.do(ctx, "GET", st.cut.URL+"/readyz", "", nil)
	st.proxy.SetCut(false)
	if err != nil {
		return fmt.Errorf("scenario 13: the cut instance's /readyz: %w", err)
	}
	s1, err := r.st.GetSale(ctx, saleID)
	if err != nil {
		return fmt.Errorf("scenario 13: read the fault sale: %w", err)
	}
	p.switches = s1.ModeEpoch - s0.ModeEpoch
	healed := proc.HTTPReady(st.cut.URL + "/readyz")
	if err := proc.Poll(ctx, time.Minute, "the cut instance ready again", healed); err != nil {
		return fmt.Errorf("scenario 13: after the cut: %w", err)
	}
	return nil
}

// explained runs run and answers its result with the outcomes the API of
// metricsURL counted meanwhile (outcomesLine), which tell its 503s apart:
// their bodies share one code.
func (r *runner) explained(ctx context.Context, metricsURL string, run func() Result) (Result, string) {
	before, err := pathsOutcomes(ctx, metricsURL)
	res := run()
	if err != nil {
		r.o.Logger.Warn("scenario 13: the healthy API's outcomes", "err", err)
		return res, "unknown"
	}
	after, err := pathsOutcomes(ctx, metricsURL)
	if err != nil {
		r.o.Logger.Warn("scenario 13: the healthy API's outcomes", "err", err)
		return res, "unknown"
	}
	return res, outcomesLine(before, after)
}

// pathsOutcomes are an API's reservation outcomes so far: each filter
// layer's refusals and the reserve step's outcomes as layer/outcome (a
// layer's passes left out), and the hold records' as hold/outcome.
func pathsOutcomes(ctx context.Context, metricsURL string) (map[string]float64, error) {
	out := map[string]float64{}
	filter, err := metricSamples(ctx, metricsURL, "seckill_filter_total")
	if err != nil {
		return nil, err
	}
	for labels, v := range filter {
		l := promLabels(labels)
		if l["outcome"] != "pass" {
			out[l["layer"]+"/"+l["outcome"]] += v
		}
	}
	holds, err := metricSamples(ctx, metricsURL, "seckill_hold_records_total")
	if err != nil {
		return nil, err
	}
	for labels, v := range holds {
		out["hold/"+promLabels(labels)["outcome"]] += v
	}
	return out, nil
}

// promLabels reads a sample's label set (a="x",b="y"); values holding a
// quote or a comma are not expected here.
func promLabels(set string) map[string]string {
	out := map[string]string{}
	for pair := range strings.SplitSeq(set, ",") {
		k, v, ok := strings.Cut(pair, "=")
		if ok {
			out[strings.TrimSpace(k)] = strings.Trim(v, `"`)
		}
	}
	return out
}

// outcomesLine renders the outcomes counted from before to after, the
// most frequent first: "redis/resync×23178 redis/ok×2307".
func outcomesLine(before, after map[string]float64) string {
	type count struct {
		what string
		n    int64
	}
	var counts []count
	for k, v := range after {
		if n := int64(v - before[k]); n > 0 {
			counts = append(counts, count{k, n})
		}
	}
	slices.SortFunc(counts, func(a, b count) int { return cmp.Or(cmp.Compare(b.n, a.n), strings.Compare(a.what, b.what)) })
	parts := make([]string, len(counts))
	for i, c := range counts {
		parts[i] = fmt.Sprintf("%s×%d", c.what, c.n)
	}
	return cmp.Or(strings.Join(parts, " "), "none")
}
