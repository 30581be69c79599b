package sales

import (
	"context"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"golang.org/x/sync/errgroup"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/temporalgateway"
)

// listedLag is how much earlier than a full listing of a sale's QUEUED
// workflows the resync's second listing begins: a workflow the full
// listing could miss (the Temporal server's clock behind the worker's, a
// start not yet visible: visibility trails the start by milliseconds,
// seconds on an overloaded server) started after its time less this. A
// variable only so that tests can wait less.
var listedLag = 30 * time.Second

// queuedListing is a full listing of a sale's running QUEUED order
// workflows (temporalgateway.Queued) taken before the resync stops the
// sale's paths: with thousands of orders it takes seconds, which the
// database path then still sells through. The rebuild lists only what
// started since (unrecordedHolds).
type queuedListing struct {
	at     time.Time // when the listing began
	tokens map[string]bool
}

// listQueued takes the full listing; nil without a Temporal client.
func listQueued(ctx context.Context, tc client.Client, saleID int64) (*queuedListing, error) {
	if tc == nil {
		return nil, nil
	}
	at := time.Now()
	tokens, err := temporalgateway.Queued(ctx, tc, saleID)
	if err != nil {
		return nil, err
	}
	return &queuedListing{at: at, tokens: tokens}, nil
}

// unrecordedHolds lists the Redis holds whose order workflows run but whose
// reservations the database did not have when known was read: a 202 the
// workflow has not recorded yet (the database was down, the worker slow).
// Once Redis lost its keys they are nowhere else; a rebuild that did not
// count them would sell their units again and fail them. inputs caches the
// workflows' inputs across a rebuild's attempts (after a long database
// outage there can be thousands). With no Temporal client (tests, tools)
// it lists nothing.
func unrecordedHolds(ctx context.Context, tc client.Client, saleID int64, known func(token string) bool, inputs map[string]domain.OrderInput, listed *queuedListing) ([]domain.OrderInput, error) {
	if tc == nil {
		return nil, nil
	}
	running, err := runningQueued(ctx, tc, saleID, known, listed)
	if err != nil {
		return nil, err
	}
	var missing []string
	for token := range running {
		if _, ok := inputs[token]; !ok && !known(token) {
			missing = append(missing, token)
		}
	}
	read, err := perToken(ctx, missing, func(ctx context.Context, token string) (domain.OrderInput, error) {
		return temporalgateway.Input(ctx, tc, token)
	})
	if err != nil {
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

// runningQueued answers the tokens of the sale's running QUEUED order
// workflows that may be unrecorded. Without a full listing it takes one;
// with one, it lists only the workflows started since (less listedLag)
// and adds the full listing's tokens the database does not know, each
// still running (a closed workflow holds nothing).
func runningQueued(ctx context.Context, tc client.Client, saleID int64, known func(token string) bool, listed *queuedListing) (map[string]bool, error) {
	if listed == nil {
		return temporalgateway.Queued(ctx, tc, saleID)
	}
	running, err := temporalgateway.QueuedSince(ctx, tc, saleID, listed.at.Add(-listedLag))
	if err != nil {
		return nil, err
	}
	var check []string
	for token := range listed.tokens {
		if !running[token] && !known(token) {
			check = append(check, token)
		}
	}
	still, err := perToken(ctx, check, func(ctx context.Context, token string) (bool, error) {
		status, ok, err := temporalgateway.LatestRun(ctx, tc, token)
		return ok && status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, err
	})
	if err != nil {
		return nil, fmt.Errorf("recheck listed workflows of sale %d: %w", saleID, err)
	}
	for i, token := range check {
		if still[i] {
			running[token] = true
		}
	}
	return running, nil
}

// perTokenReads bounds perToken's calls to Temporal in flight.
const perTokenReads = 8

// perToken runs read for each token, perTokenReads at a time, and
// answers the results in the tokens' order; the first error ends it.
func perToken[T any](ctx context.Context, tokens []string, read func(ctx context.Context, token string) (T, error)) ([]T, error) {
	out := make([]T, len(tokens))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(perTokenReads)
	for i, token := range tokens {
		g.Go(func() error {
			v, err := read(gctx, token)
			out[i] = v
			return err
		})
	}
	return out, g.Wait()
}
