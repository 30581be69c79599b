package bench

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testkit/histories"
)

// The report gives an order's worst history: each field's largest over
// the orders, not one order's counts, and every order's total, sorted.
func TestOrderHistoriesReportEachFieldsLargest(t *testing.T) {
	h := orderHistories{
		paid:    []histories.Count{{Total: 13, Markers: 2, WorkflowTasks: 2}, {Total: 14, Markers: 3, Upserts: 1, WorkflowTasks: 3}},
		expired: []histories.Count{{Total: 12, Markers: 2, TimersStarted: 1, WorkflowTasks: 2}, {Total: 11, Markers: 4, WorkflowTasks: 2}},
	}
	byName := map[string]float64{}
	for _, f := range h.figures() {
		byName[f.Name] = f.Value
	}
	require.Equal(t, map[string]float64{
		"Temporal events per expired order (most)":  12,
		"Temporal events per paid order (most)":     14,
		"search-attribute upserts per order (most)": 1,
		"workflow tasks per order (most)":           3,
	}, byName)
	require.Equal(t, []int{11, 12}, totals(h.expired))
	require.Contains(t, h.note(), "paid [13 14] events, expired [11 12]; markers at most 4, timers started 1")
	require.Equal(t, histories.Count{}, most(nil))
}
