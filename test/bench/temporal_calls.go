package bench

import (
	"context"
	"fmt"
	"sort"
	"strings"
)

// temporalCallMetrics are the Temporal SDK's counters of a client's calls,
// one sample per operation (and namespace, task queue, ...): ordinary
// calls, and long polls (workflow and activity task polls, update waits).
var temporalCallMetrics = []string{"temporal_request_total", "temporal_long_request_total"}

// callCount is calls by operation ("StartWorkflowExecution", ...).
type callCount map[string]float64

// temporalCalls reads the calls processes made to Temporal so far from
// their /metrics, by operation; a process that cannot be read adds a note.
func (r *runner) temporalCalls(ctx context.Context, m *burstMeters, procs ...*Proc) callCount {
	out := callCount{}
	for _, p := range procs {
		for _, name := range temporalCallMetrics {
			samples, err := metricSamples(ctx, p.URL+"/metrics", name)
			if err != nil {
				m.notes = append(m.notes, fmt.Sprintf("Temporal calls not read: %v", err))
				continue
			}
			for labels, v := range samples {
				out[labelValue(labels, "operation")] += v
			}
		}
	}
	return out
}

// labelValue is the value of label in a sample's label set as written
// (`a="x",b="y"`), "" when absent.
func labelValue(labels, label string) string {
	for part := range strings.SplitSeq(labels, ",") {
		if v, ok := strings.CutPrefix(part, label+"="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

// perOrder is the calls made between two readings, per order, and their
// total; a line lists them by operation, the most frequent first.
func (c callCount) perOrder(before callCount, orders int64) (total float64, line string) {
	type op struct {
		name string
		n    float64
	}
	var ops []op
	for name, v := range c {
		if d := (v - before[name]) / float64(orders); d > 0 {
			ops = append(ops, op{name, d})
			total += d
		}
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].n > ops[j].n || (ops[i].n == ops[j].n && ops[i].name < ops[j].name) })
	parts := make([]string, len(ops))
	for i, o := range ops {
		parts[i] = fmt.Sprintf("%s %.3f", o.name, o.n)
	}
	return total, strings.Join(parts, ", ")
}

// orNone is s, or "none" when empty.
func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
