package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/seckill/seckill/client"
)

// Options of a run.
type Options struct {
	Seed     int64
	Duration time.Duration // of the workload and the nemesis
	Faults   []string      // classes the nemesis draws from
	Clients  int
	// Redis is RedisSingle (default) or RedisCluster: one redis-server,
	// or a three-master Redis Cluster.
	Redis string
	// Quiet is the wait after every fault healed and the clients stopped;
	// 0: the longest payment window plus two reconciliation passes and
	// some slack.
	Quiet       time.Duration
	WorkDir     string // services' data, logs and the history
	OutDir      string // <seed>.md and <seed>.png
	SeckillBin  string
	TemporalBin string
	// TemporalServer, when set, is scripts/temporal-server.sh: the run's
	// Temporal is the production-shaped server (PostgreSQL, SQL
	// visibility, 8 shards) instead of the dev server.
	TemporalServer string
	Logf           func(format string, args ...any)
}

// Redis modes.
const (
	RedisSingle  = "single"
	RedisCluster = "cluster"
)

// Cluster reports whether the run is the cluster variant.
func (o Options) Cluster() bool { return o.Redis == RedisCluster }

// Result is what a run found.
type Result struct {
	Opts        Options
	Started     time.Time
	WorkloadEnd time.Time
	QuietEnd    time.Time
	Plan        []Planned
	Sales       []SaleSpec
	History     []Event
	HistoryPath string
	Final       Final
	Violations  []Violation
	Checked     map[string]int
	Mechanisms  map[string]int
	Report      string // path of the markdown report
	Chart       string

	// The waitlists as read right after the faults healed (the checker's
	// first-in, first-out judgement).
	waiting     map[int64]map[int64]int64
	waitlistsAt time.Time
}

// Run deploys, runs the workload and the nemesis, waits out the quiet
// period, probes, checks and writes the report.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.prepare(); err != nil {
		return nil, err
	}
	r := &Result{Opts: o, Plan: Schedule(o.Seed, o.Duration, o.Faults), HistoryPath: filepath.Join(o.WorkDir, "history.jsonl")}
	o.Logf("seed %d: %d faults planned over %s", o.Seed, len(r.Plan), o.Duration)
	d, err := Deploy(ctx, o.WorkDir, o.SeckillBin, o.TemporalBin, o.TemporalServer, o.Cluster())
	if err != nil {
		return nil, fmt.Errorf("deploy: %w", err)
	}
	defer d.Close()
	h, err := NewRecorder(r.HistoryPath)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	c, err := newCaller(d, h)
	if err != nil {
		return nil, err
	}
	if r.Sales, err = createSales(ctx, c, DefaultSales); err != nil {
		return nil, err
	}
	r.Opts.defaultQuiet(r.Sales)
	w := &Workload{C: c, Seed: o.Seed, Clients: o.Clients, Sales: r.Sales, Logf: o.Logf, Crowds: CrowdTimes(r.Plan)}
	n, err := newNemesis(ctx, d, h, w, r.Sales, o)
	if err != nil {
		return nil, err
	}
	r.Started = time.Now()
	h.Add(Event{Kind: KindNote, Op: "workload", Detail: fmt.Sprintf("seed %d, %d clients, %s", o.Seed, o.Clients, o.Duration)})
	if o.Cluster() {
		h.Add(Event{Kind: KindNote, Op: "redis", Detail: RedisCluster})
	}
	if err := r.underFaults(ctx, d, h, w, n); err != nil {
		return nil, err
	}
	if err := r.finish(ctx, d, c, h); err != nil {
		return nil, err
	}
	return r, r.Write(o.OutDir)
}

// prepare fills the defaults, keeps the fault classes the configuration
// can inject and makes the work and output folders.
func (o *Options) prepare() error {
	o.Faults = FaultsFor(o.Faults, o.Cluster())
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.Clients == 0 {
		o.Clients = 16
	}
	if err := os.MkdirAll(o.WorkDir, 0o755); err != nil {
		return fmt.Errorf("work dir: %w", err)
	}
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return fmt.Errorf("out dir: %w", err)
	}
	return nil
}

// defaultQuiet: without a quiet period given, the longest payment window
// plus the time the system has to settle after it.
func (o *Options) defaultQuiet(sales []SaleSpec) {
	if o.Quiet != 0 {
		return
	}
	maxWindow := 0
	for _, s := range sales {
		maxWindow = max(maxWindow, s.WindowSeconds)
	}
	o.Quiet = time.Duration(maxWindow)*time.Second + 2*time.Minute + 15*time.Second
}

// newNemesis is the fault injector of a run, told where each sale's keys
// live.
func newNemesis(ctx context.Context, d *Deployment, h *Recorder, w *Workload, sales []SaleSpec, o Options) (*Nemesis, error) {
	n := &Nemesis{D: d, H: h, Tokens: w.LiveToken, Logf: o.Logf, SaleNodes: map[int64]*RedisNode{}}
	for _, s := range sales {
		n.Sales = append(n.Sales, s.ID)
		node, err := d.SaleNode(ctx, s.ID)
		if err != nil {
			return nil, err
		}
		n.SaleNodes[s.ID] = node
		if o.Cluster() {
			h.Add(Event{Kind: KindNote, Op: "redis", Sale: s.ID, Detail: "sale keys on " + node.Name})
		}
	}
	return n, nil
}

