package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/proc"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/sales"
)

// Scenarios 6 to 8 measure how buyers learn their result:
// status polls and me/reservations against GET /healthz (6), the push
// latency of the event stream during a burst drain (7), and one API holding
// 10,000 idle event streams (8).

const (
	pollUsers   = 20_000
	idleStreams = 10_000
)

// notify runs scenarios 6 and 8 on an API with no worker (the reservations
// they read are made in Redis directly, as the reserve script and the
// order workflow's Redis step write them, so no workflow runs during the
// timed runs), then scenario 7 on an API and a worker of its own.
func (r *runner) notify(ctx context.Context) error {
	raiseFileLimit(r.o.Logger, 2*idleStreams+1000)
	if r.o.want("6") || r.o.want("8") {
		api, err := r.startAPI(ctx, "api-notify", "bench-notify-"+r.stamp)
		if err != nil {
			return err
		}
		pr, err := r.pendingReservations(ctx, api, pollUsers)
		if err != nil {
			return err
		}
		if r.o.want("6") {
			if err := r.statusPolling(ctx, api, pr); err != nil {
				return err
			}
		}
		if r.o.want("8") {
			if err := r.idleStreams(ctx, api, pr); err != nil {
				return err
			}
		}
		// Their sales end now, so scenario 7's worker does not spend
		// itself on them (their rows have no orders behind them).
		r.finishSales(ctx, api)
		api.Stop()
	}
	if r.o.want("7") {
		api, worker, err := r.startStackEnv(ctx, "api-push", "worker-push", r.env("bench-push-"+r.stamp))
		if err != nil {
			return err
		}
		if err := r.pushLatency(ctx, api); err != nil {
			return err
		}
		api.Stop()
		worker.Stop()
	}
	return nil
}

// finishSales stops the sales made so far through api and tears them down
// (their Redis keys deleted, which no API operation does), as close does.
func (r *runner) finishSales(ctx context.Context, api *Proc) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	r.stopSales(ctx, api)
	for _, id := range r.ownSaleIDs(ctx) {
		if err := sales.Teardown(ctx, r.st, redisgateway.NewClient(r.rdb), id); err != nil {
			r.o.Logger.Warn("tear down bench sale", "sale_id", id, "err", err)
		}
	}
}

// raiseFileLimit raises the soft open-file limit to the hard one (the APIs
// this process starts inherit it); it warns when that is below want.
func raiseFileLimit(logger interface{ Warn(string, ...any) }, want uint64) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		logger.Warn("read the open-file limit", "err", err)
		return
	}
	if rl.Cur < rl.Max {
		rl.Cur = rl.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
			logger.Warn("raise the open-file limit", "err", err)
		}
	}
	if rl.Cur < want {
		logger.Warn("open-file limit below what the stream scenarios need", "limit", rl.Cur, "want", want)
	}
}

// pollSet is a sale's PENDING_PAYMENT reservations, one per user.
type pollSet struct {
	sale   *domain.Sale
	tokens []string // reservation tokens
	jwts   []string // their users' bearer tokens
}

