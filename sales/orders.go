package sales

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"golang.org/x/sync/errgroup"

	"github.com/seckill/seckill/domain"
)

// RunningOrders lists the tokens of a sale's running order workflows (one
// visibility query, paged).
func RunningOrders(ctx context.Context, tc client.Client, saleID int64) (map[string]bool, error) {
	return listOrders(ctx, tc, saleID, "ExecutionStatus = 'Running'")
}

// queuedOrders lists the tokens of a sale's running order workflows that
// have not placed their order (OrderStatus still QUEUED, set at start): a
// workflow past placement has recorded its reservation, so a rebuild that
// looks for unrecorded holds needs only these, not every live order's.
func queuedOrders(ctx context.Context, tc client.Client, saleID int64) (map[string]bool, error) {
	return listOrders(ctx, tc, saleID, fmt.Sprintf("ExecutionStatus = 'Running' AND %s = '%s'", domain.SearchAttrOrderStatus, domain.StatusQueued))
}

// ClosedOrders lists the tokens with a closed order workflow run in a sale
// (one visibility query, paged); a token restarted since has a running run
// too. While a burst drains this list is nearly empty where the running
// one holds every order, and listing thousands of running workflows every
// minute competed with the drain for the Temporal server.
func ClosedOrders(ctx context.Context, tc client.Client, saleID int64) (map[string]bool, error) {
	return listOrders(ctx, tc, saleID, "ExecutionStatus != 'Running'")
}

func listOrders(ctx context.Context, tc client.Client, saleID int64, status string) (map[string]bool, error) {
	q := fmt.Sprintf("WorkflowType = '%s' AND %s = %d AND %s", domain.OrderWorkflowName, domain.SearchAttrSaleID, saleID, status)
	out := map[string]bool{}
	var next []byte
	for {
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := tc.ListWorkflow(lctx, &workflowservice.ListWorkflowExecutionsRequest{Query: q, PageSize: 1000, NextPageToken: next})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("list order workflows of sale %d (%s): %w", saleID, status, err)
		}
		for _, e := range resp.GetExecutions() {
			if token, ok := domain.TokenOfOrderWorkflowID(e.GetExecution().GetWorkflowId()); ok {
				out[token] = true
			}
		}
		if next = resp.GetNextPageToken(); len(next) == 0 {
			return out, nil
		}
	}
}

// orderInput reads the input a token's order workflow started with (its
// history's first event).
func orderInput(ctx context.Context, tc client.Client, token string) (domain.OrderInput, error) {
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
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

// unrecordedHolds lists the Redis holds whose order workflows run but whose
// reservations the database did not have when known was read: a 202 the
// workflow has not recorded yet (the database was down, the worker slow).
// Once Redis lost its keys they are nowhere else; a rebuild that did not
// count them would sell their units again and fail them. inputs caches the
// workflows' inputs across a rebuild's attempts (after a long database
// outage there can be thousands). With no Temporal client (tests, tools)
// it lists nothing.
func unrecordedHolds(ctx context.Context, tc client.Client, saleID int64, known func(token string) bool, inputs map[string]domain.OrderInput) ([]domain.OrderInput, error) {
	if tc == nil {
		return nil, nil
	}
	running, err := queuedOrders(ctx, tc, saleID)
	if err != nil {
		return nil, err
	}
	var missing []string
	for token := range running {
		if _, ok := inputs[token]; !ok && !known(token) {
			missing = append(missing, token)
		}
	}
	read := make([]domain.OrderInput, len(missing))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, token := range missing {
		g.Go(func() error {
			in, err := orderInput(gctx, tc, token)
			read[i] = in
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for _, in := range read {
		inputs[in.Token] = in
	}
	var out []domain.OrderInput
	for token := range running {
		if in, ok := inputs[token]; ok && !known(token) && !in.NoRedisHold() {
			out = append(out, in) // the database path records before it answers
		}
	}
	return out, nil
}
