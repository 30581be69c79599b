package workflows

import (
	"context"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/seckill/seckill/domain"
)

// Typed search attribute keys of the order workflow.
var (
	SaleIDKey      = temporal.NewSearchAttributeKeyInt64(domain.SearchAttrSaleID)
	UserIDKey      = temporal.NewSearchAttributeKeyInt64(domain.SearchAttrUserID)
	OrderStatusKey = temporal.NewSearchAttributeKeyKeyword(domain.SearchAttrOrderStatus)
)

// OrderStartOptions are the start options of a reservation's workflow: its
// one id, the conflict policy that returns the running execution, and the
// reuse policy that allows a new run only after a failed one (so an
// operator's terminate can be repaired, while a completed order never runs
// twice).
func OrderStartOptions(taskQueue string, in domain.OrderInput) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                       domain.OrderWorkflowID(in.Token),
		TaskQueue:                taskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			SaleIDKey.ValueSet(in.SaleID),
			UserIDKey.ValueSet(in.UserID),
			OrderStatusKey.ValueSet(string(domain.StatusQueued)),
		),
	}
}

// StartOrder starts the reservation's OrderWorkflow, or finds it started.
// It is idempotent: the API's starter, the inbox relay, the outbox relay and
// reconciliation's repairs all call it for the same token and reach the
// same workflow. A workflow that already completed counts as started.
// The task queue is the configuration's (SECKILL_TASK_QUEUE); tests use
// their own so that other packages' workers do not take their tasks.
func StartOrder(ctx context.Context, c client.Client, taskQueue string, in domain.OrderInput) error {
	if err := startOnce(ctx, c, OrderStartOptions(taskQueue, in), domain.OrderWorkflowName, in); err != nil {
		return fmt.Errorf("start order workflow %s: %w", in.Token, err)
	}
	return nil
}

// startOnce starts a workflow whose id names its one execution: one already
// running (returned by the conflict policy) or already completed counts as
// started.
func startOnce(ctx context.Context, c client.Client, opts client.StartWorkflowOptions, name string, arg any) error {
	_, err := c.ExecuteWorkflow(ctx, opts, name, arg)
	var already *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &already) {
		return nil
	}
	return err
}

// StartRefused tells whether a start failed because Temporal refused the
// request itself (invalid arguments), which no retry changes. Every other
// failure (unavailable, timed out, overloaded, a lost connection) is
// Temporal's and passes once it recovers.
func StartRefused(err error) bool {
	var invalid *serviceerror.InvalidArgument
	return errors.As(err, &invalid)
}