// pendingReservations makes n PENDING_PAYMENT reservations of distinct
// users in Redis: the reserve script's hold (and user index entry), then
// what the order workflow's Redis step writes once the order is placed
// (token ordered, status record PENDING_PAYMENT with order number, amount
// and pay-by), and their reservation rows in MySQL (no orders or stock
// movements: a status read asks MySQL only when Redis does not answer).
func (r *runner) pendingReservations(ctx context.Context, api *Proc, n int) (*pollSet, error) {
	s, err := r.sale(ctx, api, "status polling", int64(n), 16, true)
	if err != nil {
		return nil, err
	}
	jwts, first, err := r.users(n)
	if err != nil {
		return nil, err
	}
	ps := &pollSet{sale: s, tokens: make([]string, n), jwts: jwts}
	payBy := time.Now().Add(time.Hour).UTC()
	err = forEach(ctx, n, 16, func(ctx context.Context, i int64) error {
		user := first + i
		token := domain.DeriveToken([]byte(config.DevTokenKey), s.ID, user, "bench-poll")
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		res, err := r.scripts.Reserve(cctx, r.rdb, redisgateway.ReserveArgs{SaleID: s.ID, UserID: user, RequestID: "bench-poll", Token: token, Epoch: s.ModeEpoch})
		if err == nil && res.Outcome != redisgateway.OutcomeOK {
			err = fmt.Errorf("reserve for user %d: %s", user, res.Outcome)
		}
		if err == nil {
			_, err = r.scripts.Advance(cctx, r.rdb, s.ID, token, domain.TokenOrdered, domain.TokenHeld)
		}
		if err == nil {
			_, err = r.scripts.WriteStatus(cctx, r.rdb, s.ID, token, redisgateway.StatusRecord{Seq: 2, UserID: user,
				Status: string(domain.StatusPendingPayment), OrderNo: benchOrderNo(i), AmountCents: s.PriceCents, PayBy: payBy})
		}
		if err != nil {
			return fmt.Errorf("pending reservations: %w", err)
		}
		ps.tokens[i] = token
		return nil
	})
	if err != nil {
		return nil, err
	}
	// The rows as the order step leaves them, for the reads that fall
	// back to MySQL (a Redis call that timed out): reservation rows only,
	// written in bulk.
	const chunk = 1000
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		var q strings.Builder
		q.WriteString("INSERT INTO reservations (token, sale_id, user_id, request_id, path, status, order_no, amount_cents, pay_by) VALUES ")
		args := make([]any, 0, (hi-lo)*8)
		for i := lo; i < hi; i++ {
			if i > lo {
				q.WriteString(",")
			}
			q.WriteString("(?, ?, ?, 'bench-poll', 'redis', 'PENDING_PAYMENT', ?, ?, ?)")
			args = append(args, ps.tokens[i], s.ID, first+int64(i), benchOrderNo(int64(i)), s.PriceCents, payBy)
		}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := r.st.DB.ExecContext(cctx, q.String(), args...)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("pending reservations: insert rows: %w", err)
		}
	}
	return ps, nil
}

// benchOrderNo is a 26-character order number (the column's width).
func benchOrderNo(i int64) string { return fmt.Sprintf("BENCH%021d", i) }

// comSelect is MariaDB's global count of SELECT statements.
func (r *runner) comSelect(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var name string
	var n int64
	if err := r.st.DB.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Com_select'").Scan(&name, &n); err != nil {
		return 0, fmt.Errorf("read Com_select: %w", err)
	}
	return n, nil
}

