package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testkit/proc"
	"github.com/seckill/seckill/workflows"
)

func TestParseCommandStatsReadsCallsByCommand(t *testing.T) {
	info := "# Commandstats\r\n" +
		"cmdstat_get:calls=10511,usec=5000,usec_per_call=0.48,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_xinfo|groups:calls=1846,usec=900,usec_per_call=0.49,rejected_calls=0,failed_calls=0\r\n"
	got, err := parseCommandStats(info)
	if err != nil {
		t.Fatal(err)
	}
	if got["get"] != 10511 || got["xinfo|groups"] != 1846 || len(got) != 2 {
		t.Fatalf("parsed %v", got)
	}
	if _, err := parseCommandStats("cmdstat_get:calls=x,usec=1\r\n"); err == nil {
		t.Fatal("a malformed count parsed")
	}
}

func TestMarketCostPerSaleIsTheGrowthOverSalesAndInstances(t *testing.T) {
	w := 10 * time.Second
	before := marketIdleCost{instances: 3, window: w, commands: 3_000}
	after := marketIdleCost{instances: 3, window: w, commands: 3_000 + 10*3*1_000*0.05, byCommand: map[string]int64{"get": 1500}}
	sc := marketScenario(marketFigures{n: 1_000, idle0: before, idleN: after})
	for _, f := range sc.Figures {
		if f.Name == "idle Redis commands/s per live sale per instance" {
			if f.Value < 0.0499 || f.Value > 0.0501 {
				t.Fatalf("per sale per instance: %v, want 0.05", f.Value)
			}
			return
		}
	}
	t.Fatal("no per-sale figure")
}

// Each side's figure is the median of its rounds; the ratio is the
// median of the rounds' own ratios, not the ratio of the medians.
func TestMarketPathsCompareRoundByRound(t *testing.T) {
	rounds := func(rps ...float64) []marketPaths {
		var out []marketPaths
		for _, v := range rps {
			out = append(out, marketPaths{soldOut: Result{RPS: v}, inStock: Result{RPS: v / 10}})
		}
		return out
	}
	// Rounds' ratios 0.99, 1.2, 0.818...: median 0.99; the medians' 0.9.
	sc := marketScenario(marketFigures{n: 300, few: 2, one: rounds(1000, 500, 1100), many: rounds(990, 600, 900)})
	want := map[string]float64{"sold-out req/s, 2 live": 1000, "sold-out req/s, 300 live": 900, "sold-out, many live / few live": 0.99, "in-stock, many live / few live": 0.99}
	requireFigures(t, sc.Figures, want)
	if got := medianRPS(rounds(1, 3, 2, 4), func(p marketPaths) Result { return p.soldOut }); got != 2.5 {
		t.Fatalf("median of an even number of rounds: %v, want 2.5", got)
	}
}

