package bench

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A reading's calls by operation come from the operation label of every
// sample; per order they are the growth between two readings, the most
// frequent first, operations that did not grow left out.
func TestTemporalCallsPerOrderAreTheGrowthByOperation(t *testing.T) {
	require.Equal(t, "StartWorkflowExecution", labelValue(`namespace="default",operation="StartWorkflowExecution",task_queue="q"`, "operation"))
	require.Equal(t, "", labelValue(`namespace="default"`, "operation"))
	before := callCount{"StartWorkflowExecution": 10, "RespondWorkflowTaskCompleted": 5, "GetSystemInfo": 1}
	after := callCount{"StartWorkflowExecution": 139, "RespondWorkflowTaskCompleted": 105, "GetSystemInfo": 1, "PollWorkflowTaskQueue": 1}
	total, line := after.perOrder(before, 100)
	require.InDelta(t, 2.30, total, 1e-9)
	require.Equal(t, "StartWorkflowExecution 1.290, RespondWorkflowTaskCompleted 1.000, PollWorkflowTaskQueue 0.010", line)
}