// statusPolling: scenario 6, polls of PENDING_PAYMENT reservations of
// 20,000 distinct users (the status read and me/reservations) against GET
// /healthz, 64 connections, with MariaDB's SELECTs counted against an idle
// window of the same length (the API's own once-a-second sale cache).
func (r *runner) statusPolling(ctx context.Context, api *Proc, ps *pollSet) error {
	const conns = 64
	c := newDoer(conns)
	n := int64(len(ps.tokens))
	health := func(ctx context.Context, _ int64) (int, error) { return c.do(ctx, "GET", api.URL+"/healthz", "", nil) }
	poll := func(ctx context.Context, i int64) (int, error) {
		return c.do(ctx, "GET", api.URL+client.ReservationPath(ps.tokens[i%n]), ps.jwts[i%n], nil)
	}
	mineURL := api.URL + client.MinePath(ps.sale.ID)
	mine := func(ctx context.Context, i int64) (int, error) { return c.do(ctx, "GET", mineURL, ps.jwts[i%n], nil) }

	// One check that the answers are the PENDING_PAYMENT views.
	if err := checkPending(api.URL+client.ReservationPath(ps.tokens[0]), ps.jwts[0], `"status":"PENDING_PAYMENT"`); err != nil {
		return err
	}
	if err := checkPending(mineURL, ps.jwts[0], `"status":"PENDING_PAYMENT"`); err != nil {
		return err
	}
	pr := pollingRuns{n: n, conns: conns}
	var err error
	if pr.bare, err = r.bareStatusBaseline(ctx, c, conns, ps); err != nil {
		return err
	}
	ClosedLoop(ctx, "warm-up", conns, time.Second, 0, health)
	sel, err := r.newSelectMeter(ctx)
	if err != nil {
		return err
	}
	pr.idle = sel.idle
	pr.base = ClosedLoop(ctx, "GET /healthz", conns, r.o.Dur, 0, health)
	// Steady state: a buyer polls for minutes (every 2 s in the design
	// note) and its first poll is the only one the API's cache of live
	// views cannot answer; one pass over every reservation first, so the
	// 5-second run measures the polls that follow, not 20,000 first ones.
	pr.warm = ClosedLoop(ctx, "warm-up: one poll per reservation", conns, 10*r.o.Dur, n, poll)
	const statusReads = `seckill_status_reads_total{source="`
	from0, err := r.apiCounters(ctx, api, statusReads)
	if err != nil {
		return err
	}
	if pr.polls, pr.pollSelects, err = sel.run(ctx, "GET reservations/{token}", conns, poll); err != nil {
		return err
	}
	from1, err := r.apiCounters(ctx, api, statusReads)
	if err != nil {
		return err
	}
	if pr.polls.Requests > 0 {
		pr.fromCache = (from1["live_cache"] - from0["live_cache"]) / float64(pr.polls.Requests)
	}
	if pr.mines, pr.mineSelects, err = sel.run(ctx, "GET me/reservations?sale_id", conns, mine); err != nil {
		return err
	}
	for _, res := range []Result{pr.polls, pr.mines} {
		if bad := res.Requests - res.Count(http.StatusOK); bad > 0 {
			r.violation("scenario 6: %d of %d polls (%s) not answered 200: %s", bad, res.Requests, res.Name, res.StatusLine())
		}
	}
	r.add(pr.scenario())
	return nil
}

// bareStatusBaseline runs the baseline a poll cannot beat: a bare Fiber
// handler running the status read script once (no auth, no limits, no
// view), in a process of its own.
func (r *runner) bareStatusBaseline(ctx context.Context, c httpDoer, conns int, ps *pollSet) (Result, error) {
	addr, err := proc.FreeAddr()
	if err != nil {
		return Result{}, err
	}
	bare, err := StartProc(ctx, "baseline-status", r.o.SelfBin,
		[]string{"baseline", "-addr", addr, "-redis", r.o.RedisAddr, "-sale", strconv.FormatInt(ps.sale.ID, 10), "-epoch", strconv.FormatInt(ps.sale.ModeEpoch, 10)},
		nil, r.o.LogDir, "http://"+addr, "http://"+addr+"/healthz")
	if err != nil {
		return Result{}, err
	}
	r.procs = append(r.procs, bare)
	defer bare.Stop()
	n := int64(len(ps.tokens))
	bareOp := func(ctx context.Context, i int64) (int, error) {
		return c.do(ctx, "GET", bare.URL+"/status/"+ps.tokens[i%n], "", nil)
	}
	ClosedLoop(ctx, "warm-up", conns, time.Second, 0, bareOp)
	return ClosedLoop(ctx, "bare Fiber + status EVALSHA", conns, r.o.Dur, 0, bareOp), nil
}

// selectMeter counts MariaDB's SELECTs (global Com_select) per run, less
// those of an idle window of the same length (the API's sale cache).
type selectMeter struct {
	r    *runner
	idle int64
}

func (r *runner) newSelectMeter(ctx context.Context) (*selectMeter, error) {
	idle0, err := r.comSelect(ctx)
	if err != nil {
		return nil, err
	}
	time.Sleep(r.o.Dur)
	idle1, err := r.comSelect(ctx)
	if err != nil {
		return nil, err
	}
	return &selectMeter{r: r, idle: idle1 - idle0}, nil
}