func TestMarketRecoveryStandsBesideItsFewLiveBaseline(t *testing.T) {
	cut := func(before, during int64) cutPair {
		return cutPair{before: Result{Seconds: 2, Status: map[string]int64{"202": before}}, during: Result{Seconds: 2, Status: map[string]int64{"202": during, "503": 3}},
			beforeCost: cutCost{paths: 1, cut: 0.02, statements: 4000, seconds: 2}}
	}
	one := marketRecovery{keys: 1.5, left: true, back: 6, keysEach: []float64{1.5}, backEach: []float64{6}, cuts: []cutPair{cut(1000, 900)}}
	// CPU per 202: 1 ms before, 1 ms during (1 live); 1 ms, then 2 ms.
	one.cuts[0].duringCost = cutCost{paths: 0.9, cut: 0.04, statements: 3600, seconds: 2}
	many := marketRecovery{keys: 2, left: true, back: 8, keysEach: []float64{3, 2, 1}, backEach: []float64{8, 9, 7}, cuts: []cutPair{cut(1000, 500)}}
	many.cuts[0].switches = 1
	many.cuts[0].duringCost = cutCost{paths: 1, cut: 0.5, statements: -1, seconds: 2}
	got := map[string]Figure{}
	for _, f := range marketRecoveryFigures(marketFigures{n: 300, rec1: one, recN: many}) {
		got[f.Name] = f
	}
	check := func(name string, value float64, target string) {
		t.Helper()
		f, ok := got[name]
		if !ok {
			t.Fatalf("no figure %q in %v", name, got)
		}
		if f.Value < value-1e-9 || f.Value > value+1e-9 || f.Target != target {
			t.Errorf("%s: %v, target %q; want %v, %q", name, f.Value, f.Target, value, target)
		}
	}
	check("keys deleted → the next 202, 300 live", 2, "≤ 2.50 (1 live + 1 s)")
	check("Redis frozen 4s → the sale back on Redis, 300 live", 8, "≤ 7.00 (1 live + 1 s)")
	check("one API cut: the healthy one's 503s during the cut, 300 live", 3, "0")
	check("one API cut: the healthy one's 202/s during / before, 300 live", 0.5, "≥ 0.80 (1 live − 0.1)")
	check("one API cut: the fault sale's mode switches, 300 live", 1, "0")
	check("one API cut: the healthy one's CPU per 202 during / before, 300 live", 2, "≤ 1.10 (1 live + 0.1)")
	check("one API cut: the cut instance's CPU during the cut, 300 live", 25, "")
	check("one API cut: MariaDB statements/s during the cut, 300 live", -1, "")
	if u := got["keys deleted → the next 202, 300 live"].Unit; u != "s, median of 3: 3.00, 2.00, 1.00 (1 live: 1.50)" {
		t.Errorf("keys' unit: %q", u)
	}
	if u := got["Redis frozen 4s → the sale back on Redis, 300 live"].Unit; u != "s after the thaw, median of 3: 8.00, 9.00, 7.00 (1 live: 6.00)" {
		t.Errorf("freeze's unit: %q", u)
	}
	if u := got["one API cut: MariaDB statements/s during the cut, 300 live"].Unit; u != "statements/s, median (before: 2,000; 1 live: 1,800, before: 2,000)" {
		t.Errorf("statements' unit: %q", u)
	}
}

// The cut's ratios are the medians of the pairs' own ratios: a pair
// whose two runs both ran slow (the machine busy) moves neither, where
// the ratio of the runs' medians would pair a fast run with a slow one.
func TestMarketCutComparesEachPairsOwnRatio(t *testing.T) {
	pair := func(before, during int64, cpuBefore, cpuDuring float64) cutPair {
		return cutPair{before: Result{Seconds: 1, Status: map[string]int64{"202": before}}, during: Result{Seconds: 1, Status: map[string]int64{"202": during}},
			beforeCost: cutCost{paths: cpuBefore, seconds: 1}, duringCost: cutCost{paths: cpuDuring, seconds: 1}}
	}
	// 202/s ratios 1.0, 0.95, 1.1; the runs' medians 1,000 → 950 (0.95).
	// CPU per 202 ratios 1.0, 1.05, 0.9 (an unread pair left out).
	rec := marketRecovery{cuts: []cutPair{pair(1400, 1400, 1.4, 1.4), pair(1000, 950, 1, 0.9975), pair(500, 550, 0.5, 0.495), pair(0, 10, -1, 1)}}
	if got := rec.cutRatio(); got < 0.999 || got > 1.001 {
		t.Errorf("202/s ratio %v, want the median of the pairs' ratios, 1.0", got)
	}
	if got := rec.cutCPURatio(); got < 0.999 || got > 1.001 {
		t.Errorf("CPU per 202 ratio %v, want the median of the pairs' ratios, 1.0", got)
	}
}

// A warm-up round of the paths runs first on each side and is left out;
// then the sides take turns, each going first in every other round.
func TestMarketTurnsLeaveTheWarmUpsOutAndAlternate(t *testing.T) {
	r := &runner{o: Options{MarketRounds: 3}}
	var labels []string
	side := func(label string) marketPaths {
		labels = append(labels, label)
		return marketPaths{soldOut: Result{RPS: float64(len(labels))}}
	}
	many, few := r.marketTurns(side, side, "many", "few")
	want := []string{"many, warm-up (left out)", "few, warm-up (left out)", "many, round 1", "few, round 1",
		"few, round 2", "many, round 2", "many, round 3", "few, round 3"}
	if !slices.Equal(labels, want) {
		t.Fatalf("runs %q, want %q", labels, want)
	}
	rps := func(rounds []marketPaths) []float64 {
		var out []float64
		for _, rd := range rounds {
			out = append(out, rd.soldOut.RPS)
		}
		return out
	}
	if got := rps(many); !slices.Equal(got, []float64{3, 6, 7}) {
		t.Errorf("many rounds %v, want the runs 3, 6, 7", got)
	}
	if got := rps(few); !slices.Equal(got, []float64{4, 5, 8}) {
		t.Errorf("few rounds %v, want the runs 4, 5, 8", got)
	}
}

