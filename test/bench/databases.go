package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/seckill/seckill/internal/testkit/galera"
	"github.com/seckill/seckill/internal/testkit/mariadbnode"
)

// The database tiers -db compares, each started by the run in its log
// directory: one MariaDB with a Galera node's settings (buffer pool,
// connections, log flush) but no replication, and a three-node Galera
// cluster behind HAProxy (internal/testkit/galera, the shape docs/deploy.md
// describes). Neither serves anything else, so neither meets another
// client's load.
const (
	DBSingle = "single"
	DBGalera = "galera"
)

// dbScenarios are the scenarios -db runs on each tier: the drain and the
// database path, the two whose rate the database decides.
var dbScenarios = []string{"3", "5"}

// dbFigures are the figures the tiers are compared on.
var dbFigures = []struct {
	scenario, name string
}{
	{"3", "orders drained/s"},
	{"3", "drain time to all PENDING_PAYMENT"},
	{"3", "reservation answers/s"},
	{"3", "Redis + MariaDB CPU per order"},
	{"5", "accepted/s (202)"},
	{"5", "p99 of the 202s"},
	{"5", "MySQL statements per 202"},
}

// ParseDatabases reads the -db flag: a comma-separated list of tiers, the
// first the baseline of the others' ratios.
func ParseDatabases(s string) ([]string, error) {
	var out []string
	for _, part := range strings.Split(s, ",") {
		name := strings.TrimSpace(part)
		if name != DBSingle && name != DBGalera {
			return nil, fmt.Errorf("-db: unknown tier %q (%s or %s)", part, DBSingle, DBGalera)
		}
		if slices.Contains(out, name) {
			return nil, fmt.Errorf("-db: %s named twice", name)
		}
		out = append(out, name)
	}
	if len(out) < 2 {
		return nil, fmt.Errorf("-db: two tiers to compare, got %q", s)
	}
	return out, nil
}

// startTiers starts each tier's servers and returns each tier's DSN and
// the ports of its mariadbd processes; stop ends them all and deletes
// their data (a gigabyte or so), keeping their logs.
func startTiers(ctx context.Context, o Options, tiers []string) (map[string]string, map[string][]string, func(), error) {
	dsns, ports := map[string]string{}, map[string][]string{}
	var stops []func()
	var data []string
	stop := func() {
		for _, f := range stops {
			f()
		}
		for _, d := range data {
			if err := os.RemoveAll(d); err != nil {
				o.Logger.Warn("delete a database tier's data", "dir", d, "err", err)
			}
		}
	}
	for _, tier := range tiers {
		dir := filepath.Join(o.LogDir, "db-"+tier)
		o.Logger.Info("starting a database tier", "tier", tier, "dir", dir)
		switch tier {
		case DBSingle:
			opts := galera.Node{Dir: dir}.Options()
			opts.User = "" // a node's account only serves Galera's state transfers
			data = append(data, opts.DataDir())
			s, err := mariadbnode.StartServer(ctx, opts)
			if err != nil {
				return nil, nil, stop, err
			}
			stops = append(stops, func() {
				if err := s.Stop(); err != nil {
					o.Logger.Warn("stop the single server", "err", err)
				}
			})
			dsns[tier], ports[tier] = s.DSN("seckill"), []string{strconv.Itoa(s.Port())}
		case DBGalera:
			c, err := galera.Start(ctx, galera.Options{Dir: dir})
			if err != nil {
				return nil, nil, stop, err
			}
			stops = append(stops, c.Stop)
			dsns[tier] = c.DSN("seckill")
			for _, n := range c.Nodes() {
				ports[tier] = append(ports[tier], strconv.Itoa(n.Port))
				data = append(data, n.Options().DataDir())
			}
		}
	}
	return dsns, ports, stop, nil
}

// tierRuns are one tier's figure values, a value per round.
type tierRuns map[string][]float64