// run runs op for the run length and returns its result and its SELECTs
// per 1,000 requests.
func (m *selectMeter) run(ctx context.Context, name string, conns int, op Op) (Result, float64, error) {
	s0, err := m.r.comSelect(ctx)
	if err != nil {
		return Result{}, 0, err
	}
	res := ClosedLoop(ctx, name, conns, m.r.o.Dur, 0, op)
	s1, err := m.r.comSelect(ctx)
	if err != nil {
		return Result{}, 0, err
	}
	// The idle window ran for r.o.Dur, as did this run.
	per := 0.0
	if res.Requests > 0 {
		per = float64(max(s1-s0-m.idle, 0)) * 1000 / float64(res.Requests)
	}
	return res, per, nil
}

// pollingRuns are scenario 6's measurements.
type pollingRuns struct {
	n, idle                             int64
	conns                               int
	base, bare, warm, polls, mines      Result
	pollSelects, mineSelects, fromCache float64
}

func (pr pollingRuns) scenario() Scenario {
	n, conns, idle := pr.n, pr.conns, pr.idle
	base, bareRes, warm, polls, mines := pr.base, pr.bare, pr.warm, pr.polls, pr.mines
	pollSelects, mineSelects, fromCache := pr.pollSelects, pr.mineSelects, pr.fromCache
	return Scenario{
		ID: "6 status polling", Title: fmt.Sprintf("Status polls of PENDING_PAYMENT reservations of %d distinct users vs GET /healthz, %d connections", n, conns),
		Runs: []Result{base, bareRes, polls, mines},
		Figures: []Figure{
			{Name: "status polls/s", Value: polls.RPS, Unit: "req/s"},
			{Name: "status poll / healthz", Value: ratio(polls.RPS, base.RPS), Unit: "×", Target: "≥ 0.8"},
			{Name: "SELECTs per 1,000 status polls", Value: pollSelects, Unit: "SELECTs", Target: "≤ 1"},
			{Name: "bare status EVALSHA / healthz", Value: ratio(bareRes.RPS, base.RPS), Unit: "×"},
			{Name: "status poll / bare status EVALSHA", Value: ratio(polls.RPS, bareRes.RPS), Unit: "×"},
			{Name: "status poll p99", Value: polls.P99MS, Unit: "ms"},
			{Name: "status polls answered from the API's cache", Value: fromCache, Unit: "share"},
			{Name: "first polls (cold cache) / healthz", Value: ratio(warm.RPS, base.RPS), Unit: "×"},
			{Name: "me/reservations polls/s", Value: mines.RPS, Unit: "req/s"},
			{Name: "me/reservations / healthz", Value: ratio(mines.RPS, base.RPS), Unit: "×"},
			{Name: "SELECTs per 1,000 me/reservations polls", Value: mineSelects, Unit: "SELECTs", Target: "≤ 1"},
		},
		Notes: []string{
			fmt.Sprintf("the reservations are made directly as the reserve script and the order workflow leave them (Redis: hold, user index, token ordered, status record PENDING_PAYMENT; MySQL: the reservation row, no order or stock movement), with no workflow running; each user polled about once per %d polls, under the per-user read limit", n),
			fmt.Sprintf("before the timed status polls, one warm-up poll of each of the %d reservations (the first poll of a reservation reaches Redis; the following ones are answered from the API's cache of live views, seckill_status_reads_total{source=\"live_cache\"}); its rate is the first-polls figure", n),
			"the bare baseline is a Fiber handler in a process of its own (seckill-bench baseline) running the status read script once per request, with no auth, limit or view: the ceiling of a poll that makes one Redis call",
			fmt.Sprintf("SELECTs: MariaDB's global Com_select over each run less an idle window of the same length before the runs (%d SELECTs: the API's sale cache)", idle),
		},
	}
}

