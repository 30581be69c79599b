// Package histories reads a workflow's history from Temporal and counts
// what it cost: its events, and those of them that are billed actions or
// visibility writes. The order workflow's tests and the bench count an
// order's history with it, so both hold the same figure.
package histories

import (
	"context"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
)

// Count is what a history holds: every event, and of them the markers
// (local activities, version markers), search-attribute upserts (each a
// visibility write), timers started and workflow tasks completed.
type Count struct {
	Total, Markers, Upserts, TimersStarted, WorkflowTasks int
}

// CountEvents counts events.
func CountEvents(events []*historypb.HistoryEvent) Count {
	var c Count
	c.Total = len(events)
	for _, ev := range events {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			c.Markers++
		case enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
			c.Upserts++
		case enumspb.EVENT_TYPE_TIMER_STARTED:
			c.TimersStarted++
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			c.WorkflowTasks++
		}
	}
	return c
}

// Read is the whole history of a workflow's run (runID "": its latest),
// every page of it.
func Read(ctx context.Context, c client.Client, workflowID, runID string) ([]*historypb.HistoryEvent, error) {
	it := c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var out []*historypb.HistoryEvent
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return out, fmt.Errorf("history of %s: %w", workflowID, err)
		}
		out = append(out, ev)
	}
	return out, nil
}
