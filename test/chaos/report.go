package chaos

import (
	"errors"
	"fmt"
	"image/color"
	"maps"
	"math"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/seckill/seckill/domain"
)

// answerClass names an answer for the tables: "202", "409 already_purchased",
// "no answer".
func answerClass(e Event) string {
	if e.HTTP == 0 {
		if strings.Contains(e.Err, "Timeout") || strings.Contains(e.Err, "deadline") {
			return "timeout"
		}
		return "no answer"
	}
	if e.Code != "" {
		return fmt.Sprintf("%d %s", e.HTTP, e.Code)
	}
	if e.Status != "" && e.HTTP == http.StatusOK && (e.Op == OpWebhook || e.Op == OpProbeWebhook) {
		return fmt.Sprintf("%d %s", e.HTTP, e.Status)
	}
	return fmt.Sprint(e.HTTP)
}

// Counts of a history, for the report and the final message.
type Counts struct {
	Requests  int
	Accepted  int // distinct tokens given by a 202
	Paid      int // payments confirmed (API 200 PAID, webhook 200 PAID)
	Refunds   int // webhooks answered REFUND_REQUIRED
	Cancelled int // cancels answered 200
	Faults    int
	ByOp      map[string]map[string]int
	ByClass   map[string]int
}

// Count tallies a history's requests (probes apart) and faults.
func Count(h []Event) Counts {
	c := Counts{ByOp: map[string]map[string]int{}, ByClass: map[string]int{}}
	tokens := map[string]bool{}
	for _, e := range h {
		switch e.Kind {
		case KindFault:
			c.Faults++
			c.ByClass[e.Op]++
			continue
		case KindRequest, KindProbe:
		default:
			continue
		}
		op := e.Op
		if c.ByOp[op] == nil {
			c.ByOp[op] = map[string]int{}
		}
		c.ByOp[op][answerClass(e)]++
		if e.Kind != KindRequest {
			continue
		}
		c.Requests++
		switch {
		case e.Op == OpReserve && e.HTTP == http.StatusAccepted:
			tokens[e.Token] = true
		case (e.Op == OpPay || e.Op == OpWebhook) && e.HTTP == http.StatusOK && e.Status == string(domain.StatusPaid):
			c.Paid++
		case e.Op == OpWebhook && e.HTTP == http.StatusOK:
			c.Refunds++
		case e.Op == OpCancel && e.HTTP == http.StatusOK:
			c.Cancelled++
		}
	}
	c.Accepted = len(tokens)
	return c
}

// Markdown is the run's report.
func (r *Result) Markdown() string {
	var b strings.Builder
	cnt := Count(r.History)
	r.mdHeader(&b, cnt)
	r.mdSales(&b)
	r.mdFaults(&b, cnt)
	r.mdAnswers(&b, cnt)
	r.mdInvariants(&b)
	return b.String()
}

