package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/netproxy"
)

// fallback: scenario 5, the database path through the API at its rate
// limit. An API and a worker of their own reach Redis through a proxy; the
// sale is warmed and its Redis stock recorded, then the proxy is cut (Redis
// "dies" for both), the breaker opens, and distinct users send open-loop
// load at twice SECKILL_FALLBACK_RPS.
func (r *runner) fallback(ctx context.Context) error {
	const stock = 1_000_000
	proxy, err := netproxy.Start(r.o.RedisAddr, 0)
	if err != nil {
		return err
	}
	defer proxy.Close()
	taskQueue := "bench-fallback-" + r.stamp
	env := r.env(taskQueue)
	env["REDIS_ADDR"] = proxy.Addr()
	api, worker, err := r.startStackEnv(ctx, "api-fallback", "worker-fallback", env)
	if err != nil {
		return err
	}
	defer api.Stop()
	defer worker.Stop()

	s, err := r.sale(ctx, api, "fallback", stock, 16, true)
	if err != nil {
		return err
	}
	toks, _, err := r.users(int(4*r.o.FallbackRPS*r.o.Dur.Seconds()) + 1000)
	if err != nil {
		return err
	}
	c := newDoer(256)
	url := api.URL + client.ReservationsPath(s.ID)
	op := reserveOp(c, url, toks)
	next := int64(0)
	// One unit through Redis, so the API caches the sale and the worker
	// records a stock Redis really had.
	if st, err := op(ctx, next); err != nil || st != http.StatusAccepted {
		return fmt.Errorf("fallback setup: reservation through Redis answered %d: %v", st, err)
	}
	next++
	if err := r.waitRedisStockSeen(ctx, s.ID, stock-1); err != nil {
		return err
	}

	// Redis dies. The first requests fail (503, outcome unknown) until the
	// breaker opens; the first database-path reservation switches the sale.
	proxy.SetCut(true)
	tripping, err := r.tripToDatabase(ctx, s.ID, op, &next)
	if err != nil {
		return err
	}
	quota := int64(stock - 1) // what Redis had unsold when last seen

	offered := 2 * r.o.FallbackRPS
	// Users continue after the ones used above, none twice.
	first := next
	load := func(ctx context.Context, i int64) (int, error) { return op(ctx, first+i) }
	var res Result
	var split string
	questions, err := r.questionsDuring(ctx, func() {
		split = r.cpuSplitOver(api, worker, func() { res = OpenLoop(ctx, "database path via the API", offered, r.o.Dur, 256, load) })
	})
	if err != nil {
		return err
	}
	if res.Requests+first > int64(len(toks)) {
		return fmt.Errorf("fallback: %d requests outran the %d minted users", res.Requests+first, len(toks))
	}
	accepted := res.Count(http.StatusAccepted)
	acceptedRate := float64(accepted) / res.Seconds
	outcomes, err := r.databaseOutcomes(ctx, api)
	if err != nil {
		return err
	}
	if err := r.checkFallback(ctx, s.ID, quota, accepted+1); err != nil {
		return err
	}
	proxy.SetCut(false)

	sc := fallbackScenario(r.o.FallbackRPS, offered, res, outcomes, float64(questions)/float64(max(accepted, 1)), acceptedRate, tripping)
	sc.Notes = append(sc.Notes, split)
	r.add(sc)
	return nil
}

// cpuSplitOver runs f and says what share of the host's cores each
// process used meanwhile: the API, the worker, the Temporal server,
// Redis with MariaDB and the load generator (this process). Every
// process shares the cores, so a latency's tail is read against it.
func (r *runner) cpuSplitOver(api, worker *Proc, f func()) string {
	m := r.burstMeters(api, worker)
	procs := []struct {
		name  string
		meter cpuMeter
	}{
		{"API", m.api}, {"worker", m.worker}, {m.serverName, m.server}, {"Redis + MariaDB", m.services},
		{"load generator", cpuMeter{func() (float64, error) { return pidCPU(os.Getpid()) }}},
	}
	before := make([]float64, len(procs))
	for i, p := range procs {
		before[i] = m.read(p.meter)
	}
	start := time.Now()
	f()
	secs := time.Since(start).Seconds()
	parts := make([]string, len(procs))
	for i, p := range procs {
		parts[i] = fmt.Sprintf("%s %.2f", p.name, (m.read(p.meter)-before[i])/secs)
	}
	note := fmt.Sprintf("cores used over the open loop (of %d): %s", runtime.NumCPU(), strings.Join(parts, ", "))
	if len(m.notes) > 0 {
		note += " (" + strings.Join(m.notes, "; ") + ")"
	}
	return note
}

