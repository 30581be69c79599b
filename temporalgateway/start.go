// Package temporalgateway is seckill's one gateway to Temporal: every start, update,
// query, describe, list and history read of the order and sale workflows
// goes through it, so a workflow's id, its start policies, its search
// attributes and the reading of its refusals each have one home. It knows
// the workflows by name (domain) and imports none of their code.
package temporalgateway

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

// StartOptions are the start options of a reservation's workflow: its
// one id, a conflict policy that never starts a second run beside a
// running one, and the reuse policy that allows a new run only after a
// failed, terminated or timed-out one (a completed order never runs twice
// from an ordinary start; reconciliation's repair uses Restart).
func StartOptions(taskQueue string, in domain.OrderInput) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                       domain.OrderWorkflowID(in.Token),
		TaskQueue:                taskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			SaleIDKey.ValueSet(in.SaleID),
			UserIDKey.ValueSet(in.UserID),
			OrderStatusKey.ValueSet(string(domain.StatusQueued)),
		),
		// Where the starter is the worker's own client (the inbox and
		// outbox relays), the first workflow task comes back in the start's
		// answer when the worker has a free slot: no poll and no matching
		// for it. Elsewhere (the API) the SDK does not ask for it.
		EnableEagerStart: true,
	}
}

// StartOutcome is what a start found.
type StartOutcome int

// Start outcomes.
const (
	// StartedNew: this call started a new run.
	StartedNew StartOutcome = iota + 1
	// Existing: the id has a run this call did not start, either running
	// or closed and not replaced by the reuse policy; nothing was started.
	// The two are not told apart: no caller acts on the difference, and
	// telling them costs a describe (on the dev server a read of the whole
	// mutable state) for every duplicate start.
	Existing
)

func (o StartOutcome) String() string {
	switch o {
	case StartedNew:
		return "started_new"
	case Existing:
		return "existing"
	}
	return "unknown"
}

// Start starts the reservation's OrderWorkflow, or finds it started.
// It is idempotent: the API's starter, the inbox relay and the outbox relay
// call it for the same token and reach the same workflow; for them a
// workflow that already ran counts as started (nil error), whatever the
// outcome. The task queue is the configuration's (SECKILL_TASK_QUEUE);
// tests use their own so that other packages' workers do not take their
// tasks.
func Start(ctx context.Context, c client.Client, taskQueue string, in domain.OrderInput) error {
	_, err := StartOutcomeOf(ctx, c, taskQueue, in)
	return err
}

// StartOutcomeOf is Start reporting what it found.
func StartOutcomeOf(ctx context.Context, c client.Client, taskQueue string, in domain.OrderInput) (StartOutcome, error) {
	o, err := startOnce(ctx, c, StartOptions(taskQueue, in), domain.OrderWorkflowName, in)
	if err != nil {
		return 0, fmt.Errorf("start order workflow %s: %w", in.Token, err)
	}
	return o, nil
}

// Restart starts a new run for a reservation whose workflow closed
// while the reservation is still live (terminated, failed, timed out, or
// completed leaving it live): the new run adopts the reservation's state in
// the database (OrderWorkflow's rerun branches). A running workflow is never
// duplicated: the conflict policy refuses, and the outcome is Existing. Only
// reconciliation's repair calls it, after checking the reservation is live.
func Restart(ctx context.Context, c client.Client, taskQueue string, in domain.OrderInput) (StartOutcome, error) {
	opts := StartOptions(taskQueue, in)
	opts.WorkflowIDReusePolicy = enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE
	o, err := startOnce(ctx, c, opts, domain.OrderWorkflowName, in)
	if err != nil {
		return 0, fmt.Errorf("restart order workflow %s: %w", in.Token, err)
	}
	return o, nil
}

// startOnce starts a workflow whose id names its one execution and says
// whether this call started it. A start that finds the id taken is not an
// error: the callers are idempotent starters of the same input.
func startOnce(ctx context.Context, c client.Client, opts client.StartWorkflowOptions, name string, arg any) (StartOutcome, error) {
	opts.WorkflowIDConflictPolicy = enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL
	opts.WorkflowExecutionErrorWhenAlreadyStarted = true
	_, err := c.ExecuteWorkflow(ctx, opts, name, arg)
	if err == nil {
		return StartedNew, nil
	}
	var already *serviceerror.WorkflowExecutionAlreadyStarted
	if !errors.As(err, &already) {
		return 0, err
	}
	return Existing, nil
}

// StartRefused tells whether a start failed because Temporal refused the
// request itself (invalid arguments), which no retry changes. Every other
// failure (unavailable, timed out, overloaded, a lost connection) is
// Temporal's and passes once it recovers.
func StartRefused(err error) bool {
	var invalid *serviceerror.InvalidArgument
	return errors.As(err, &invalid)
}

// StartUnavailable tells whether a start failed because Temporal is down
// or shedding load (Unavailable, ResourceExhausted): the next start would
// fail the same way, so a caller starting many stops rather than hammer it.
// A timed-out start is not one: it may be a slow call among good ones.
func StartUnavailable(err error) bool {
	var down *serviceerror.Unavailable
	var shedding *serviceerror.ResourceExhausted
	return errors.As(err, &down) || errors.As(err, &shedding)
}

// StartSale starts a sale's workflow, or finds it started or finished.
func StartSale(ctx context.Context, c client.Client, taskQueue string, in domain.SaleInput) error {
	_, err := startOnce(ctx, c, client.StartWorkflowOptions{
		ID:                    domain.SaleWorkflowID(in.SaleID),
		TaskQueue:             taskQueue,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY,
		TypedSearchAttributes: temporal.NewSearchAttributes(SaleIDKey.ValueSet(in.SaleID)),
	}, domain.SaleWorkflowName, in)
	if err != nil {
		return fmt.Errorf("start sale workflow %d: %w", in.SaleID, err)
	}
	return nil
}

// SignalSaleChanged tells the sale's workflow that its sale changed
// (domain.SignalSaleChanged). A workflow that has closed or never started
// is no error: a closed sale owes no reconciliation, and a sale without
// its workflow gets one from the sale sweep, which reconciles first thing.
func SignalSaleChanged(ctx context.Context, c client.Client, saleID int64) error {
	err := c.SignalWorkflow(ctx, domain.SaleWorkflowID(saleID), "", domain.SignalSaleChanged, nil)
	var missing *serviceerror.NotFound
	if err != nil && !errors.As(err, &missing) {
		return fmt.Errorf("signal sale workflow %d: %w", saleID, err)
	}
	return nil
}