// reserveToken posts reservation i for jwt and returns the status and, on
// a 202, the token.
func reserveToken(c httpDoer, url, jwt string, i int64) (int, string, error) {
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod("POST")
	req.SetRequestURI(url)
	req.Header.SetContentType("application/json")
	req.SetBodyRaw([]byte(fmt.Sprintf(`{"request_id":"bench-%012d"}`, i)))
	req.Header.Set("Authorization", "Bearer "+jwt)
	if err := c.c.DoTimeout(req, resp, 10*time.Second); err != nil {
		return 0, "", fmt.Errorf("POST %s: %w", url, err)
	}
	if resp.StatusCode() != http.StatusAccepted {
		return resp.StatusCode(), "", nil
	}
	var body struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(resp.Body(), &body); err != nil || body.Token == "" {
		return 0, "", fmt.Errorf("POST %s: 202 without a token: %s", url, resp.Body())
	}
	return http.StatusAccepted, body.Token, nil
}

// checkPending reads url once and checks its body holds want.
func checkPending(url, jwt, want string) error {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+jwt)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("check %s: %w", url, err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		b.WriteString(sc.Text())
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(b.String(), want) {
		return fmt.Errorf("check %s: %d %s, want %s", url, resp.StatusCode, b.String(), want)
	}
	return nil
}

// sseEvent is one event of a stream as the client received it.
type sseEvent struct {
	id int64
	at time.Time
}

// openStream opens a reservation's event stream and calls onEvent for each
// event until the stream ends or ctx is done.
func openStream(ctx context.Context, hc *http.Client, url, jwt string, onEvent func(sseEvent)) error {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+jwt)
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("stream %s: status %d", url, resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	var ev sseEvent
	data := false
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "id: "):
			ev.id, _ = strconv.ParseInt(l[4:], 10, 64)
		case strings.HasPrefix(l, "data: "):
			data = true
		case l == "" && data:
			ev.at = time.Now()
			onEvent(ev)
			ev, data = sseEvent{}, false
		}
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

func streamClient(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		MaxConnsPerHost: conns, MaxIdleConnsPerHost: conns, DisableCompression: true,
		DialContext: (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
	}}
}

// idleStreams: scenario 8, one API holding 10,000 idle event streams of
// PENDING_PAYMENT reservations (loopback): its RSS before and with them,
// and the sold-out path against GET /healthz without and with them.
func (r *runner) idleStreams(ctx context.Context, api *Proc, ps *pollSet) error {
	const conns = 64
	n := min(idleStreams, len(ps.tokens))
	c, url, toks, err := r.soldOutSale(ctx, api, "sold-out beside streams", conns)
	if err != nil {
		return err
	}
	health := func(ctx context.Context, _ int64) (int, error) { return c.do(ctx, "GET", api.URL+"/healthz", "", nil) }
	measure := func(label string) (Result, Result) {
		ClosedLoop(ctx, "warm-up", conns, time.Second, 0, health)
		base := ClosedLoop(ctx, "GET /healthz, "+label, conns, r.o.Dur, 0, health)
		sold := ClosedLoop(ctx, "sold-out reserve, "+label, conns, r.o.Dur, 0, reserveOp(c, url, toks))
		return base, sold
	}
	ir := idleRuns{n: n, conns: conns}
	ir.base0, ir.sold0 = measure("no streams")
	if ir.rss0, err = rssBytes(api); err != nil {
		return err
	}
	streams := r.openIdleStreams(ctx, api, ps, n)
	defer streams.close()
	ir.openTook = streams.took
	time.Sleep(2 * time.Second) // settle
	if ir.rss1, err = rssBytes(api); err != nil {
		return err
	}
	sel0, err := r.comSelect(ctx)
	if err != nil {
		return err
	}
	t0 := time.Now()
	ir.base1, ir.sold1 = measure(fmt.Sprintf("%d streams open", streams.opened.Load()))
	sel1, err := r.comSelect(ctx)
	if err != nil {
		return err
	}
	ir.selectRate = float64(sel1-sel0) / time.Since(t0).Seconds()
	ir.still = streams.live.Load() // open through both runs
	streams.close()
	if failed := streams.failed.Load(); failed > 0 {
		r.violation("scenario 8: %d of %d streams failed to open", failed, n)
	}
	for _, res := range []Result{ir.sold0, ir.sold1} {
		if got := res.Count(http.StatusAccepted); got > 0 {
			r.violation("scenario 8: %d reservations accepted on a sold-out sale of 1 unit", got)
		}
	}
	r.add(ir.scenario())
	return nil
}

