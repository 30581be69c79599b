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
// new sales; once per RecheckEvery it lists the running workflows once and
// starts only the sales missing from the list (so an idle marketplace
// costs Temporal no start); a failed start or listing is tried again next
// round; a sale no longer open is forgotten.
func TestSaleSweeperStartsNewSalesAtOnceAndRechecksByOneListing(t *testing.T) {
	var open []*domain.Sale
	running := map[int64]bool{}
	for id := range int64(1000) {
		open = append(open, &domain.Sale{ID: 5_000_000 + id})
		running[5_000_000+id] = true
	}
	starts := map[int64]int{}
	var fail, failList bool
	lists := 0
	s := &SaleSweeper{
		OpenSales: func(context.Context) ([]*domain.Sale, error) { return open, nil },
		Start: func(_ context.Context, in domain.SaleInput) error {
			if fail {
				return errors.New("temporal down")
			}
			starts[in.SaleID]++
			return nil
		},
		Running: func(context.Context) (map[int64]bool, error) {
			if failList {
				return nil, errors.New("visibility down")
			}
			lists++
			return running, nil
		},
		Every: 30 * time.Second, RecheckEvery: 10 * time.Minute, Logger: slog.New(slog.DiscardHandler),
	}
	ctx := context.Background()
	now := time.Now()
	s.Once(ctx, now)
	require.Equal(t, 1000, len(starts), "every sale started in the first round")

	// Until RecheckEvery has passed a round starts only new sales, and
	// lists nothing.
	open = append(open, &domain.Sale{ID: 9_000_000})
	running[9_000_000] = true
	clear(starts)
	for i := range 19 {
		now = now.Add(s.Every)
		s.Once(ctx, now)
		require.Zero(t, lists, "round %d listed", i)
	}
	require.Equal(t, map[int64]int{9_000_000: 1}, starts, "only the new sale started")

	// The recheck: one listing; the sale whose workflow an operator
	// terminated is started again, no other.
	delete(running, 5_000_007)
	clear(starts)
	now = now.Add(s.Every)
	s.Once(ctx, now)
	require.Equal(t, 1, lists)
	require.Equal(t, map[int64]int{5_000_007: 1}, starts)
	now = now.Add(s.Every)
	s.Once(ctx, now)
	require.Equal(t, 1, lists, "one listing per RecheckEvery")

	// A failed listing is tried next round.
	now = now.Add(s.RecheckEvery)
	failList = true
	s.Once(ctx, now)
	failList = false
	now = now.Add(s.Every)
	s.Once(ctx, now)
	require.Equal(t, 2, lists, "the failed listing tried again")

	// A start that fails is tried again next round, and a closed sale is
	// forgotten.
	fail = true
	open = append(open[:10], &domain.Sale{ID: 9_000_001})
	now = now.Add(s.Every)
	s.Once(ctx, now)
	fail = false
	clear(starts)
	now = now.Add(s.Every)
	s.Once(ctx, now)
	require.Equal(t, map[int64]int{9_000_001: 1}, starts, "the failed start tried again")
	require.Len(t, s.started, 11)
}
