package bench

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// marketFigures are scenario 13's measurements.
type marketFigures struct {
	n            int
	settled      time.Duration // from the last sale warmed to the idle window
	created      time.Duration // from the first sale made to the last warmed
	starts       []startSample // sale workflows running, counted while waiting for them
	rate         float64
	idle0, idleN marketIdleCost // before any path round, and with the sales
	wait0, waitN []marketWait   // what each idle window waited for
	waitMake     marketWait     // what the sales' making waited for
	waitTurns    marketWait     // what the paths' turns waited for
	holdSales    []int64        // the sales the paths and faults take holds on
	keyBytes     float64
	memBefore    int64          // Redis used_memory just before the sales were made
	one, many    []marketPaths  // the rounds with few sales live (the twin's), and with all, taken in turns
	few          int            // the twin's sales, live in its rounds
	rec1, recN   marketRecovery // the faults with few sales live, and with all
	listed, dup  int
}

// Scenario 13's goals that no other figure of the run is the baseline of:
// ten thousand idle sales in 20 MB of Redis, created and warmed in under two
// minutes, idling at a fiftieth of a core each process.
const (
	marketMemGoal  = 2048 // bytes of Redis per idle sale
	marketRateGoal = 100  // sales created and warmed a second
	marketIdleGoal = 2    // % of a core, each process
	marketNoise    = 1.0  // seconds a recovery may differ by: the worker's tick
	marketRatioTol = 0.1  // a during/before ratio's noise
)

// perSecond is a count over the window, per second.
func (ic marketIdleCost) perSecond(v float64) float64 { return v / ic.window.Seconds() }

// marketScenario is scenario 13's report.
func marketScenario(m marketFigures) Scenario {
	figures := append(marketStartFigures(m), marketIdleFigures(m)...)
	figures = append(figures, marketPathFigures(m)...)
	figures = append(figures, marketRecoveryFigures(m)...)
	figures = append(figures,
		Figure{Name: "sales listed by GET /api/v1/sales?status=live (pages of 200)", Value: float64(m.listed), Unit: "sales", Target: fmt.Sprintf("%d, each once", m.n)},
		Figure{Name: "sales listed twice", Value: float64(m.dup), Unit: "sales", Target: "0"},
	)
	var runs []Result
	for _, rd := range append(slices.Clone(m.one), m.many...) {
		runs = append(runs, rd.soldOut, rd.inStock)
	}
	for _, rec := range []marketRecovery{m.rec1, m.recN} {
		for _, p := range rec.cuts {
			runs = append(runs, p.before, p.during)
		}
	}
	return Scenario{
		ID: "13 market", Title: fmt.Sprintf("A marketplace: %d live sales, their idle cost, one sale's paths and recovery beside them", m.n),
		Runs:    runs,
		Figures: figures,
		Notes:   marketNotes(m),
	}
}

// marketIdleFigures are the creation's and the idle windows' figures.
func marketIdleFigures(m marketFigures) []Figure {
	n := float64(max(m.n, 1))
	i0, iN := m.idle0, m.idleN
	apis := float64(iN.instances - 1)
	cmd0, cmdN := i0.perSecond(float64(i0.commands)), iN.perSecond(float64(iN.commands))
	idleGoal := fmt.Sprintf("≤ %d", marketIdleGoal)
	figures := []Figure{
		{Name: "sales created and warmed", Value: float64(m.n), Unit: "sales"},
		{Name: "create + warm-up rate", Value: m.rate, Unit: "sales/s", Target: fmt.Sprintf("≥ %d", marketRateGoal)},
		{Name: "idle Redis commands/s, whole fleet, before → with the sales", Value: cmdN, Unit: fmt.Sprintf("cmd/s (before: %s)", num(cmd0))},
		{Name: "idle Redis commands/s per live sale per instance", Value: (cmdN - cmd0) / float64(iN.instances) / n, Unit: "cmd/s", Target: "≤ 0.05"},
		{Name: "idle API CPU (each API)", Value: iN.perSecond(iN.apiCPU) / apis * 100, Unit: fmt.Sprintf("%% of a core (before: %s)", num(i0.perSecond(i0.apiCPU)/apis*100)), Target: idleGoal},
		{Name: "idle worker CPU", Value: iN.perSecond(iN.workerCPU) * 100, Unit: fmt.Sprintf("%% of a core (before: %s)", num(i0.perSecond(i0.workerCPU)*100)), Target: idleGoal},
	}
	if iN.temporalCPU >= 0 && i0.temporalCPU >= 0 {
		figures = append(figures, Figure{Name: "idle Temporal server CPU", Value: iN.perSecond(iN.temporalCPU) * 100,
			Unit: fmt.Sprintf("%% of a core (before: %s)", num(i0.perSecond(i0.temporalCPU)*100)), Target: idleGoal})
	}
	memGoal := fmt.Sprintf("≤ %s", commas(marketMemGoal))
	return append(figures,
		Figure{Name: "Redis memory per idle sale: its keys (MEMORY USAGE)", Value: m.keyBytes, Unit: "bytes", Target: memGoal},
		Figure{Name: "Redis memory per idle sale: used_memory growth", Value: float64(iN.mem-m.memBefore) / n,
			Unit: fmt.Sprintf("bytes (%s before the sales, %s after)", commas(m.memBefore), commas(iN.mem)), Target: memGoal})
}

