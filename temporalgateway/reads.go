package temporalgateway

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/seckill/seckill/domain"
)

// readTimeout bounds one visibility, history or describe call.
const readTimeout = 10 * time.Second

// Running lists the tokens of a sale's running order workflows (one
// visibility query, paged).
func Running(ctx context.Context, tc client.Client, saleID int64) (map[string]bool, error) {
	return list(ctx, tc, saleID, "ExecutionStatus = 'Running'")
}

// Queued lists the tokens of a sale's running order workflows whose
// OrderStatus is still QUEUED, as the start set it: every workflow that may
// not have recorded its reservation, for a rebuild that looks for
// unrecorded holds. Workflows started before the order-steps-folded version
// upserted their status on placement and drop out then; later ones keep
// QUEUED, so the list holds every running one of theirs (a superset: the
// caller skips what the database has).
func Queued(ctx context.Context, tc client.Client, saleID int64) (map[string]bool, error) {
	return list(ctx, tc, saleID, fmt.Sprintf("ExecutionStatus = 'Running' AND %s = '%s'", domain.SearchAttrOrderStatus, domain.StatusQueued))
}

// QueuedSince is Queued for the workflows started at since or later (by
// the Temporal server's clock): what started after a full listing.
func QueuedSince(ctx context.Context, tc client.Client, saleID int64, since time.Time) (map[string]bool, error) {
	return list(ctx, tc, saleID, fmt.Sprintf("ExecutionStatus = 'Running' AND %s = '%s' AND StartTime >= '%s'",
		domain.SearchAttrOrderStatus, domain.StatusQueued, since.UTC().Format(time.RFC3339Nano)))
}

// Closed lists the tokens with a closed order workflow run in a sale
// (one visibility query, paged); a token restarted since has a running run
// too. While a burst drains this list is nearly empty where the running
// one holds every order, and listing thousands of running workflows every
// minute competed with the drain for the Temporal server.
func Closed(ctx context.Context, tc client.Client, saleID int64) (map[string]bool, error) {
	return list(ctx, tc, saleID, "ExecutionStatus != 'Running'")
}

// orderTypes selects the order workflows of either type: earlier releases
// started OrderWorkflow, this one starts OrderWorkflowV2.
var orderTypes = fmt.Sprintf("WorkflowType IN ('%s', '%s')", domain.OrderWorkflowName, domain.OrderWorkflowV1Name)

func list(ctx context.Context, tc client.Client, saleID int64, status string) (map[string]bool, error) {
	q := fmt.Sprintf("%s AND %s = %d AND %s", orderTypes, domain.SearchAttrSaleID, saleID, status)
	out, err := listIDs(ctx, tc, q, domain.TokenOfOrderWorkflowID)
	if err != nil {
		return nil, fmt.Errorf("list order workflows of sale %d (%s): %w", saleID, status, err)
	}
	return out, nil
}

// listIDs answers what parse reads from the ids of the workflows the
// visibility query q lists (paged), those it can read.
func listIDs[K comparable](ctx context.Context, tc client.Client, q string, parse func(workflowID string) (K, bool)) (map[K]bool, error) {
	out := map[K]bool{}
	var next []byte
	for {
		lctx, cancel := context.WithTimeout(ctx, readTimeout)
		resp, err := tc.ListWorkflow(lctx, &workflowservice.ListWorkflowExecutionsRequest{Query: q, PageSize: 1000, NextPageToken: next})
		cancel()
		if err != nil {
			return nil, err
		}
		for _, e := range resp.GetExecutions() {
			if k, ok := parse(e.GetExecution().GetWorkflowId()); ok {
				out[k] = true
			}
		}
		if next = resp.GetNextPageToken(); len(next) == 0 {
			return out, nil
		}
	}
}

// RunningSales lists the sales whose SaleWorkflow runs (one visibility
// query, paged): the sale sweep's recheck, a call per thousand sales
// where starting each sale's workflow again cost one each.
func RunningSales(ctx context.Context, tc client.Client) (map[int64]bool, error) {
	q := fmt.Sprintf("WorkflowType IN ('%s', '%s') AND ExecutionStatus = 'Running'", domain.SaleWorkflowName, domain.SaleWorkflowV1Name)
	out, err := listIDs(ctx, tc, q, domain.SaleOfWorkflowID)
	if err != nil {
		return nil, fmt.Errorf("list running sale workflows: %w", err)
	}
	return out, nil
}