// idleSet is a set of open event streams that wait for a change.
type idleSet struct {
	opened, failed, live atomic.Int64
	took                 time.Duration // until every stream opened or failed
	cancel               context.CancelFunc
	wg                   sync.WaitGroup
}

// close closes every stream and waits for their goroutines.
func (s *idleSet) close() {
	s.cancel()
	s.wg.Wait()
}

// openIdleStreams opens the event streams of the first n reservations (64
// opens in flight) and returns once each opened or failed.
func (r *runner) openIdleStreams(ctx context.Context, api *Proc, ps *pollSet, n int) *idleSet {
	sctx, cancel := context.WithCancel(ctx)
	s := &idleSet{cancel: cancel}
	hc := streamClient(n + 16)
	start := time.Now()
	sem := make(chan struct{}, 64) // opens in flight
	for i := range n {
		sem <- struct{}{}
		s.wg.Go(func() {
			first := true
			err := openStream(sctx, hc, api.URL+client.EventsPath(ps.tokens[i]), ps.jwts[i], func(sseEvent) {
				if first {
					first = false
					s.opened.Add(1)
					s.live.Add(1)
					<-sem
				}
			})
			if !first {
				s.live.Add(-1)
				return
			}
			<-sem
			if s.failed.Add(1) <= 3 && err != nil {
				r.o.Logger.Warn("open stream", "err", err)
			}
		})
	}
	for s.opened.Load()+s.failed.Load() < int64(n) && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	s.took = time.Since(start)
	return s
}

// idleRuns are scenario 8's measurements.
type idleRuns struct {
	n, conns                   int
	base0, sold0, base1, sold1 Result
	rss0, rss1, still          int64
	openTook                   time.Duration
	selectRate                 float64
}

func (ir idleRuns) scenario() Scenario {
	n, conns, still, rss0, rss1 := ir.n, ir.conns, ir.still, ir.rss0, ir.rss1
	base0, sold0, base1, sold1 := ir.base0, ir.sold0, ir.base1, ir.sold1
	openTook, selectRate := ir.openTook, ir.selectRate
	mb := func(b int64) float64 { return float64(b) / (1 << 20) }
	return Scenario{
		ID: "8 idle streams", Title: fmt.Sprintf("One API holding %d idle event streams (loopback): memory, and the sold-out path vs GET /healthz without and with them, %d connections", n, conns),
		Runs: []Result{base0, sold0, base1, sold1},
		Figures: []Figure{
			{Name: "streams open", Value: float64(still), Unit: "streams", Target: fmt.Sprintf("%d", n)},
			{Name: "API RSS with the streams", Value: mb(rss1), Unit: "MB", Target: "< 200"},
			{Name: "API RSS before the streams", Value: mb(rss0), Unit: "MB"},
			{Name: "RSS per stream", Value: float64(rss1-rss0) / float64(max(still, 1)) / 1024, Unit: "KB"},
			{Name: "sold-out / healthz, no streams", Value: ratio(sold0.RPS, base0.RPS), Unit: "×"},
			{Name: "sold-out / healthz, streams open", Value: ratio(sold1.RPS, base1.RPS), Unit: "×"},
			{Name: "sold-out req/s with / without streams", Value: ratio(sold1.RPS, sold0.RPS), Unit: "×", Target: "≈ 1 (unchanged)"},
			{Name: "time to open the streams", Value: openTook.Seconds(), Unit: "s"},
			{Name: "MySQL SELECTs/s while the streams are open", Value: selectRate, Unit: "SELECT/s"},
		},
		Notes: []string{
			"each stream re-reads its status record every 30 s (the guard against a pub/sub wake-up lost without a reconnect; a reconnect makes every stream re-read), so idle streams are not free: 10,000 streams are about 330 status reads per second, which the API groups into shared Redis calls",
			"the streams' client (net/http, one goroutine per stream) runs in the load generator's process, on the same two cores",
		},
	}
}

