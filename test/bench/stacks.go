package bench

import (
	"context"
	"fmt"
	"strings"
)

// Stack is one variant scenario 12 runs the burst on: a Temporal server,
// or (-ab) the same server with environment overrides for the API and
// worker.
type Stack struct {
	Name, Address string
	Env           map[string]string
}

// ABStacks are the two variants of an A/B run of scenario 3: the
// processes with KEY=VALUE, then without (the default), on one server.
func ABStacks(kv, address string) ([]Stack, error) {
	k, v, ok := strings.Cut(kv, "=")
	if !ok || k == "" {
		return nil, fmt.Errorf("-ab %q: want KEY=VALUE", kv)
	}
	return []Stack{{Name: kv, Address: address, Env: map[string]string{k: v}}, {Name: "default", Address: address}}, nil
}

// ParseStacks reads "name=host:port,..." (the -temporal-stacks flag).
func ParseStacks(s string) ([]Stack, error) {
	var out []Stack
	for _, part := range strings.Split(s, ",") {
		name, addr, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || name == "" || addr == "" {
			return nil, fmt.Errorf("temporal stack %q: want name=host:port", part)
		}
		out = append(out, Stack{Name: name, Address: addr})
	}
	if len(out) < 2 {
		return nil, fmt.Errorf("temporal stacks: at least two to compare, got %d", len(out))
	}
	return out, nil
}

// stackFigures are scenario 3's figures scenario 12 puts side by side.
var stackFigures = []string{
	"orders drained/s",
	"hello workflows/s (baseline)",
	"drain / hello rate",
	"Temporal server CPU per order",
	"Temporal server CPU per hello workflow",
	"API + worker CPU per order",
	"worker CPU per order",
	"relay's workflow starts per order",
	"Redis + MariaDB CPU per order",
	"CPU per order, every process",
	"drain ceiling of this host's cores",
}

// RunStacks is scenario 12: scenario 3 (the burst, its drain and the hello
// baseline) on each Temporal stack in turn, in one run, then the stacks
// side by side, each stack's drain over the first's. A stack named
// "server-8" has the target: at least twice the first's drain.
func RunStacks(ctx context.Context, o Options, stacks []Stack) (*Report, error) {
	var merged *Report
	got := map[string]map[string]float64{}
	for _, st := range stacks {
		so := o
		so.TemporalAddress, so.Scenarios, so.Env = st.Address, []string{"3"}, st.Env
		rep, err := Run(ctx, so)
		if rep != nil {
			if merged == nil {
				merged = &Report{GeneratedAt: rep.GeneratedAt, Machine: rep.Machine, Client: rep.Client}
			}
			got[st.Name] = map[string]float64{}
			for _, sc := range rep.Scenarios {
				sc.ID += " · " + st.Name
				sc.Title += " (Temporal: " + st.Name + ")"
				for _, f := range sc.Figures {
					got[st.Name][f.Name] = f.Value
				}
				merged.Scenarios = append(merged.Scenarios, sc)
			}
			merged.Violations = append(merged.Violations, rep.Violations...)
		}
		if err != nil {
			return merged, fmt.Errorf("temporal stack %s: %w", st.Name, err)
		}
	}
	merged.Scenarios = append(merged.Scenarios, stacksScenario(stacks, got))
	return merged, nil
}

func stacksScenario(stacks []Stack, got map[string]map[string]float64) Scenario {
	var figures []Figure
	first := stacks[0].Name
	for _, st := range stacks {
		for _, name := range stackFigures {
			unit := "orders/s"
			switch {
			case strings.Contains(name, "starts"):
				unit = "calls"
			case strings.Contains(name, "CPU"):
				unit = "ms"
			case strings.Contains(name, "rate"):
				unit = "×"
			case strings.Contains(name, "hello"):
				unit = "wf/s"
			}
			figures = append(figures, Figure{Name: st.Name + ": " + name, Value: got[st.Name][name], Unit: unit})
		}
		if st.Name != first {
			f := Figure{Name: st.Name + ": drain / " + first + " drain", Value: ratio(got[st.Name]["orders drained/s"], got[first]["orders drained/s"]), Unit: "×"}
			if st.Name == "server-8" {
				f.Target = "≥ 2"
			}
			figures = append(figures, f)
		}
	}
	names := make([]string, len(stacks))
	for i, st := range stacks {
		names[i] = st.Name + " (Temporal " + st.Address + ")"
	}
	return Scenario{ID: "12 side by side", Title: "The burst and its drain on each variant, side by side: " + strings.Join(names, ", "),
		Figures: figures,
		Notes: []string{"scenario 3 on each variant in turn, in this order, against the same Redis and MariaDB; each variant's own API and worker",
			"server CPU: the dev server's process (SQLite inside it); the production-shaped server's process and its PostgreSQL with every backend"}}
}
