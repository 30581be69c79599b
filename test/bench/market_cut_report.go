package bench

import (
	"fmt"
	"net/http"
	"strings"
)

// The API cut's report: each figure over the pairs of runs, a ratio as
// the median of the pairs' own ratios (each pair's two runs are taken
// back to back, so the machine's drift between pairs cancels in it).

// pairRatio is a pair's during/before ratio of a reading (-1 unread).
func pairRatio(before, during float64) float64 {
	if before <= 0 || during < 0 {
		return -1
	}
	return during / before
}

// cutRatio is the median over the pairs of the healthy instance's 202/s
// during the other's cut over its 202/s before.
func (rec marketRecovery) cutRatio() float64 {
	return medianOf(rec.cuts, func(p cutPair) float64 { return pairRatio(accepted202(p.before), accepted202(p.during)) })
}

// cutCPURatio is the median over the pairs of the healthy instance's CPU
// per 202 during the other's cut over its CPU per 202 before.
func (rec marketRecovery) cutCPURatio() float64 {
	return medianOf(rec.cuts, func(p cutPair) float64 {
		return pairRatio(per202MS(p.beforeCost.paths, p.before), per202MS(p.duringCost.paths, p.during))
	})
}

// cut503s are the healthy instance's 503s over the runs during the cut.
func (rec marketRecovery) cut503s() int64 {
	var n int64
	for _, p := range rec.cuts {
		n += p.during.Count(http.StatusServiceUnavailable)
	}
	return n
}

// cut503sBefore are its 503s over the runs before it.
func (rec marketRecovery) cut503sBefore() int64 {
	var n int64
	for _, p := range rec.cuts {
		n += p.before.Count(http.StatusServiceUnavailable)
	}
	return n
}

// cutSwitches are the fault sale's mode switches over the cuts.
func (rec marketRecovery) cutSwitches() int64 {
	var n int64
	for _, p := range rec.cuts {
		n += p.switches
	}
	return n
}

// cutMedian is the median over the pairs of a reading (-1 unread).
func (rec marketRecovery) cutMedian(v func(cutPair) float64) float64 { return medianOf(rec.cuts, v) }

// pairRatios are each pair's ratio of a reading, in the order taken.
func (rec marketRecovery) pairRatios(v func(cutPair) float64) string {
	parts := make([]string, len(rec.cuts))
	for i, p := range rec.cuts {
		parts[i] = num(v(p))
	}
	return strings.Join(parts, ", ")
}

// marketRecoveryFigures are the faults' figures with all the sales live,
// each beside its figure with few live, the goal.
func marketRecoveryFigures(m marketFigures) []Figure {
	one, many := m.rec1, m.recN
	live := fmt.Sprintf("%d live", m.n)
	noise := func(v float64) string { return fmt.Sprintf("≤ %s (1 live + %g s)", num(v+marketNoise), marketNoise) }
	rounds := func(what string, one, many []float64) string {
		return fmt.Sprintf("s%s, median of %d: %s (1 live: %s)", what, len(many), joinNums(many), joinNums(one))
	}
	back := rounds(" after the thaw", one.backEach, many.backEach)
	if !one.left || !many.left {
		back += fmt.Sprintf("; left Redis every time: %t 1 live, %t %s", one.left, many.left, live)
	}
	return append([]Figure{
		{Name: "keys deleted → the next 202, " + live, Value: many.keys, Unit: rounds("", one.keysEach, many.keysEach), Target: noise(one.keys)},
		{Name: fmt.Sprintf("Redis frozen %s → the sale back on Redis, %s", marketPause, live), Value: many.back, Unit: back, Target: noise(one.back)},
	}, cutFigures(one, many, live)...)
}

