package cluster_test

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/reconcile"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/test/cluster"
	"github.com/seckill/seckill/test/finalstate"
)

// judge checks the final state: the sale back on Redis, reconciliation
// clean, every 202 placed, one token per user, nothing oversold, the
// units left sold exactly to fresh buyers.
func (f *clusterFailover) judge(stock int64) {
	t := f.t
	stopped := f.grants.Since(phaseTakenOver)
	f.waitBackOnRedis()
	clean := f.waitClean()
	placed, failed := f.waitPlaced()
	f.grants.OneTokenEach(t)
	held := f.stateSound(stock)
	fresh, unsold := f.freshBuyTheRest(stock)
	final, err := f.readState()
	require.NoError(t, err)
	assert.Zero(t, final.BucketStock, "no unit left in the database's buckets")
	assert.Zero(t, final.RedisStock, "no unit left in Redis")
	assert.EqualValues(t, stock, holding(final), "every unit held or paid, none twice")
	firstAgain := f.grants.FirstAfter(phaseTakenOver)
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.returned
	t.Logf("cluster failover: 202s %d before the cut, %d during it, %d after the take-over (the first %s after it); "+
		"%d returning holders refused 409; their first requests re-sent at once answered their token %d times and 409 %d times, "+
		"and re-sent once the sale was rebuilt (%s after the take-over) answered their token %d times; "+
		"the crowd stopped %s after the take-over, reconciliation clean %s after it; %d/%d 202s placed (%d FAILED); "+
		"%d units held before the fresh buyers, who bought %d of %d left; %s",
		f.grants.Given(phaseReplicated), f.grants.Given(phaseCut), f.grants.Given(phaseTakenOver), firstAgain.Round(time.Millisecond),
		r.refused, r.replayedFirst+r.replayed, r.replayRefused, f.rebuiltIn.Round(time.Millisecond), r.replayedRebuilt,
		stopped.Round(time.Millisecond), clean.Round(time.Millisecond), placed, placed+failed, failed,
		held, fresh, unsold, f.howRebuilt())
	assert.Zero(t, failed, "every 202 reaches PENDING_PAYMENT")
	assert.LessOrEqual(t, firstAgain, 30*time.Second, "the sale sells again within 30 s of the take-over")
	assert.LessOrEqual(t, clean, 60*time.Second, "reconciliation is clean within 60 s of the take-over")
}

// waitBackOnRedis waits until the sale is on Redis and not marked for a
// rebuild, without an operator.
func (f *clusterFailover) waitBackOnRedis() {
	require.EventuallyWithT(f.t, func(c *assert.CollectT) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		sale, err := f.st.GetSale(ctx, f.saleID)
		if assert.NoError(c, err) {
			assert.Equal(c, domain.ModeRedis, sale.Mode)
			assert.False(c, sale.RedisWentBack, "marked for a rebuild")
		}
	}, 90*time.Second, 200*time.Millisecond, "the sale is back on Redis")
}

// waitClean waits until reconciliation, reporting only (the worker's
// passes repair), finds the sale clean; it returns the time from the
// take-over.
func (f *clusterFailover) waitClean() time.Duration {
	r := &reconcile.Reconciler{Store: f.st, Redis: redisgateway.NewClient(f.rdb), Temporal: f.tc, Gap: 300 * time.Millisecond}
	require.EventuallyWithT(f.t, func(c *assert.CollectT) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		rep, err := r.Run(ctx, f.saleID, false)
		if assert.NoError(c, err) {
			assert.True(c, rep.Consistent && rep.InFlight == 0 && len(rep.Discrepancies) == 0, "reconciliation clean: %+v", rep)
		}
	}, 120*time.Second, 200*time.Millisecond, "reconciliation clean")
	return f.grants.Since(phaseTakenOver)
}

// waitPlaced waits until every token given in a 202 is PENDING_PAYMENT
// (or PAID) or FAILED in the database, counts each and explains every
// FAILED one.
func (f *clusterFailover) waitPlaced() (placed, failed int) {
	given := f.grants.Tokens()
	var rows map[string]finalstate.Reservation
	require.EventuallyWithT(f.t, func(c *assert.CollectT) {
		rows = f.reservations(c)
		placed, failed = 0, 0
		for tok := range given {
			switch rows[tok].Status {
			case domain.StatusPendingPayment, domain.StatusPaid:
				placed++
			case domain.StatusFailed:
				failed++
			}
		}
		assert.Equal(c, len(given), placed+failed, "every 202's reservation placed or failed")
	}, 90*time.Second, 500*time.Millisecond)
	for _, tok := range slices.Sorted(maps.Keys(given)) {
		if r := rows[tok]; r.Status == domain.StatusFailed {
			f.t.Errorf("202 token %s ended FAILED: user %d request %s reason %q created %s updated %s", tok, r.UserID, r.RequestID,
				r.FailReason, r.CreatedAt.Format(time.StampMilli), r.UpdatedAt.Format(time.StampMilli))
		}
	}
	return placed, failed
}