// underFaults runs the workload and the planned faults together for the
// run's duration, heals every fault, then waits out the quiet period
// (sampling the sales' modes throughout).
func (r *Result) underFaults(ctx context.Context, d *Deployment, h *Recorder, w *Workload, n *Nemesis) error {
	o := r.Opts
	sctx, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		sampleModes(sctx, d, h, r.Sales)
	}()
	wctx, stop := context.WithTimeout(ctx, o.Duration)
	defer stop()
	done := make(chan struct{})
	go func() {
		n.Run(wctx, r.Started, r.Plan)
		close(done)
	}()
	w.Run(wctx)
	<-done
	r.WorkloadEnd = time.Now()
	if err := d.HealAll(ctx); err != nil {
		return fmt.Errorf("heal: %w", err)
	}
	var err error
	if r.waiting, r.waitlistsAt, err = readWaitlists(ctx, d, r.Sales); err != nil {
		o.Logf("read the waitlists: %v", err)
	}
	w.LeaveWaitlists(ctx)
	h.Add(Event{Kind: KindNote, Op: "quiet", Detail: fmt.Sprintf("every fault healed; waiting %s", o.Quiet)})
	o.Logf("workload over (%d events); quiet for %s", len(h.Events()), o.Quiet)
	sleep(ctx, o.Quiet)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	r.QuietEnd = time.Now()
	stopSampling()
	<-sampled
	return nil
}

// finish reads the final state, probes the sales with fresh users and
// checks the history and the final state.
func (r *Result) finish(ctx context.Context, d *Deployment, c *caller, h *Recorder) error {
	r.Mechanisms = mechanisms(d)
	probeWebhooks(ctx, c, h, r.Sales)
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	final, err := collect(cctx, d, c, r.Sales)
	cancel()
	if err != nil {
		return fmt.Errorf("final state: %w", err)
	}
	final.WaitlistsAt = r.waitlistsAt
	for i := range final.Sales {
		final.Sales[i].Waiting = r.waiting[final.Sales[i].SaleID]
	}
	r.Final = final
	// With the history, all a later -recheck needs.
	if b, err := json.MarshalIndent(final, "", " "); err != nil {
		r.Opts.Logf("encode final.json: %v", err)
	} else if err := os.WriteFile(filepath.Join(r.Opts.WorkDir, "final.json"), b, 0o644); err != nil {
		r.Opts.Logf("write final.json: %v", err)
	}
	h.Add(Event{Kind: KindNote, Op: "probe"})
	probe(ctx, c, final)
	r.History = h.Events()
	r.Violations, r.Checked = Check(r.History, r.Final)
	return h.Close()
}

