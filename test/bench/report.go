package bench

import (
	"encoding/json"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Figure is one reported number, beside its target and a published figure
// of a comparable system.
type Figure struct {
	Name      string  `json:"name"`
	Value     float64 `json:"value"`
	Unit      string  `json:"unit"`
	Target    string  `json:"target,omitempty"`
	Published string  `json:"published,omitempty"`
}

// Scenario is one scenario's runs (its baseline among them) and figures.
type Scenario struct {
	ID      string   `json:"id"`
	Title   string   `json:"title"`
	Runs    []Result `json:"runs"`
	Figures []Figure `json:"figures"`
	Notes   []string `json:"notes,omitempty"`
}

// Report is the whole bench run.
type Report struct {
	GeneratedAt time.Time  `json:"generated_at"`
	Machine     string     `json:"machine"`
	Client      string     `json:"client"`
	Scenarios   []Scenario `json:"scenarios"`
	Violations  []string   `json:"violations"` // correctness failures: the run fails

	lastSaleID int64 // the highest id of the run's sales in the database
}

// Write saves latest.json, latest.md and latest.png under dir.
func (r *Report) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("results dir: %w", err)
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "latest.json"), append(js, '\n'), 0o644); err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "latest.md"), []byte(r.Markdown()), 0o644); err != nil {
		return fmt.Errorf("write markdown: %w", err)
	}
	for _, s := range r.Scenarios {
		if len(s.Runs) > 0 { // a soak reports figures only
			if err := r.Chart(filepath.Join(dir, "latest.png")); err != nil {
				return fmt.Errorf("chart: %w", err)
			}
			break
		}
	}
	return nil
}

func num(v float64) string {
	switch {
	case v >= 100:
		return commas(int64(v + 0.5))
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func commas(n int64) string {
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// Markdown renders the figures table and the runs table.
func (r *Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Run %s on %s; client: %s.\n\n", r.GeneratedAt.Format(time.RFC3339), r.Machine, r.Client)
	b.WriteString("| scenario | figure | measured | target | published, comparable system |\n|---|---|---|---|---|\n")
	for _, s := range r.Scenarios {
		for _, f := range s.Figures {
			fmt.Fprintf(&b, "| %s | %s | %s %s | %s | %s |\n", s.ID, f.Name, num(f.Value), f.Unit, f.Target, f.Published)
		}
	}
	b.WriteString("\n| scenario | run | load | requests | answers | req/s | p50 ms | p99 ms | p99.9 ms | max ms |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range r.Scenarios {
		for _, x := range s.Runs {
			load := fmt.Sprintf("%s, %d conns", x.Mode, x.Connections)
			if x.OfferedRPS > 0 {
				load = fmt.Sprintf("open %s/s, ≤%d in flight", num(x.OfferedRPS), x.Connections)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", s.ID, x.Name, load, commas(x.Requests), strings.TrimSpace(x.StatusLine()), num(x.RPS), num(x.P50MS), num(x.P99MS), num(x.P999MS), num(x.MaxMS))
		}
	}
	for _, s := range r.Scenarios {
		for _, n := range s.Notes {
			fmt.Fprintf(&b, "\n- %s: %s", s.ID, n)
		}
	}
	if len(r.Violations) > 0 {
		b.WriteString("\n\n**Correctness violations:**\n")
		for _, v := range r.Violations {
			fmt.Fprintf(&b, "- %s\n", v)
		}
	} else {
		b.WriteString("\n\nNo correctness violation (no oversell, no user twice, reconciliation consistent).\n")
	}
	return b.String()
}

// Chart draws throughput (top) and latency percentiles (bottom) per run.
func (r *Report) Chart(path string) error {
	var names []string
	var rps, p50, p99, p999 plotter.Values
	for _, s := range r.Scenarios {
		for _, x := range s.Runs {
			names = append(names, s.ID+" "+x.Name)
			rps = append(rps, x.RPS)
			p50 = append(p50, x.P50MS)
			p99 = append(p99, x.P99MS)
			p999 = append(p999, x.P999MS)
		}
	}
	if len(names) == 0 {
		return fmt.Errorf("no runs to chart")
	}
	w := vg.Points(float64(120 + 70*len(names)))
	top := plot.New()
	top.Title.Text = "Throughput per run (requests or orders per second)"
	top.Y.Label.Text = "per second"
	bars, err := plotter.NewBarChart(rps, vg.Points(30))
	if err != nil {
		return fmt.Errorf("throughput bars: %w", err)
	}
	bars.Color = color.RGBA{R: 0x33, G: 0x66, B: 0xcc, A: 0xff}
	top.Add(bars)
	top.NominalX(names...)
	top.X.Tick.Label.Rotation = 0.5
	top.X.Tick.Label.XAlign = draw.XRight

	bottom := plot.New()
	bottom.Title.Text = "Latency percentiles per run (ms)"
	bottom.Y.Label.Text = "ms"
	colors := []color.Color{color.RGBA{G: 0x99, B: 0x44, A: 0xff}, color.RGBA{R: 0xee, G: 0x88, A: 0xff}, color.RGBA{R: 0xcc, G: 0x22, B: 0x22, A: 0xff}}
	for i, set := range []struct {
		label string
		v     plotter.Values
	}{{"p50", p50}, {"p99", p99}, {"p99.9", p999}} {
		b, err := plotter.NewBarChart(set.v, vg.Points(12))
		if err != nil {
			return fmt.Errorf("latency bars: %w", err)
		}
		b.Color = colors[i]
		b.LineStyle.Width = 0
		b.Offset = vg.Points(float64(i-1) * 12)
		bottom.Add(b)
		bottom.Legend.Add(set.label, b)
	}
	bottom.Legend.Top = true
	bottom.NominalX(names...)
	bottom.X.Tick.Label.Rotation = 0.5
	bottom.X.Tick.Label.XAlign = draw.XRight

	img := vgimg.New(w, vg.Points(760))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadTop: vg.Points(8), PadBottom: vg.Points(8), PadLeft: vg.Points(8), PadRight: vg.Points(8), PadY: vg.Points(16)}
	canvases := plot.Align([][]*plot.Plot{{top}, {bottom}}, tiles, dc)
	top.Draw(canvases[0][0])
	bottom.Draw(canvases[1][0])
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}