// reservations reads the sale's reservations by token.
func (f *clusterFailover) reservations(c *assert.CollectT) map[string]finalstate.Reservation {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := f.st.DB.QueryContext(ctx, `SELECT token, user_id, request_id, status, COALESCE(fail_reason, ''), created_at, updated_at
		FROM reservations WHERE sale_id = ?`, f.saleID)
	if !assert.NoError(c, err) {
		return nil
	}
	defer rows.Close()
	out := map[string]finalstate.Reservation{}
	for rows.Next() {
		var r finalstate.Reservation
		if !assert.NoError(c, rows.Scan(&r.Token, &r.UserID, &r.RequestID, &r.Status, &r.FailReason, &r.CreatedAt, &r.UpdatedAt)) {
			return nil
		}
		out[r.Token] = r
	}
	assert.NoError(c, rows.Err())
	return out
}

// readState reads the sale's final state from MySQL, Redis and Temporal.
func (f *clusterFailover) readState() (finalstate.Sale, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return finalstate.Read(ctx, finalstate.Sources{DB: f.st.DB.DB, Redis: f.rdb, Temporal: f.tc}, f.saleID)
}

// holding counts the sale's reservations that hold or paid for a unit.
func holding(s finalstate.Sale) int {
	n := 0
	for _, r := range s.Reservations {
		if r.HoldsUnit() {
			n++
		}
	}
	return n
}

// stateSound waits until the sale's state breaks nothing (finalstate.Check:
// no user holding two units, no token ordered or deducted twice, one
// workflow per reservation, as Temporal's visibility catches up) and
// requires at most the stock held; it returns how many units are held.
func (f *clusterFailover) stateSound(stock int64) int {
	var s finalstate.Sale
	var found []finalstate.Finding
	var err error
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(time.Second) {
		if s, err = f.readState(); err == nil {
			if found = s.Check(); len(found) == 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("the sale's state breaks invariants 60 s on: %+v (read: %v)", found, err)
		}
	}
	held := holding(s)
	require.LessOrEqual(f.t, int64(held), stock, "units held or paid: nothing oversold")
	return held
}

// freshBuyTheRest: fresh users, 16 at once, buy exactly what is neither
// paid, pending nor queued, then find the sale sold out.
func (f *clusterFailover) freshBuyTheRest(stock int64) (fresh int, unsold int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	counts, err := f.st.CountReservations(ctx, f.saleID)
	require.NoError(f.t, err)
	unsold = stock - counts[domain.StatusPaid] - counts[domain.StatusPendingPayment] - counts[domain.StatusQueued]
	got := cluster.Crowd{Buyer: f.buyer, Clients: 16, NextUser: testenv.UniqueUser, UntilSoldOut: true,
		RequestID: func(user int64) string { return fmt.Sprintf("fresh-%d", user) }}.Run(ctx)
	require.NoError(f.t, ctx.Err(), "the fresh buyers find the sale sold out: %v", got.Status)
	assert.EqualValues(f.t, unsold, got.Status[http.StatusAccepted],
		"fresh users buy exactly stock_total - PAID - PENDING_PAYMENT - QUEUED: %v", got.Status)
	return got.Status[http.StatusAccepted], unsold
}

// howRebuilt tells what noticed the lost writes and rebuilt the sale: the
// APIs' hold records by outcome, the workers' rebuilds by cause (of every
// sale these workers serve), and their log lines about this sale.
func (f *clusterFailover) howRebuilt() string {
	holds, rebuilds := map[string]float64{}, map[string]float64{}
	for _, a := range f.apis {
		scrape(a.URL+"/metrics", "seckill_hold_records_total", "outcome", holds)
	}
	for _, w := range f.workers {
		scrape(w.MetricsURL, "seckill_sale_rebuild_duration_seconds_count", "cause", rebuilds)
	}
	id := strconv.FormatInt(f.saleID, 10)
	lines := func(procs []*testenv.Proc, what string) int {
		n := 0
		for _, p := range procs {
			for line := range strings.Lines(p.Log()) {
				if strings.Contains(line, what) && strings.Contains(line, id) {
					n++
				}
			}
		}
		return n
	}
	apis := []*testenv.Proc{f.apis[0].Proc, f.apis[1].Proc}
	workers := []*testenv.Proc{f.workers[0].Proc, f.workers[1].Proc}
	return fmt.Sprintf("hold records %v; rebuilds %v; API log lines: %d 'went back in time', %d 'overruled'; "+
		"worker log lines: %d 'Redis is behind the database' (the resyncer's counter check), %d 'rebuilding a sale'",
		holds, rebuilds, lines(apis, "redis went back in time"), lines(apis, "the database overruled"),
		lines(workers, "Redis is behind the database"), lines(workers, "rebuilding a sale from the database"))
}

// scrape adds the samples of metric from a Prometheus text page to into,
// by the value of label.
func scrape(url, metric, label string, into map[string]float64) {
	resp, err := http.Get(url)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, metric+"{") {
			continue
		}
		_, rest, _ := strings.Cut(line, label+`="`)
		value, rest, _ := strings.Cut(rest, `"`)
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(fields[len(fields)-1], 64); err == nil {
			into[value] += v
		}
	}
}