// cutFigures are the API cut's figures with all the sales live (many),
// each beside its figure with few live (one).
func cutFigures(one, many marketRecovery, live string) []Figure {
	rate := func(p cutPair) float64 { return pairRatio(accepted202(p.before), accepted202(p.during)) }
	cpu := func(p cutPair) float64 {
		return pairRatio(per202MS(p.beforeCost.paths, p.before), per202MS(p.duringCost.paths, p.during))
	}
	pairs := fmt.Sprintf("median of %d pairs' ratios", len(many.cuts))
	before202 := many.cutMedian(func(p cutPair) float64 { return accepted202(p.before) })
	during202 := many.cutMedian(func(p cutPair) float64 { return accepted202(p.during) })
	beforeMS := many.cutMedian(func(p cutPair) float64 { return per202MS(p.beforeCost.paths, p.before) })
	duringMS := many.cutMedian(func(p cutPair) float64 { return per202MS(p.duringCost.paths, p.during) })
	share := func(rec marketRecovery, during bool) float64 {
		return rec.cutMedian(func(p cutPair) float64 {
			if during {
				return p.duringCost.share(p.duringCost.cut)
			}
			return p.beforeCost.share(p.beforeCost.cut)
		})
	}
	stmts := func(rec marketRecovery, during bool) float64 {
		return rec.cutMedian(func(p cutPair) float64 {
			if during {
				return p.duringCost.rate(p.duringCost.statements)
			}
			return p.beforeCost.rate(p.beforeCost.statements)
		})
	}
	return []Figure{
		{Name: "one API cut: the healthy one's 503s during the cut, " + live, Value: float64(many.cut503s()),
			Unit: fmt.Sprintf("answers over %d runs (before the cut: %d; 1 live: %d, before: %d)", len(many.cuts), many.cut503sBefore(),
				one.cut503s(), one.cut503sBefore()), Target: "0"},
		{Name: "one API cut: the healthy one's 202/s during / before, " + live, Value: many.cutRatio(),
			Unit: fmt.Sprintf("× (%s: %s; medians %s → %s 202/s; 1 live: %s ×, pairs %s)", pairs, many.pairRatios(rate),
				num(before202), num(during202), num(one.cutRatio()), one.pairRatios(rate)),
			Target: fmt.Sprintf("≥ %s (1 live − %g)", num(one.cutRatio()-marketRatioTol), marketRatioTol)},
		{Name: "one API cut: the fault sale's mode switches, " + live, Value: float64(many.cutSwitches()), Unit: fmt.Sprintf("switches (1 live: %d)", one.cutSwitches()), Target: "0"},
		{Name: "one API cut: the healthy one's CPU per 202 during / before, " + live, Value: many.cutCPURatio(),
			Unit: fmt.Sprintf("× (%s: %s; medians %s → %s ms; 1 live: %s ×, pairs %s)", pairs, many.pairRatios(cpu),
				num(beforeMS), num(duringMS), num(one.cutCPURatio()), one.pairRatios(cpu)),
			Target: fmt.Sprintf("≤ %s (1 live + %g)", num(one.cutCPURatio()+marketRatioTol), marketRatioTol)},
		{Name: "one API cut: the cut instance's CPU during the cut, " + live, Value: share(many, true),
			Unit: fmt.Sprintf("%% of a core, median (before: %s; 1 live: %s, before: %s)", num(share(many, false)), num(share(one, true)), num(share(one, false)))},
		{Name: "one API cut: MariaDB statements/s during the cut, " + live, Value: stmts(many, true),
			Unit: fmt.Sprintf("statements/s, median (before: %s; 1 live: %s, before: %s)", num(stmts(many, false)), num(stmts(one, true)), num(stmts(one, false)))},
	}
}

// cutNotes are the API cut's notes: how its runs are taken, and each
// pair's outcomes and costs.
func cutNotes(m marketFigures) []string {
	notes := []string{fmt.Sprintf("one API cut: a fourth instance reaches Redis through a proxy; %d pairs of runs of %d connections reserving on the paths' API (the healthy one), one with the fourth reaching Redis (before), one with it cut for the run (during), taken in turns (before first, then during first), the cut instance ready again after each cut; its /readyz at each cut's end: %s (1 live), %s (%d live) (503: it knew)",
		len(m.recN.cuts), cutConns, readies(m.rec1), readies(m.recN), m.n)}
	for _, side := range []struct {
		label string
		rec   marketRecovery
	}{{"1 live", m.rec1}, {fmt.Sprintf("%d live", m.n), m.recN}} {
		for i, p := range side.rec.cuts {
			notes = append(notes, fmt.Sprintf("one API cut, %s, pair %d, before / during: the healthy API's outcomes (its /metrics, layer/outcome and hold/outcome; a 503's body says only unavailable) %s / %s; what it cost: %s / %s",
				side.label, i+1, p.beforeWhy, p.duringWhy, p.beforeCost.line(p.before), p.duringCost.line(p.during)))
		}
	}
	return notes
}

// readies are the cut instance's /readyz answers at each cut's end.
func readies(rec marketRecovery) string {
	parts := make([]string, len(rec.cuts))
	for i, p := range rec.cuts {
		parts[i] = fmt.Sprint(p.ready)
	}
	return strings.Join(parts, ", ")
}