// The CPU per answer of each path is compared round by round, an unread
// round left out.
func TestMarketPathsCompareTheCPUPerAnswer(t *testing.T) {
	round := func(requests int64, cpu float64) marketPaths {
		return marketPaths{soldOut: Result{Requests: requests}, inStock: Result{Requests: requests / 10},
			soldOutCost: runCost{cpu: cpu}, inStockCost: runCost{cpu: cpu}}
	}
	// µs per sold-out answer: 10, 20, 12 (few live); 11, unread, 13
	// (many): the rounds' ratios 1.1 and 13/12, the unread one left out.
	one := []marketPaths{round(100_000, 1), round(100_000, 2), round(100_000, 1.2)}
	many := []marketPaths{round(100_000, 1.1), round(100_000, -1), round(100_000, 1.3)}
	want := map[string]float64{"sold-out paths' API CPU per answer, 2 live": 12, "sold-out paths' API CPU per answer, 300 live": 12,
		"sold-out CPU per answer, many live / few live": (1.1 + 13.0/12) / 2, "in-stock paths' API CPU per answer, 2 live": 120}
	requireFigures(t, marketPathFigures(marketFigures{n: 300, few: 2, one: one, many: many}), want)
}

func TestMarketStartFiguresSayWhetherEveryWorkflowRan(t *testing.T) {
	figures := func(samples ...startSample) map[string]Figure {
		got := map[string]Figure{}
		for _, f := range marketStartFigures(marketFigures{n: 1_000, created: 10 * time.Second, starts: samples}) {
			got[f.Name] = f
		}
		return got
	}
	const running, pace = "sale workflows running when the wait for them ended", "sale workflow start pace: running over the time from the first sale made"
	all := figures(startSample{0, 400}, startSample{5 * time.Second, 500}, startSample{30 * time.Second, 1_000})
	if f := all[running]; f.Value != 1_000 || f.Unit != "workflows (all 30s after the last was warmed)" || f.Target != "1,000, all" {
		t.Errorf("all ran: %+v", f)
	}
	if f := all[pace]; f.Value != 25 || f.Unit != "workflows/s over 40s (20.0 while waiting)" {
		t.Errorf("pace: %+v", f)
	}
	short := figures(startSample{0, 400}, startSample{marketStartWait, 900})
	if f := short[running]; f.Value != 900 || !strings.HasPrefix(f.Unit, "workflows (NOT all within 10m0s") {
		t.Errorf("not all ran: %+v", f)
	}
	if got := startSeries([]startSample{{0, 1}, {5 * time.Second, 2}, {30 * time.Second, 3}, {35 * time.Second, 4}, {50 * time.Second, 5}}, 30*time.Second); got != "0s 1, 30s 3, 50s 5" {
		t.Errorf("series: %q", got)
	}
	if got := startSeries(nil, 30*time.Second); got != "no count answered" {
		t.Errorf("no samples: %q", got)
	}
}

func TestMarketCutOutcomesTellThe503sApart(t *testing.T) {
	metrics := "# HELP seckill_filter_total x\n" +
		"seckill_filter_total{layer=\"sale_cache\",outcome=\"pass\"} 9000\n" +
		"seckill_filter_total{layer=\"redis\",outcome=\"ok\"} 2307\n" +
		"seckill_filter_total{layer=\"redis\",outcome=\"resync\"} 23178\n" +
		"seckill_filter_total_other 5\n" +
		"seckill_hold_records_total{outcome=\"refused\"} 40\n" +
		"seckill_hold_records_total{outcome=\"recorded\"} 2307\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, metrics)
	}))
	defer srv.Close()
	got, err := pathsOutcomes(context.Background(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"redis/ok": 2307, "redis/resync": 23178, "hold/refused": 40, "hold/recorded": 2307}
	if !maps.Equal(got, want) {
		t.Fatalf("outcomes %v, want %v", got, want)
	}
	before := map[string]float64{"redis/ok": 7, "hold/refused": 40, "hold/recorded": 7}
	if line := outcomesLine(before, got); line != "redis/resync×23178 hold/recorded×2300 redis/ok×2300" {
		t.Fatalf("line %q", line)
	}
	if line := outcomesLine(got, got); line != "none" {
		t.Fatalf("no change: %q", line)
	}
	if _, err := pathsOutcomes(context.Background(), "http://127.0.0.1:1/metrics"); err == nil {
		t.Fatal("no error from an API that does not answer")
	}
}

