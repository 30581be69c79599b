package bench

import (
	"cmp"
	"fmt"
	"time"
)

// marketFigures are scenario 13's measurements.
type marketFigures struct {
	n            int
	settled      time.Duration // from the last sale warmed to the idle window
	running      int64         // sale workflows running when the wait for them ended
	rate         float64
	idle0, idleN marketIdleCost // before the sales were created, and after
	keyBytes     float64
	one, many    marketPaths
	listed, dup  int
}

// perSecond is a count over the window, per second.
func (ic marketIdleCost) perSecond(v float64) float64 { return v / ic.window.Seconds() }

// marketScenario is scenario 13's report.
func marketScenario(m marketFigures) Scenario {
	n := float64(max(m.n, 1))
	i0, iN := m.idle0, m.idleN
	apis := float64(iN.instances - 1)
	cmd0, cmdN := i0.perSecond(float64(i0.commands)), iN.perSecond(float64(iN.commands))
	figures := []Figure{
		{Name: "sales created and warmed", Value: float64(m.n), Unit: "sales"},
		{Name: "create + warm-up rate", Value: m.rate, Unit: "sales/s"},
		{Name: "idle Redis commands/s, whole fleet, before → with the sales", Value: cmdN, Unit: fmt.Sprintf("cmd/s (before: %s)", num(cmd0))},
		{Name: "idle Redis commands/s per live sale per instance", Value: (cmdN - cmd0) / float64(iN.instances) / n, Unit: "cmd/s", Target: "≤ 0.05"},
		{Name: "idle API CPU (each API)", Value: iN.perSecond(iN.apiCPU) / apis * 100, Unit: fmt.Sprintf("%% of a core (before: %s)", num(i0.perSecond(i0.apiCPU)/apis*100)), Target: "≤ 2"},
		{Name: "idle worker CPU", Value: iN.perSecond(iN.workerCPU) * 100, Unit: fmt.Sprintf("%% of a core (before: %s)", num(i0.perSecond(i0.workerCPU)*100)), Target: "≤ 2"},
	}
	if iN.temporalCPU >= 0 && i0.temporalCPU >= 0 {
		figures = append(figures, Figure{Name: "idle Temporal server CPU", Value: iN.perSecond(iN.temporalCPU) * 100,
			Unit: fmt.Sprintf("%% of a core (before: %s)", num(i0.perSecond(i0.temporalCPU)*100)), Target: "≤ 2"})
	}
	figures = append(figures,
		Figure{Name: "Redis memory per idle sale: its keys (MEMORY USAGE)", Value: m.keyBytes, Unit: "bytes"},
		Figure{Name: "Redis memory per idle sale: used_memory growth", Value: float64(iN.mem-i0.mem) / n, Unit: "bytes"},
		Figure{Name: "sold-out req/s, 1 live", Value: m.one.soldOut.RPS, Unit: "req/s"},
		Figure{Name: fmt.Sprintf("sold-out req/s, %d live", m.n), Value: m.many.soldOut.RPS, Unit: "req/s"},
		Figure{Name: "sold-out, many live / 1 live", Value: ratio(m.many.soldOut.RPS, m.one.soldOut.RPS), Unit: "×", Target: "≥ 0.95"},
		Figure{Name: "in-stock req/s, 1 live", Value: m.one.inStock.RPS, Unit: "req/s"},
		Figure{Name: fmt.Sprintf("in-stock req/s, %d live", m.n), Value: m.many.inStock.RPS, Unit: "req/s"},
		Figure{Name: "in-stock, many live / 1 live", Value: ratio(m.many.inStock.RPS, m.one.inStock.RPS), Unit: "×", Target: "≥ 0.95"},
		Figure{Name: "sales listed by GET /admin/v1/sales", Value: float64(m.listed), Unit: "sales", Target: fmt.Sprintf("%d, each once", m.n)},
		Figure{Name: "sales listed twice", Value: float64(m.dup), Unit: "sales", Target: "0"},
	)
	return Scenario{
		ID: "13 market", Title: fmt.Sprintf("A marketplace: %d live sales, their idle cost, and one sale's paths beside them", m.n),
		Runs:    []Result{m.one.soldOut, m.one.inStock, m.many.soldOut, m.many.inStock},
		Figures: figures,
		Notes: []string{
			fmt.Sprintf("two idle windows of %s with nobody buying, %d instances (two APIs, one worker): before the sales were created (two sales live) and after, %s after the last was warmed (%d of the %d sale workflows running, then 75 s); per live sale: the difference over the sales and the instances", iN.window.Round(time.Second), iN.instances, m.settled.Round(time.Second), m.running, m.n),
			"Redis calls from INFO commandstats, the bench's own INFO taken out; most called before: " + i0.topCommands(6) + "; with the sales: " + iN.topCommands(6),
			"CPU: user + system time from /proc over each window; Temporal: " + cmp.Or(iN.temporalWhat, "not on this host, not metered"),
			"the paths: 64 connections on an API whose task queue nobody polls, the sold-out sale of one unit and an in-stock sale, first with only those two live, then with the others created, warmed and idle beside them; one pair each, in that order (the machine's drift counts against the second)",
			"listing: the API has no public list of sales (the storefront redirects to the newest open sale); GET /admin/v1/sales shows the newest 100 and does not page",
		},
	}
}