// RunDatabases runs the drain (scenario 3) and the database path
// (scenario 5) on each tier in turn, rounds times in the same order
// (ABAB...), so that every tier meets the host's load alike; each run is a
// whole Run of its own (its own database, API and worker), the tiers
// differing only in MYSQL_DSN. The report has every run, then the tiers
// side by side: each figure's median over the rounds and its ratio to the
// first tier's.
func RunDatabases(ctx context.Context, o Options, tiers []string, rounds int) (*Report, error) {
	scenarios := o.Scenarios
	if len(scenarios) == 0 {
		scenarios = dbScenarios
	}
	for _, id := range scenarios {
		if !slices.Contains(dbScenarios, id) {
			return nil, fmt.Errorf("-db runs scenarios %s, not %s", strings.Join(dbScenarios, " and "), id)
		}
	}
	dsns, ports, stop, err := startTiers(ctx, o, tiers)
	defer stop()
	if err != nil {
		return nil, err
	}
	merged := &Report{}
	got := map[string]tierRuns{}
	var floor int64
	for round := 1; round <= rounds; round++ {
		for _, tier := range tiers {
			so := o
			so.MySQLDSN, so.Scenarios, so.MySQLPorts, so.SaleIDFloor = dsns[tier], scenarios, ports[tier], floor
			so.LogDir = filepath.Join(o.LogDir, fmt.Sprintf("%s-%d", tier, round))
			if err := os.MkdirAll(so.LogDir, 0o755); err != nil {
				return merged, fmt.Errorf("log dir: %w", err)
			}
			o.Logger.Info("database tier", "tier", tier, "round", round, "dsn", so.MySQLDSN)
			rep, err := Run(ctx, so)
			if rep != nil {
				floor = max(floor, rep.lastSaleID+1)
				merged.add(rep, fmt.Sprintf("%s, round %d", tier, round))
				if got[tier] == nil {
					got[tier] = tierRuns{}
				}
				for _, sc := range rep.Scenarios {
					for _, f := range sc.Figures {
						id, _, _ := strings.Cut(sc.ID, " ")
						key := id + "/" + f.Name
						got[tier][key] = append(got[tier][key], f.Value)
					}
				}
			}
			if err != nil {
				return merged, fmt.Errorf("database tier %s, round %d: %w", tier, round, err)
			}
		}
	}
	merged.Scenarios = append(merged.Scenarios, tiersScenario(tiers, rounds, got))
	return merged, nil
}

// add appends rep's scenarios, each named by its variant, and its
// violations.
func (r *Report) add(rep *Report, variant string) {
	if r.Machine == "" {
		r.GeneratedAt, r.Machine, r.Client = rep.GeneratedAt, rep.Machine, rep.Client
	}
	for _, sc := range rep.Scenarios {
		sc.ID += " · " + variant
		sc.Title += " (" + variant + ")"
		r.Scenarios = append(r.Scenarios, sc)
	}
	r.Violations = append(r.Violations, rep.Violations...)
}

func tiersScenario(tiers []string, rounds int, got map[string]tierRuns) Scenario {
	var figures []Figure
	var notes []string
	base := tiers[0]
	for _, fig := range dbFigures {
		key := fig.scenario + "/" + fig.name
		if _, ok := got[base][key]; !ok {
			continue
		}
		for _, tier := range tiers {
			vals := got[tier][key]
			figures = append(figures, Figure{Name: fmt.Sprintf("%s: %s (median)", tier, fig.name), Value: median(vals), Unit: unitOf(fig.name)})
			notes = append(notes, fmt.Sprintf("%s, %s, each round: %s", tier, fig.name, joinNums(vals)))
			if tier != base {
				figures = append(figures, Figure{Name: fmt.Sprintf("%s: %s / %s", tier, fig.name, base), Value: ratio(median(vals), median(got[base][key])), Unit: "×"})
			}
		}
	}
	return Scenario{ID: "db side by side", Title: fmt.Sprintf("The drain and the database path on each database tier (%s), %d rounds in turn, medians", strings.Join(tiers, ", "), rounds),
		Figures: figures,
		Notes: append([]string{"each round runs every tier in the same order, each on its own API, worker and bench database; the tiers differ only in MYSQL_DSN",
			"single: one mariadbd with a Galera node's settings and no replication; galera: three nodes behind HAProxy, every write on one node and certified by the others; its MariaDB CPU is the three nodes'"}, notes...)}
}

// unitOf is a compared figure's unit.
func unitOf(name string) string {
	switch {
	case strings.Contains(name, "CPU"), strings.Contains(name, "p99"):
		return "ms"
	case strings.Contains(name, "time"):
		return "s"
	case strings.Contains(name, "statements"):
		return "statements"
	case strings.Contains(name, "drained"):
		return "orders/s"
	}
	return "/s"
}

// median is the middle value (of an even count, the mean of the middle
// two); 0 for none.
func median(vals []float64) float64 {
	if len(vals) == 0 {
		return 0
	}
	s := slices.Clone(vals)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func joinNums(vals []float64) string {
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = num(v)
	}
	return strings.Join(out, ", ")
}
