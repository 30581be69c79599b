package sales

import (
	"context"

	"go.temporal.io/sdk/client"
	"golang.org/x/sync/errgroup"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/temporalgateway"
)

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
	running, err := temporalgateway.Queued(ctx, tc, saleID)
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
			in, err := temporalgateway.Input(gctx, tc, token)
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