// tripToDatabase trips the breaker (tripBreaker) and checks that the
// sale then is in database mode.
func (r *runner) tripToDatabase(ctx context.Context, saleID int64, op Op, next *int64) ([]int, error) {
	tripping, err := tripBreaker(ctx, op, next)
	if err != nil {
		return tripping, err
	}
	return tripping, r.checkDatabaseMode(ctx, saleID)
}

// checkDatabaseMode: after a database-path reservation the sale is in
// database mode.
func (r *runner) checkDatabaseMode(ctx context.Context, saleID int64) error {
	sale, err := r.st.GetSale(ctx, saleID)
	if err != nil {
		return fmt.Errorf("fallback: read sale: %w", err)
	}
	if sale.Mode != domain.ModeDatabase {
		r.violation("scenario 5: sale %d in mode %s after a database-path reservation, want database", saleID, sale.Mode)
	}
	return nil
}

// questionsDuring runs f and returns the statements MariaDB answered
// meanwhile (global Questions).
func (r *runner) questionsDuring(ctx context.Context, f func()) (int64, error) {
	q0, err := r.globalStatus(ctx, "Questions")
	if err != nil {
		return 0, err
	}
	f()
	q1, err := r.globalStatus(ctx, "Questions")
	if err != nil {
		return 0, err
	}
	return q1 - q0, nil
}

