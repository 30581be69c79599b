package worker

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
)

// The sweeper starts every sale's workflow in its first round, then only
// new sales and each round's share of the rest, so that over RecheckEvery
// each sale is looked at once more; a failed start is tried again next
// round; a sale no longer open is forgotten.
func TestSaleSweeperStartsNewSalesAtOnceAndRechecksTheRestByShares(t *testing.T) {
	var open []*domain.Sale
	for id := range int64(1000) {
		open = append(open, &domain.Sale{ID: 5_000_000 + id})
	}
	starts := map[int64]int{}
	var fail bool
	s := &SaleSweeper{
		OpenSales: func(context.Context) ([]*domain.Sale, error) { return open, nil },
		Start: func(_ context.Context, in domain.SaleInput) error {
			if fail {
				return errors.New("temporal down")
			}
			starts[in.SaleID]++
			return nil
		},
		Every: 30 * time.Second, RecheckEvery: 10 * time.Minute, Logger: slog.New(slog.DiscardHandler),
	}
	ctx := context.Background()
	s.Once(ctx)
	require.Equal(t, 1000, len(starts), "every sale started in the first round")

	// A new sale is started in the next round, beside a share of the rest.
	open = append(open, &domain.Sale{ID: 9_000_000})
	clear(starts)
	s.Once(ctx)
	require.Equal(t, 1, starts[9_000_000])
	require.Less(t, len(starts), 1000/20*2, "a share of the known sales, not all of them")

	// Over the rest of RecheckEvery's 20 rounds each sale is looked at
	// once (the first round's share among them).
	for range 19 {
		s.Once(ctx)
	}
	require.Equal(t, 1001, len(starts), "each sale rechecked within RecheckEvery")
	for id, n := range starts {
		if id != 9_000_000 {
			require.Equal(t, 1, n, "sale %d rechecked once", id)
		}
	}

	// A start that fails is tried again next round, and a closed sale is
	// forgotten.
	fail = true
	open = append(open[:10], &domain.Sale{ID: 9_000_001})
	s.Once(ctx)
	fail = false
	clear(starts)
	s.Once(ctx)
	require.Equal(t, 1, starts[9_000_001], "the failed start tried again")
	require.Len(t, s.started, 11)
}