// The quiet wait reads the worker's work as the sum of its relay starts
// and the tasks Temporal handed it, every label set; a worker exporting
// none of them is an error, not a quiet worker.
func TestMarketWorkerWorkSumsItsCounters(t *testing.T) {
	body := "# TYPE seckill_inbox_started_total counter\nseckill_inbox_started_total 7\n" +
		"temporal_workflow_task_queue_poll_succeed_total{namespace=\"default\",task_queue=\"q\"} 3\n" +
		"temporal_workflow_task_queue_poll_succeed_total{namespace=\"default\",task_queue=\"sticky\"} 2\n" +
		"temporal_activity_execution_latency_seconds_count{activity_type=\"A\"} 4\n" +
		"temporal_workflow_task_queue_poll_succeed_totalx 100\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(body)) }))
	defer srv.Close()
	n, err := workerWorkDone(context.Background(), &Proc{Proc: &proc.Proc{Name: "worker"}, URL: srv.URL})
	require.NoError(t, err)
	require.Equal(t, 16.0, n)

	body = "go_goroutines 12\n"
	_, err = workerWorkDone(context.Background(), &Proc{Proc: &proc.Proc{Name: "worker"}, URL: srv.URL})
	require.ErrorContains(t, err, "exports none")
	require.Equal(t, "x: NOT within 5m0s", marketWait{what: "x", took: 5 * time.Minute}.String())
	require.Equal(t, "x: 12s", marketWait{what: "x", took: 12 * time.Second, came: true}.String())
}

// requireFigures checks that figures hold each of want's, by name, to
// within rounding.
func requireFigures(t *testing.T, figures []Figure, want map[string]float64) {
	t.Helper()
	for _, f := range figures {
		if w, ok := want[f.Name]; ok {
			if f.Value < w-1e-9 || f.Value > w+1e-9 {
				t.Errorf("%s: %v, want %v", f.Name, f.Value, w)
			}
			delete(want, f.Name)
		}
	}
	if len(want) > 0 {
		t.Fatalf("figures missing: %v", want)
	}
}

// The idle window with the sales begins once the server has fired the
// start-to-close timers of the worker's last sale activities, and
// waitQuiet waits its quietFor after the worker's last change.
func TestMarketSettledWaitOutlastsTheSaleActivitiesTimers(t *testing.T) {
	require.Greater(t, marketSettledQuietFor, workflows.SaleActivityTimeout)
	start := time.Now()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		// The counter moves for the first two seconds, then stands still.
		_, _ = fmt.Fprintf(w, "seckill_inbox_started_total %d\n", min(time.Since(start)/time.Second, 2))
	}))
	defer srv.Close()
	r := &runner{o: Options{Logger: slog.New(slog.DiscardHandler)}}
	w := r.waitQuiet(context.Background(), &Proc{Proc: &proc.Proc{Name: "worker"}, URL: srv.URL}, "x", 2*time.Second)
	require.True(t, w.came)
	require.GreaterOrEqual(t, time.Since(start), 4*time.Second)
}

// A side's recovery figure is the median of its rounds, or -1 when a
// round did not recover: a median would hide it.
func TestMarketRecoveredIsTheMedianUnlessARoundFailed(t *testing.T) {
	if got := recovered([]float64{3, 1, 2}); got != 2 {
		t.Errorf("median of 3, 1, 2: %v", got)
	}
	if got := recovered([]float64{3, -1, 2}); got != -1 {
		t.Errorf("a round that did not recover: %v, want -1", got)
	}
}

// The twin's sale ids begin between the dev database's and the bench's,
// at a place of each run's own.
func TestTwinSaleIDsMoveEachRunBelowTheBenchs(t *testing.T) {
	now := time.Unix(1_796_000_000, 0)
	a, b := twinSaleFloor(now), twinSaleFloor(now.Add(time.Second))
	if a < twinSaleBase || b >= benchSaleBase || b-a != 100_000 {
		t.Fatalf("floors %d, %d: want 10⁵ apart in [%d, %d)", a, b, twinSaleBase, benchSaleBase)
	}
	if last := twinSaleFloor(time.Unix(9_999_999, 0)); last+100_000 > benchSaleBase {
		t.Fatalf("the last floor %d leaves no room below %d", last, benchSaleBase)
	}
}