// sampleModes notes each sale's mode whenever it changes (OpMode), read
// from MySQL every 250 ms, until ctx ends.
func sampleModes(ctx context.Context, d *Deployment, h *Recorder, sales []SaleSpec) {
	last := map[int64]string{}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, s := range sales {
			qctx, cancel := context.WithTimeout(ctx, time.Second)
			var mode string
			var epoch int64
			err := d.DB.QueryRowContext(qctx, "SELECT mode, mode_epoch FROM sales WHERE id = ?", s.ID).Scan(&mode, &epoch)
			cancel()
			if err != nil || last[s.ID] == mode {
				continue // MySQL down or frozen: the next sample tells
			}
			if from := last[s.ID]; from != "" {
				h.Add(modeNote(s.ID, from, mode, epoch))
			}
			last[s.ID] = mode
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// createSales creates and warms the run's sales through the admin API.
func createSales(ctx context.Context, c *caller, specs []SaleSpec) ([]SaleSpec, error) {
	now := time.Now().UTC()
	var out []SaleSpec
	for i, s := range specs {
		v, err := c.admins[0].CreateSale(ctx, client.NewSale{
			GoodsID: int64(100 + i), Title: fmt.Sprintf("chaos sale %d", i+1), PriceCents: s.PriceCents, Stock: s.Stock, Buckets: 4,
			StartsAt: now.Add(-time.Minute), EndsAt: now.Add(6 * time.Hour), PaymentWindowSeconds: s.WindowSeconds,
		}, "")
		if err != nil {
			return nil, fmt.Errorf("create sale: %w", err)
		}
		s.ID = v.SaleID
		if _, err := c.admins[0].Warmup(ctx, s.ID); err != nil {
			return nil, fmt.Errorf("warm up sale %d: %w", s.ID, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// Mechanisms counted from the processes' logs: each recovery path the
// faults must trip, and the timeouts the breaker left uncounted.
const (
	MBreakerOpened = "breaker opened"
	MClientStall   = "timeouts while Redis answered (not counted by the breaker)"
	MDatabasePath  = "sale moved to the database path"
	MResync        = "resync back to Redis"
	MReclaim       = "inbox entries reclaimed"
	MRepair        = "reconciliation repair"
	MDeadLetter    = "inbox entry dead-lettered"
)

// Mechanisms lists them in the report's order.
var Mechanisms = []string{MBreakerOpened, MClientStall, MDatabasePath, MResync, MReclaim, MRepair, MDeadLetter}

// mechanismLines: a line counts when it holds every string of one of its
// alternatives.
var mechanismLines = map[string][][]string{
	MBreakerOpened: {{`"msg":"circuit breaker state change"`, `"to":"open"`}},
	MClientStall:   {{`"msg":"reserve: redis"`, `client-side stall: `}},
	MDatabasePath:  {{`"msg":"sale moved to the database path"`}},
	MResync:        {{`"msg":"resync: sale is back on Redis"`}},
	MReclaim:       {{`"msg":"relay: reclaimed pending inbox entries"`}},
	MRepair: {{`"msg":"reconcile: repaired`}, {`"msg":"reconcile: rebuilt Redis stock`},
		{`"msg":"reconcile: finished a release in Redis"`},
		{`"msg":"reconcile: released a live reservation whose workflow closed`},
		{`"msg":"reconcile: a new run took over a live reservation whose workflow closed"`}},
	MDeadLetter: {{`"msg":"relay: inbox entry dead-lettered"`}},
}

// countMechanisms counts the mechanism lines of a log.
func countMechanisms(log string, into map[string]int) {
	for _, line := range strings.Split(log, "\n") {
		for m, alts := range mechanismLines {
			for _, needles := range alts {
				all := true
				for _, n := range needles {
					all = all && strings.Contains(line, n)
				}
				if all {
					into[m]++
					break
				}
			}
		}
	}
}

func mechanisms(d *Deployment) map[string]int {
	out := map[string]int{}
	for _, a := range d.Apps() {
		if b, err := os.ReadFile(a.LogPath); err == nil {
			countMechanisms(string(b), out)
		}
	}
	return out
}

// Recheck runs the checker again over a run's saved history, final state
// and logs (the work dir of a run) and rebuilds its result, so that a
// report can be written again with a changed checker.
func Recheck(workDir string, faults []string) (*Result, error) {
	h, err := ReadHistory(filepath.Join(workDir, "history.jsonl"))
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(workDir, "final.json"))
	if err != nil {
		return nil, fmt.Errorf("recheck: %w", err)
	}
	var f Final
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("recheck: final.json: %w", err)
	}
	r := &Result{History: h, Final: f, HistoryPath: filepath.Join(workDir, "history.jsonl"), Opts: Options{Faults: faults}, Mechanisms: map[string]int{}}
	for _, e := range h {
		if e.Kind != KindNote {
			continue
		}
		switch e.Op {
		case "workload":
			r.Started = e.T
			if _, err := fmt.Sscanf(e.Detail, "seed %d, %d clients, %s", &r.Opts.Seed, &r.Opts.Clients, new(string)); err != nil {
				return nil, fmt.Errorf("recheck: workload note %q: %w", e.Detail, err)
			}
			var d string
			fmt.Sscanf(e.Detail[strings.LastIndex(e.Detail, " ")+1:], "%s", &d)
			r.Opts.Duration, _ = time.ParseDuration(d)
		case "redis":
			if e.Detail == RedisCluster {
				r.Opts.Redis = RedisCluster
			}
		case "quiet":
			r.WorkloadEnd = e.T
		case "probe":
			r.QuietEnd = e.T
		}
	}
	r.Opts.Faults = FaultsFor(faults, r.Opts.Cluster())
	for i, s := range f.Sales {
		spec := SaleSpec{ID: s.SaleID, WindowSeconds: s.WindowSeconds}
		if i < len(DefaultSales) {
			spec.Stock, spec.PriceCents = DefaultSales[i].Stock, DefaultSales[i].PriceCents
		}
		r.Sales = append(r.Sales, spec)
	}
	for _, name := range []string{"api1", "api2", "worker1", "worker2"} {
		if b, err := os.ReadFile(logPath(workDir, name)); err == nil {
			countMechanisms(string(b), r.Mechanisms)
		}
	}
	r.Violations, r.Checked = Check(h, f)
	return r, nil
}

// ReportName is the base name of the report and chart: the seed, prefixed
// with "cluster-" for the cluster variant and "server-" on the
// production-shaped Temporal.
func (o Options) ReportName() string {
	name := fmt.Sprint(o.Seed)
	if o.Cluster() {
		name = "cluster-" + name
	}
	if o.TemporalServer != "" {
		name = "server-" + name
	}
	return name
}

// Write writes the report and chart of r into dir.
func (r *Result) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("report dir: %w", err)
	}
	r.Report = filepath.Join(dir, r.Opts.ReportName()+".md")
	r.Chart = filepath.Join(dir, r.Opts.ReportName()+".png")
	if err := os.WriteFile(r.Report, []byte(r.Markdown()), 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := r.DrawChart(r.Chart); err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	return nil
}