// marketPathFigures are the paths' medians over the rounds on each side
// and their ratios, each the median of the rounds' own (a round's two
// sides run back to back, so the machine's drift between rounds cancels
// in it): the rates, and the paths' API's CPU per answer, which the
// machine's other work disturbs less than a rate.
func marketPathFigures(m marketFigures) []Figure {
	var figures []Figure
	few, many := fmt.Sprintf("%d live", m.few), fmt.Sprintf("%d live", m.n)
	rounds := fmt.Sprintf("req/s (median of %d rounds)", len(m.one))
	perAnswer := fmt.Sprintf("µs of CPU per answer, user + system (median of %d rounds)", len(m.one))
	ratios := fmt.Sprintf("× (median of %d rounds' own)", len(m.one))
	for _, path := range marketPathKinds {
		figures = append(figures,
			Figure{Name: path.name + " req/s, " + few, Value: medianOf(m.one, path.rps), Unit: rounds},
			Figure{Name: path.name + " req/s, " + many, Value: medianOf(m.many, path.rps), Unit: rounds},
			Figure{Name: path.name + ", many live / few live", Value: m.pathsRatio(path.rps), Unit: ratios, Target: "≥ 0.95"},
			Figure{Name: path.name + " paths' API CPU per answer, " + few, Value: medianOf(m.one, path.cpu), Unit: perAnswer},
			Figure{Name: path.name + " paths' API CPU per answer, " + many, Value: medianOf(m.many, path.cpu), Unit: perAnswer},
			Figure{Name: path.name + " CPU per answer, many live / few live", Value: m.pathsRatio(path.cpu), Unit: ratios, Target: "≤ 1.05"})
		figures = append(figures, allocFigures(m, path.name, path.allocs)...)
	}
	return figures
}

// pathsRatio is the median over the rounds of a reading's many-live /
// few-live ratio, rounds unread on either side left out (-1 if none is
// left).
func (m marketFigures) pathsRatio(value func(marketPaths) float64) float64 {
	ratios := make([]float64, min(len(m.one), len(m.many)))
	for i := range ratios {
		ratios[i] = pairRatio(value(m.one[i]), value(m.many[i]))
	}
	return medianOf(ratios, func(v float64) float64 { return v })
}

// allocFigures are a path's heap allocations per answer in the paths'
// API, medians of the rounds and their ratio: a count, steady within a
// side where the CPU per answer is not; the background's allocations (the
// refresher's, which grow with the sales) are spread over the answers, so
// the ratio moves with the rate and has no goal of its own.
func allocFigures(m marketFigures, path string, allocs func(marketPaths) float64) []Figure {
	unit := fmt.Sprintf("allocations per answer (median of %d rounds)", len(m.one))
	return []Figure{
		{Name: fmt.Sprintf("%s paths' API allocations per answer, %d live", path, m.few), Value: medianOf(m.one, allocs), Unit: unit},
		{Name: fmt.Sprintf("%s paths' API allocations per answer, %d live", path, m.n), Value: medianOf(m.many, allocs), Unit: unit},
		{Name: path + " allocations per answer, many live / few live", Value: m.pathsRatio(allocs), Unit: fmt.Sprintf("× (median of %d rounds' own)", len(m.one))},
	}
}