// mdHeader: the title, how to replay, the run's shape and its result.
func (r *Result) mdHeader(b *strings.Builder, cnt Counts) {
	o := r.Opts
	redisFlag, redisDesc, title := "", "one Redis, MariaDB, Temporal dev server; every link through a proxy", ""
	if o.Cluster() {
		redisFlag = " -redis cluster"
		redisDesc = "a three-master Redis Cluster, MariaDB, Temporal dev server; each master behind one proxy shared by every process, every other link through a proxy of its own"
		title = " (Redis Cluster)"
	}
	if o.Galera() {
		redisFlag += " -db galera"
		redisDesc = strings.Replace(redisDesc, "MariaDB", "a three-node Galera cluster behind HAProxy (one writer at a time)", 1)
		title += " (Galera)"
	}
	if o.TemporalServer != "" {
		redisFlag += " -temporal-server scripts/temporal-server.sh"
		redisDesc = strings.Replace(redisDesc, "Temporal dev server", "the production-shaped Temporal server (PostgreSQL, SQL visibility, 8 history shards)", 1)
		title += " (Temporal server on PostgreSQL)"
	}
	fmt.Fprintf(b, "# Chaos run, seed %d%s\n\n", o.Seed, title)
	fmt.Fprintf(b, "Replay: `go run ./cmd/seckill-chaos -seed %d -duration %s%s -faults %s` (same schedule of operations and faults; timing differs).\n\n",
		o.Seed, o.Duration, redisFlag, strings.Join(o.Faults, ","))
	fmt.Fprintf(b, "- started %s, workload %s with %d clients on two APIs and two workers (%s)\n",
		r.Started.UTC().Format(time.RFC3339), o.Duration, o.Clients, redisDesc)
	if o.Cluster() {
		var on []string
		for _, e := range r.History {
			if e.Kind == KindNote && e.Op == "redis" && e.Sale != 0 {
				on = append(on, fmt.Sprintf("sale %d on %s", e.Sale, strings.TrimPrefix(e.Detail, "sale keys on ")))
			}
		}
		fmt.Fprintf(b, "- slots: %s (a Redis fault acts on the master of the sale its pick names)\n", strings.Join(on, ", "))
	}
	fmt.Fprintf(b, "- quiet period after every fault healed: %s; history: `%s` (%d events)\n", r.QuietEnd.Sub(r.WorkloadEnd).Round(time.Second), r.HistoryPath, len(r.History))
	fmt.Fprintf(b, "- requests: %d; 202s: %d distinct tokens; payments confirmed: %d; late payments refunded: %d; cancels: %d; faults: %d\n",
		cnt.Requests, cnt.Accepted, cnt.Paid, cnt.Refunds, cnt.Cancelled, cnt.Faults)
	if len(r.Violations) == 0 {
		b.WriteString("- **result: no violation**\n")
	} else {
		fmt.Fprintf(b, "- **result: %d violations**\n", len(r.Violations))
	}
	fmt.Fprintf(b, "\n![timeline](%s.png)\n", o.ReportName())
}

// mdSales: each sale's final state.
func (r *Result) mdSales(b *strings.Builder) {
	b.WriteString("\n## Sales\n\n| sale | stock at start | stock_total at end | window s | PAID | PENDING | EXPIRED | CANCELLED | FAILED | QUEUED | buckets | redis stock | fresh users bought |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, sp := range r.Sales {
		var s SaleState
		for _, x := range r.Final.Sales {
			if x.SaleID == sp.ID {
				s = x
			}
		}
		st := map[domain.ReservationStatus]int{}
		for _, x := range s.Reservations {
			st[x.Status]++
		}
		fresh := 0
		for _, e := range r.History {
			if e.Kind == KindProbe && e.Op == OpProbeFresh && e.Sale == sp.ID && e.HTTP == http.StatusAccepted {
				fresh++
			}
		}
		fmt.Fprintf(b, "| %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d |\n", sp.ID, sp.Stock, s.StockTotal, sp.WindowSeconds,
			st[domain.StatusPaid], st[domain.StatusPendingPayment], st[domain.StatusExpired], st[domain.StatusCancelled], st[domain.StatusFailed], st[domain.StatusQueued],
			s.BucketStock, s.RedisStock, fresh)
	}
}

// mdFaults: each fault injected, when, how long and how soon it recovered.
func (r *Result) mdFaults(b *strings.Builder, cnt Counts) {
	b.WriteString("\n## Faults injected\n\nRecovered: from the heal to the first reservation sent after it that every API answered for good (not 503, 429 or no answer).\n\n" +
		"| # | class | target | at s | lasted s | recovered s | note |\n|---|---|---|---|---|---|---|\n")
	notes := map[int]string{}
	for _, e := range r.History {
		failed := (e.Kind == KindFault || e.Kind == KindHeal) && strings.Contains(e.Detail, "failed")
		if failed || (e.Kind == KindNote && e.FaultID != 0) {
			notes[e.FaultID] += e.Detail + " "
		}
	}
	for _, f := range Spans(r.History) {
		recovered := "-"
		if d, ok := RecoveredAfter(r.History, f); ok {
			recovered = fmt.Sprintf("%.1f", d.Seconds())
		}
		fmt.Fprintf(b, "| %d | %s | %s | %.1f | %.1f | %s | %s |\n", f.ID, f.Class, f.Target, f.From.Sub(r.Started).Seconds(), f.To.Sub(f.From).Seconds(),
			recovered, strings.TrimSpace(notes[f.ID]))
	}
	b.WriteString("\n| class | times |\n|---|---|\n")
	for _, cl := range slices.Sorted(maps.Keys(cnt.ByClass)) {
		fmt.Fprintf(b, "| %s | %d |\n", cl, cnt.ByClass[cl])
	}
}