// tripBreaker reserves with op, from user *next on, until one is
// accepted (the database path took over) and returns the answers until
// then.
func tripBreaker(ctx context.Context, op Op, next *int64) ([]int, error) {
	var tripping []int
	tripCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		st, err := op(tripCtx, *next)
		*next++
		if err != nil {
			return tripping, fmt.Errorf("fallback: tripping the breaker: %w", err)
		}
		tripping = append(tripping, st)
		if st == http.StatusAccepted {
			return tripping, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// fallbackScenario is scenario 5's report.
func fallbackScenario(limit, offered float64, res Result, outcomes map[string]float64, statementsPer202, acceptedRate float64, tripping []int) Scenario {
	return Scenario{
		ID: "5 fallback", Title: fmt.Sprintf("Database fallback path through the API (Redis cut), SECKILL_FALLBACK_RPS=%g, open loop at %g/s", limit, offered),
		Runs: []Result{res},
		Figures: []Figure{
			{Name: "accepted/s (202)", Value: acceptedRate, Unit: "res/s", Target: fmt.Sprintf("≥ %g (0.95 of the limit)", 0.95*limit), Published: pubRowLock},
			{Name: "refused by the limit (429)", Value: float64(res.Count(http.StatusTooManyRequests)), Unit: "answers"},
			{Name: "refused in flight (429, saturated)", Value: outcomes["saturated"], Unit: "answers"},
			{Name: "MySQL statements per 202", Value: statementsPer202, Unit: "statements"},
			{Name: "p99 of the 202s", Value: res.StatusP99MS["202"], Unit: "ms", Target: "< 50", Published: pubIssue1471},
			{Name: "p99 (all answers)", Value: res.P99MS, Unit: "ms"},
		},
		Notes: []string{
			fmt.Sprintf("API and worker of their own reach Redis through a TCP proxy that is cut after one reservation through Redis and the worker's record of the Redis stock; answers while the breaker tripped (not timed): %v", tripping),
			fmt.Sprintf("the API's database-path outcomes (seckill_filter_total{layer=\"database\"}, the trip included): %v", outcomes),
			"MySQL statements per 202: MariaDB's global Questions over the open loop (the reservations' and everything else's: the starter's dispatch marks, the order workflows' activities, the relays, the sale cache) per 202",
			"distinct users, one request each; 429 = the fallback limiter, 503 = outcome unknown (retry); checked afterwards: sold ≤ quota, nobody twice, one order per reservation, buckets net of orders",
		},
	}
}

// waitRedisStockSeen waits until the worker recorded the sale's Redis
// stock (it does every second), so the database path's quota is real.
func (r *runner) waitRedisStockSeen(ctx context.Context, saleID, want int64) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		var seen *int64
		err := r.st.DB.QueryRowContext(ctx, "SELECT redis_stock_seen FROM sales WHERE id = ?", saleID).Scan(&seen)
		if err != nil {
			return fmt.Errorf("fallback: read redis_stock_seen: %w", err)
		}
		if seen != nil && *seen == want {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.New("fallback: the worker did not record the Redis stock within 30 s")
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// checkFallback checks the sale in MySQL after the run: the database path
// sold no more than its quota, nobody twice, one order per database-path
// reservation, and the buckets hold the stock net of the orders.
func (r *runner) checkFallback(ctx context.Context, saleID, quota, accepted int64) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var dbRes, users, orders, orderUsers, left int64
	if err := r.st.DB.QueryRowContext(ctx, "SELECT COUNT(*), COUNT(DISTINCT user_id) FROM reservations WHERE sale_id = ? AND path = ?",
		saleID, string(domain.PathDatabase)).Scan(&dbRes, &users); err != nil {
		return fmt.Errorf("fallback: count reservations: %w", err)
	}
	if err := r.st.DB.QueryRowContext(ctx, "SELECT COUNT(*), COUNT(DISTINCT user_id) FROM orders WHERE sale_id = ?", saleID).Scan(&orders, &orderUsers); err != nil {
		return fmt.Errorf("fallback: count orders: %w", err)
	}
	if err := r.st.DB.QueryRowContext(ctx, "SELECT COALESCE(SUM(stock), 0) FROM stock_buckets WHERE sale_id = ?", saleID).Scan(&left); err != nil {
		return fmt.Errorf("fallback: bucket stock: %w", err)
	}
	sale, err := r.st.GetSale(ctx, saleID)
	if err != nil {
		return fmt.Errorf("fallback: read sale: %w", err)
	}
	switch {
	case dbRes > quota:
		r.violation("scenario 5: the database path sold %d units, quota %d", dbRes, quota)
	case dbRes != accepted:
		r.violation("scenario 5: %d database-path reservations for %d answers 202", dbRes, accepted)
	case users != dbRes || orderUsers != orders:
		r.violation("scenario 5: a user bought twice: %d reservations of %d users, %d orders of %d users", dbRes, users, orders, orderUsers)
	case left != sale.StockTotal-orders:
		r.violation("scenario 5: buckets hold %d, want %d - %d orders", left, sale.StockTotal, orders)
	}
	return nil
}

// databaseOutcomes reads the API's count of database-path answers by
// outcome (ok, rate_limited, saturated, ...) from its /metrics.
func (r *runner) databaseOutcomes(ctx context.Context, api *Proc) (map[string]float64, error) {
	return r.apiCounters(ctx, api, `seckill_filter_total{layer="database",outcome="`)
}

// apiCounters reads the API's /metrics series that start with prefix (a
// metric and its labels up to the last label's opening quote), by that
// label's value.
func (r *runner) apiCounters(ctx context.Context, api *Proc, prefix string) (map[string]float64, error) {
	c, err := r.admin(api)
	if err != nil {
		return nil, err
	}
	body, err := c.Metrics(ctx)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	out := map[string]float64{}
	for line := range strings.Lines(body) {
		rest, ok := strings.CutPrefix(line, prefix)
		if !ok {
			continue
		}
		label, value, ok := strings.Cut(rest, `"} `)
		if !ok {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil {
			out[label] = v
		}
	}
	return out, nil
}

// globalStatus is one of MariaDB's global status counters.
func (r *runner) globalStatus(ctx context.Context, name string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var got string
	var n int64
	if err := r.st.DB.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE ?", name).Scan(&got, &n); err != nil {
		return 0, fmt.Errorf("read global status %s: %w", name, err)
	}
	return n, nil
}

// metricSum is the sum of a metric's samples (every label set) in the
// /metrics text at metricsURL.
func metricSum(ctx context.Context, metricsURL, name string) (float64, error) {
	samples, err := metricSamples(ctx, metricsURL, name)
	sum := 0.0
	for _, v := range samples {
		sum += v
	}
	return sum, err
}

// metricSamples are a metric's samples in the /metrics text at
// metricsURL, by their label set as written ("" without labels).
func metricSamples(ctx context.Context, metricsURL, name string) (map[string]float64, error) {
	page, err := metricsPage(ctx, metricsURL)
	if err != nil {
		return nil, err
	}
	return samplesIn(page, name), nil
}

// metricsPage is the text of a /metrics page.
func metricsPage(ctx context.Context, metricsURL string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, metricsURL, nil)
	if err != nil {
		return "", fmt.Errorf("metrics: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("metrics: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("metrics: %w", err)
	}
	return string(body), nil
}

// samplesIn are the samples of the metric name on a /metrics page, by
// their label set, summed.
func samplesIn(page, name string) map[string]float64 {
	out := map[string]float64{}
	for line := range strings.Lines(page) {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		labels, value := "", strings.TrimSpace(rest)
		if rest[0] == '{' {
			end := strings.LastIndexByte(rest, '}')
			if end < 0 {
				continue
			}
			labels, value = rest[1:end], strings.TrimSpace(rest[end+1:])
		}
		fields := strings.Fields(value)
		if len(fields) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(fields[0], 64); err == nil {
			out[labels] += v
		}
	}
	return out
}