// marketPathKinds are the two paths of a round: their name, rate and the
// paths' API's CPU and heap allocations per answer (-1 unread).
var marketPathKinds = []struct {
	name             string
	rps, cpu, allocs func(marketPaths) float64
}{
	{"sold-out", func(p marketPaths) float64 { return p.soldOut.RPS }, func(p marketPaths) float64 { return p.soldOutCost.perAnswerUS(p.soldOut) },
		func(p marketPaths) float64 { return perAnswer(p.soldOutCost.allocs, p.soldOut) }},
	{"in-stock", func(p marketPaths) float64 { return p.inStock.RPS }, func(p marketPaths) float64 { return p.inStockCost.perAnswerUS(p.inStock) },
		func(p marketPaths) float64 { return perAnswer(p.inStockCost.allocs, p.inStock) }},
}

// medianRPS is the median rate of the runs pick takes from the rounds.
func medianRPS(rounds []marketPaths, pick func(marketPaths) Result) float64 {
	return medianOf(rounds, func(p marketPaths) float64 { return pick(p).RPS })
}

// medianOf is the median of the rounds' values (the mean of the middle
// two of an even number), those below zero (unread) left out; -1 when
// none is left.
func medianOf[T any](rounds []T, value func(T) float64) float64 {
	var vs []float64
	for _, rd := range rounds {
		if v := value(rd); v >= 0 {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return -1
	}
	slices.Sort(vs)
	return (vs[(len(vs)-1)/2] + vs[len(vs)/2]) / 2
}

// accepted202 is a run's 202s a second.
func accepted202(res Result) float64 {
	if res.Seconds == 0 {
		return 0
	}
	return float64(res.Count(http.StatusAccepted)) / res.Seconds
}

// marketNotes are scenario 13's notes.
func marketNotes(m marketFigures) []string {
	i0, iN := m.idle0, m.idleN
	var rounds []string
	for i := range min(len(m.one), len(m.many)) {
		rounds = append(rounds, fmt.Sprintf("%s/%s", num(ratio(m.many[i].soldOut.RPS, m.one[i].soldOut.RPS)), num(ratio(m.many[i].inStock.RPS, m.one[i].inStock.RPS))))
	}
	notes := []string{
		fmt.Sprintf("a Redis of the scenario's own (the product's settings), which the faults freeze; two idle windows of %s with nobody buying, %d instances (three APIs, one worker): before any path round, the scenario's three sales live, and with the sales, once %d of the %d sale workflows ran and the sales had opened, then %s (%s after the last was warmed); per live sale: the difference over the sales and the instances", iN.window.Round(time.Second), iN.instances, lastRunning(m.starts), m.n, marketLookWait, m.settled.Round(time.Second)),
		"what each idle window waited for (and how long): before: " + waits(m.wait0) + "; with the sales: " + waits(m.waitN) + "; the sales were made after " + m.waitMake.String() + "; the paths' turns began after " + m.waitTurns.String(),
		"sale workflows running (a visibility count every 5 s, at most " + marketStartWait.String() + ") by time since the last sale was warmed: " + startSeries(m.starts, 30*time.Second),
		"Redis calls from INFO commandstats, the bench's own INFO taken out; most called before: " + i0.topCommands(6) + "; with the sales: " + iN.topCommands(6),
		"CPU: user + system time from /proc over each window; Temporal: " + cmp.Or(iN.temporalWhat, "not on this host, not metered"),
		"what the dev server did over each idle window (its Go runtime's collections and heap, then its task_requests and persistence_requests by operation), before: " + i0.serverWork + "; with the sales: " + iN.serverWork,
		fmt.Sprintf("the paths: 64 connections on an API whose task queue nobody polls, a sold-out sale of one unit and an in-stock sale; %d live: the market's paths API once its sales are made, warmed and idle; %d live: the twin's, the same processes (an API, a worker, a paths API) on a Redis and a database of their own on the same servers, with only its paths' sales; after a warm-up round each (left out), %d rounds, the two sides taking turns (the market's first in odd rounds, the twin's in even), so the machine's drift meets both; many / few live, sold-out/in-stock, round by round: %s", m.n, m.few, len(m.one), strings.Join(rounds, ", ")),
		fmt.Sprintf("recovery, each fault on an in-stock sale of the paths' API made for it, with the three sales live, then with all: keys deleted (all but the inbox) while %d connections reserve for fresh users, until the next 202; Redis frozen (SIGSTOP) for %s under the same probe, from the thaw until the sale's mode is redis again (it left: %t, %t); -1: not within %s (or, for the keys, no 202 before the deletion); then the same probe until the paths' API sells it again (it learns the switch back at its sale cache's refresh, answering 503 resync until then): %s s, %s s after the database had it back", probeConns, marketPause, m.rec1.left, m.recN.left, marketRecoverWithin, num(m.rec1.sells), num(m.recN.sells)),
		fmt.Sprintf("the probes' answers, keys deleted: %s (1 live), %s (%d live); Redis frozen: %s, %s", m.rec1.keysProbe, m.recN.keysProbe, m.n, m.rec1.pauseProbe, m.recN.pauseProbe),
		"the paths' API, round by round (few live, then many): " + pathsCostLine(m.one) + "; " + pathsCostLine(m.many) + profileNotes(m),
		"listing: the storefront's list of live sales walked page by page with its cursor (client.AllSales)",
	}
	notes = append(notes, cutNotes(m)...)
	for _, ic := range []marketIdleCost{i0, iN} {
		if ic.profile != "" {
			notes = append(notes, ic.profile)
		}
	}
	return notes
}

// waits are the waits before an idle window, in words.
func waits(ws []marketWait) string {
	parts := make([]string, len(ws))
	for i, w := range ws {
		parts[i] = w.String()
	}
	return strings.Join(parts, "; then ")
}

// pathsCostLine is each round's CPU and heap allocations per answer
// (sold-out/in-stock), and the sold-out run's bytes allocated per answer,
// heap in use at its end (MB) and GC cycles over it.
func pathsCostLine(rounds []marketPaths) string {
	parts := make([]string, len(rounds))
	for i, rd := range rounds {
		so, is := rd.soldOutCost, rd.inStockCost
		parts[i] = fmt.Sprintf("%s/%s µs, %s/%s allocs, %s B, %s MB, %.0f GCs", num(so.perAnswerUS(rd.soldOut)), num(is.perAnswerUS(rd.inStock)),
			num(perAnswer(so.allocs, rd.soldOut)), num(perAnswer(is.allocs, rd.inStock)), num(perAnswer(so.bytes, rd.soldOut)), num(so.heap/1e6), so.gcs)
	}
	return strings.Join(parts, ", ")
}

// profileNotes names the paths' runs' CPU profiles, when taken.
func profileNotes(m marketFigures) string {
	var notes []string
	for _, rd := range append(slices.Clone(m.one), m.many...) {
		notes = append(notes, rd.profiles...)
	}
	if len(notes) == 0 {
		return ""
	}
	return "; CPU profiles of the paths' runs: " + strings.Join(notes, ", ")
}

// startSample is a count of scenario 13's running sale workflows, at its
// time since the last sale was warmed.
type startSample struct {
	at      time.Duration
	running int64
}

// lastRunning is the last count of samples (0 without one).
func lastRunning(samples []startSample) int64 {
	if len(samples) == 0 {
		return 0
	}
	return samples[len(samples)-1].running
}

// marketStartFigures are how the market's sale workflows came to run:
// how many ran when the wait for them ended, and the pace of their
// starts from the first sale made (the API's starts run during the
// creations) and over the wait.
func marketStartFigures(m marketFigures) []Figure {
	running, all := lastRunning(m.starts), "NOT all within "+marketStartWait.String()+": the idle window measured their starts too"
	var over time.Duration
	if len(m.starts) > 0 {
		last := m.starts[len(m.starts)-1]
		over = m.created + last.at
		if running >= int64(m.n) {
			all = fmt.Sprintf("all %s after the last was warmed", last.at.Round(time.Second))
		}
	}
	pace := fmt.Sprintf("workflows/s over %s (%s while waiting)", over.Round(time.Second), num(waitPace(m.starts)))
	return []Figure{
		{Name: "sale workflows running when the wait for them ended", Value: float64(running), Unit: "workflows (" + all + ")",
			Target: commas(int64(m.n)) + ", all"},
		{Name: "sale workflow start pace: running over the time from the first sale made", Value: ratio(float64(running), over.Seconds()), Unit: pace},
	}
}

// waitPace is the running count's growth a second over the samples.
func waitPace(samples []startSample) float64 {
	if len(samples) < 2 {
		return 0
	}
	first, last := samples[0], samples[len(samples)-1]
	return ratio(float64(last.running-first.running), (last.at - first.at).Seconds())
}

// startSeries is the running counts about every step, and the last.
func startSeries(samples []startSample, step time.Duration) string {
	var parts []string
	next := time.Duration(0)
	for i, s := range samples {
		if s.at >= next || i == len(samples)-1 {
			parts = append(parts, fmt.Sprintf("%s %s", s.at.Round(time.Second), commas(s.running)))
			next = s.at.Truncate(step) + step
		}
	}
	if len(parts) == 0 {
		return "no count answered"
	}
	return strings.Join(parts, ", ")
}