// mdAnswers: the recovery mechanisms the logs show and the answers by
// operation.
func (r *Result) mdAnswers(b *strings.Builder, cnt Counts) {
	b.WriteString("\n## Recovery mechanisms seen (from the processes' logs)\n\n| mechanism | times |\n|---|---|\n")
	for _, m := range Mechanisms {
		fmt.Fprintf(b, "| %s | %d |\n", m, r.Mechanisms[m])
	}

	b.WriteString("\n## Requests by answer\n\n| operation | answers |\n|---|---|\n")
	for _, op := range slices.Sorted(maps.Keys(cnt.ByOp)) {
		answers := cnt.ByOp[op]
		keys := slices.Sorted(maps.Keys(answers))
		sort.SliceStable(keys, func(i, j int) bool { return answers[keys[i]] > answers[keys[j]] })
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s: %d", k, answers[k]))
		}
		fmt.Fprintf(b, "| %s | %s |\n", op, strings.Join(parts, ", "))
	}
}

// mdInvariants: each invariant's cases and violations, then up to ten
// violations of each with the history around them.
func (r *Result) mdInvariants(b *strings.Builder) {
	b.WriteString("\n## Invariants\n\n| invariant | cases checked | violations |\n|---|---|---|\n")
	per := map[string]int{}
	for _, v := range r.Violations {
		per[v.Invariant]++
	}
	for _, inv := range Invariants {
		fmt.Fprintf(b, "| %s | %d | %d |\n", inv, r.Checked[inv], per[inv])
	}
	if len(r.Violations) > 0 {
		b.WriteString("\n## Violations\n\nEach with the history around it (its token's or user's requests, and the faults near them).\n")
		// Up to ten of each invariant, so every failure class shows.
		shown := map[string]int{}
		for i, v := range r.Violations {
			if shown[v.Invariant]++; shown[v.Invariant] > 10 {
				if shown[v.Invariant] == 11 {
					fmt.Fprintf(b, "\n... more %s violations: %d in all (see the history)\n", v.Invariant, per[v.Invariant])
				}
				continue
			}
			fmt.Fprintf(b, "\n### %d. %s\n\n```\n", i+1, v.String())
			for _, e := range Around(r.History, v, 20*time.Second, 25) {
				b.WriteString(FormatEvent(e, r.Started) + "\n")
			}
			b.WriteString("```\n")
		}
	}
}

// FormatEvent is one history line for people.
func FormatEvent(e Event, start time.Time) string {
	t := fmt.Sprintf("%+8.2fs", e.T.Sub(start).Seconds())
	switch e.Kind {
	case KindFault:
		return fmt.Sprintf("%s FAULT #%d %s %s %s", t, e.FaultID, e.Op, e.Target, e.Detail)
	case KindHeal:
		return fmt.Sprintf("%s HEAL  #%d %s %s %s", t, e.FaultID, e.Op, e.Target, e.Detail)
	}
	s := fmt.Sprintf("%s %-5s %-12s api%d sale %d user %d", t, e.Kind, e.Op, e.API, e.Sale, e.User)
	if e.RequestID != "" {
		s += " req " + e.RequestID
	}
	if e.Token != "" {
		s += " tok " + e.Token[:min(16, len(e.Token))]
	}
	if e.PayRef != "" {
		s += " ref " + e.PayRef
	}
	s += " -> " + answerClass(e)
	if e.Status != "" {
		s += " " + e.Status
	}
	if !e.End.IsZero() {
		s += fmt.Sprintf(" (%.0f ms)", e.End.Sub(e.T).Seconds()*1000)
	}
	return s
}