// pushLatency: scenario 7, a burst of BurstStock units to as many users
// on 256 connections; each buyer then opens its reservation's event stream
// (64 opens in flight, right after the burst, while the drain to
// PENDING_PAYMENT runs); the time from the order workflow's status write
// to Redis (seen by the bench's own subscriber on the sale's event channel,
// which status.lua publishes on in the same script) to the event at the
// client.
func (r *runner) pushLatency(ctx context.Context, api *Proc) error {
	const conns = 256
	stock := r.o.BurstStock
	s, err := r.sale(ctx, api, "push latency", stock, 16, true)
	if err != nil {
		return err
	}
	jwts, _, err := r.users(int(stock))
	if err != nil {
		return err
	}
	// The write times: the subscriber runs before the first reservation.
	written, err := subscribeWrites(ctx, r.rdb, s.ID)
	if err != nil {
		return err
	}
	defer func() {
		if err := written.sub.Close(); err != nil {
			r.o.Logger.Warn("close the event subscription", "err", err)
		}
	}()

	c := newDoer(conns)
	url := api.URL + client.ReservationsPath(s.ID)
	tokens := make([]string, len(jwts))
	start := time.Now()
	op := func(ctx context.Context, i int64) (int, error) {
		st, token, err := reserveToken(c, url, jwts[i], i)
		tokens[i] = token
		return st, err
	}
	res, settled, err := ClosedLoopSettled(ctx, "burst reserve", conns, 3*time.Minute, int64(len(jwts)), op)
	if err != nil {
		return err
	}
	accepted := settled.Accepted(res)
	if accepted != stock {
		r.violation("scenario 7: %d reservations accepted, want exactly %d", accepted, stock)
	}
	sc := r.watchChanges(ctx, api, tokens, jwts, accepted)
	drain := time.Since(start)
	h, missingWrite := written.latencies(sc.changed)
	if sc.failures > 0 {
		r.violation("scenario 7: %d streams failed to open", sc.failures)
	}
	lat := Result{Name: "push: status write → event at client", Mode: "streams", Connections: sc.opened - sc.preOpened, Requests: h.TotalCount(), Seconds: drain.Seconds(), Status: map[string]int64{"event": h.TotalCount()}}
	fillLatency(&lat, h)
	r.add(Scenario{
		ID: "7 push latency", Title: fmt.Sprintf("Push latency during a %d-unit burst drain: the order workflow's Redis status write to the event at the client", stock),
		Runs: []Result{res, lat},
		Figures: []Figure{
			{Name: "push p50", Value: lat.P50MS, Unit: "ms"},
			{Name: "push p99", Value: lat.P99MS, Unit: "ms", Target: "< 100"},
			{Name: "push max", Value: lat.MaxMS, Unit: "ms"},
			{Name: "events timed", Value: float64(h.TotalCount()), Unit: "events"},
			{Name: "burst + drain time", Value: drain.Seconds(), Unit: "s"},
		},
		Notes: []string{
			"the write's time is when the bench's own subscriber to the sale's event channel received status.lua's message (published in the script that writes the record), so the figure leaves out Redis's own delivery to a subscriber (on loopback, well under a millisecond); an event that reached the client before the bench's subscriber saw the message counts as 1 µs",
			settleNote,
			fmt.Sprintf("each buyer opens its stream right after the burst (64 opens in flight); %d of %d streams opened after their change and are not timed; %d of the other %d had their change event within 5 minutes (the drain's end); %d changes without a seen write", sc.preOpened, sc.opened, len(sc.changed), sc.opened-sc.preOpened, missingWrite),
		},
	})
	return nil
}