// Input reads the input a token's order workflow started with (its
// history's first event).
func Input(ctx context.Context, tc client.Client, token string) (domain.OrderInput, error) {
	hctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	it := tc.GetWorkflowHistory(hctx, domain.OrderWorkflowID(token), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return domain.OrderInput{}, fmt.Errorf("input of %s: empty history", token)
	}
	ev, err := it.Next()
	if err != nil {
		return domain.OrderInput{}, fmt.Errorf("input of %s: %w", token, err)
	}
	attrs := ev.GetWorkflowExecutionStartedEventAttributes()
	if attrs == nil {
		return domain.OrderInput{}, fmt.Errorf("input of %s: first event is %s", token, ev.GetEventType())
	}
	var in domain.OrderInput
	if err := converter.GetDefaultDataConverter().FromPayloads(attrs.GetInput(), &in); err != nil {
		return domain.OrderInput{}, fmt.Errorf("input of %s: %w", token, err)
	}
	if in.Token != token {
		return domain.OrderInput{}, errors.New("input of " + token + ": names token " + in.Token)
	}
	return in, nil
}

// CountRunning counts a sale's running order workflows (one visibility
// count).
func CountRunning(ctx context.Context, tc client.Client, saleID int64) (int64, error) {
	q := fmt.Sprintf("%s AND %s = %d AND ExecutionStatus = 'Running'", orderTypes, domain.SearchAttrSaleID, saleID)
	cctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	resp, err := tc.CountWorkflow(cctx, &workflowservice.CountWorkflowExecutionsRequest{Query: q})
	if err != nil {
		return 0, fmt.Errorf("count running order workflows of sale %d: %w", saleID, err)
	}
	return resp.GetCount(), nil
}

// LatestRun describes a token's latest workflow run: its status, and
// whether the token has a workflow at all.
func LatestRun(ctx context.Context, tc client.Client, token string) (enumspb.WorkflowExecutionStatus, bool, error) {
	dctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	desc, err := tc.DescribeWorkflow(dctx, domain.OrderWorkflowID(token), "")
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("describe workflow of %s: %w", token, err)
	}
	return desc.RawResponse.GetWorkflowExecutionInfo().GetStatus(), true, nil
}

// ErrClosed is an update's or query's answer when the token's workflow has
// closed or was never started: the database holds the reservation's end,
// and callers answer from there (errors.Is); to one that does not, a 503.
var ErrClosed = domain.Unavailable("the reservation's order workflow has closed or was never started; retry")

// Update runs the update name on the token's workflow and waits for its
// result. Its errors: ErrClosed; a refusal, as the *domain.Error of its
// code; anything else is Temporal's (unavailable, timed out).
func Update(ctx context.Context, tc client.Client, token, updateID, name string, arg any) (domain.OrderState, error) {
	var st domain.OrderState
	h, err := tc.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   domain.OrderWorkflowID(token),
		UpdateID:     updateID,
		UpdateName:   name,
		Args:         []any{arg},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = h.Get(ctx, &st)
	}
	if err == nil {
		return st, nil
	}
	return st, classify(token, name, err)
}

// Status queries the token's workflow for its state; its errors are
// Update's.
func Status(ctx context.Context, tc client.Client, token string) (domain.OrderState, error) {
	var st domain.OrderState
	v, err := tc.QueryWorkflow(ctx, domain.OrderWorkflowID(token), "", domain.QueryStatus)
	if err == nil {
		err = v.Get(&st)
	}
	if err == nil {
		return st, nil
	}
	return st, classify(token, domain.QueryStatus, err)
}

// classify reads an update's or query's failure: a closed workflow, a
// refusal's code, or Temporal's own failure.
func classify(token, call string, err error) error {
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) || strings.Contains(err.Error(), "workflow execution already completed") {
		return ErrClosed
	}
	switch code := RefusalCode(err); code {
	case "":
		return fmt.Errorf("%s on the workflow of %s: %w", call, token, err)
	case domain.ENotPayable:
		return domain.ErrNotPayable
	case domain.ENotCancellable:
		return domain.ErrNotCancellable
	default:
		return domain.Errorf(code, "the reservation's workflow refused the request")
	}
}