// DrawChart draws answers per second by class over the run, faults shaded.
func (r *Result) DrawChart(path string) error {
	end := r.WorkloadEnd.Sub(r.Started).Seconds() + 5
	secs := int(math.Ceil(end))
	if secs < 1 {
		return fmt.Errorf("empty run")
	}
	counts := r.answersPerSecond(secs)
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Chaos run, seed %d: answers per second; faults shaded", r.Opts.Seed)
	if r.Opts.Cluster() {
		p.Title.Text = fmt.Sprintf("Chaos run, seed %d, Redis Cluster: answers per second; faults shaded", r.Opts.Seed)
	}
	if r.Opts.Galera() {
		p.Title.Text = strings.Replace(p.Title.Text, ":", ", Galera:", 1)
	}
	p.X.Label.Text = "seconds since the workload started"
	p.Y.Label.Text = "answers per second"
	top := 1.0
	for _, c := range counts {
		for _, v := range c {
			top = max(top, v)
		}
	}
	if err := r.addFaultBands(p, top); err != nil {
		return err
	}
	for i, se := range answerSeries {
		xy := make(plotter.XYs, secs)
		for s := range secs {
			xy[s] = plotter.XY{X: float64(s), Y: counts[i][s]}
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return fmt.Errorf("line %s: %w", se.name, err)
		}
		l.Color = se.color
		l.Width = vg.Points(1.2)
		p.Add(l)
		p.Legend.Add(se.name, l)
	}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Y.Max = top * 1.6
	return writePNG(p, vg.Points(math.Max(900, math.Min(2400, 3*end))), path)
}

// answerSeries are the chart's lines: answers by kind.
var answerSeries = []struct {
	name  string
	match func(Event) bool
	color color.Color
}{
	{"2xx", func(e Event) bool { return e.HTTP >= 200 && e.HTTP < 300 }, color.RGBA{G: 0x99, B: 0x44, A: 0xff}},
	{"4xx", func(e Event) bool { return e.HTTP >= 400 && e.HTTP < 500 && e.HTTP != http.StatusTooManyRequests }, color.RGBA{R: 0x33, G: 0x66, B: 0xcc, A: 0xff}},
	{"503 / 429", func(e Event) bool {
		return e.HTTP == http.StatusServiceUnavailable || e.HTTP == http.StatusTooManyRequests
	}, color.RGBA{R: 0xee, G: 0x88, A: 0xff}},
	{"no answer", func(e Event) bool { return e.HTTP == 0 }, color.RGBA{R: 0xcc, G: 0x22, B: 0x22, A: 0xff}},
}

// answersPerSecond counts each series' answers in each second of the run.
func (r *Result) answersPerSecond(secs int) [][]float64 {
	counts := make([][]float64, len(answerSeries))
	for i := range counts {
		counts[i] = make([]float64, secs)
	}
	for _, e := range r.History {
		if e.Kind != KindRequest || e.End.IsZero() {
			continue
		}
		s := int(e.End.Sub(r.Started).Seconds())
		if s < 0 || s >= secs {
			continue
		}
		for i, se := range answerSeries {
			if se.match(e) {
				counts[i][s]++
			}
		}
	}
	return counts
}

// addFaultBands shades each fault's span in stacked bands under the top,
// labelled with its class.
func (r *Result) addFaultBands(p *plot.Plot, top float64) error {
	var labels plotter.XYLabels
	for i, f := range Spans(r.History) {
		x0 := f.From.Sub(r.Started).Seconds()
		x1 := max(f.To.Sub(r.Started).Seconds(), x0+0.5)
		lane := float64(i % 2)
		y0, y1 := top*(1.02+0.12*lane), top*(1.12+0.12*lane)
		band, err := plotter.NewPolygon(plotter.XYs{{X: x0, Y: 0}, {X: x1, Y: 0}, {X: x1, Y: y1}, {X: x0, Y: y1}})
		if err != nil {
			return fmt.Errorf("fault band: %w", err)
		}
		band.Color = color.NRGBA{R: 0xcc, G: 0x44, B: 0x44, A: 0x30} // not premultiplied: translucent
		band.LineStyle.Width = 0
		p.Add(band)
		labels.XYs = append(labels.XYs, plotter.XY{X: x0, Y: y0})
		labels.Labels = append(labels.Labels, fmt.Sprintf("%d %s", f.ID, f.Class))
	}
	if len(labels.XYs) == 0 {
		return nil
	}
	lb, err := plotter.NewLabels(labels)
	if err != nil {
		return fmt.Errorf("labels: %w", err)
	}
	for i := range lb.TextStyle {
		lb.TextStyle[i].Font.Size = vg.Points(7)
		lb.TextStyle[i].Rotation = math.Pi / 2
	}
	p.Add(lb)
	return nil
}

// writePNG draws p, width wide and 480 points high, into a PNG at path.
func writePNG(p *plot.Plot, width vg.Length, path string) error {
	img := vgimg.New(width, vg.Points(480))
	p.Draw(draw.New(img))
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		return errors.Join(fmt.Errorf("write %s: %w", path, err), f.Close())
	}
	return f.Close()
}