// writeTimes records when the bench's own subscriber saw each token's
// status write published on a sale's event channel.
type writeTimes struct {
	sub *redis.PubSub
	mu  sync.Mutex
	at  map[string]time.Time
}

func subscribeWrites(ctx context.Context, rdb redis.UniversalClient, saleID int64) (*writeTimes, error) {
	w := &writeTimes{sub: rdb.Subscribe(ctx, redisgateway.EventChannel(saleID)), at: map[string]time.Time{}}
	if _, err := w.sub.Receive(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("subscribe to the sale's events: %w", err), w.sub.Close())
	}
	go func() {
		for m := range w.sub.Channel() {
			now := time.Now()
			w.mu.Lock()
			if _, ok := w.at[m.Payload]; !ok {
				w.at[m.Payload] = now
			}
			w.mu.Unlock()
		}
	}()
	return w, nil
}

// latencies is each change event's delay after its write, and how many
// changes had no write seen.
func (w *writeTimes) latencies(changed map[string]time.Time) (*hdrhistogram.Histogram, int) {
	h := hdrhistogram.New(1, 60_000_000, 3)
	missing := 0
	w.mu.Lock()
	defer w.mu.Unlock()
	for token, at := range changed {
		wrote, ok := w.at[token]
		if !ok {
			missing++
			continue
		}
		_ = h.RecordValue(max(at.Sub(wrote).Microseconds(), 1)) // clamped to the histogram's range
	}
	return h, missing
}

// streamChanges is what the buyers' event streams saw.
type streamChanges struct {
	mu        sync.Mutex
	changed   map[string]time.Time // the change event's arrival, by token
	preOpened int                  // streams whose first event was already the change
	opened    int
	failures  int
}

// watchChanges opens each buyer's event stream (64 opens in flight) and
// waits until every stream that opened before its change has had it, or
// 5 minutes.
func (r *runner) watchChanges(ctx context.Context, api *Proc, tokens, jwts []string, accepted int64) *streamChanges {
	sctx, closeStreams := context.WithTimeout(ctx, 5*time.Minute)
	defer closeStreams()
	hc := streamClient(len(tokens) + 16)
	sc := &streamChanges{changed: map[string]time.Time{}}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i, token := range tokens {
		if token == "" {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() { r.watchOne(sctx, hc, api.URL+client.EventsPath(token), jwts[i], token, sc, sem) })
	}
	for sctx.Err() == nil {
		sc.mu.Lock()
		done := sc.opened+sc.failures == int(accepted) && len(sc.changed) >= sc.opened-sc.preOpened
		sc.mu.Unlock()
		if done {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	closeStreams()
	wg.Wait()
	return sc
}

// watchOne follows one stream, freeing its slot in sem once it opened (or
// failed to).
func (r *runner) watchOne(ctx context.Context, hc *http.Client, url, jwt, token string, sc *streamChanges, sem chan struct{}) {
	first := true
	err := openStream(ctx, hc, url, jwt, func(ev sseEvent) {
		sc.mu.Lock()
		defer sc.mu.Unlock()
		if first {
			first = false
			sc.opened++
			if ev.id >= 2 {
				sc.preOpened++
			}
			<-sem
			return
		}
		if _, ok := sc.changed[token]; !ok && ev.id >= 2 {
			sc.changed[token] = ev.at
		}
	})
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if first {
		sc.failures++
		<-sem
		if err != nil && sc.failures <= 3 {
			r.o.Logger.Warn("open stream", "err", err)
		}
	}
}
