package sales

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/domain"
)

// SetAfterSnapshot installs the rebuild's hook between its database
// snapshot and its script (nil removes it).
func SetAfterSnapshot(f func()) { afterSnapshot = f }

// SaleStartsInFlight bounds the background starts of sale workflows.
const SaleStartsInFlight = saleStartsInFlight

// NewOperatorStartingWith is an operator that starts sale workflows with
// start, queueing up to queued sales.
func NewOperatorStartingWith(d OperatorDeps, start func(ctx context.Context, in domain.SaleInput) error, queued int) *Operator {
	return newOperator(d, start, queued)
}

// UnrecordedHolds is the rebuild's listing of the holds whose workflows
// run unrecorded, with no full listing taken before.
func UnrecordedHolds(ctx context.Context, tc client.Client, saleID int64, known func(token string) bool, inputs map[string]domain.OrderInput) ([]domain.OrderInput, error) {
	return unrecordedHolds(ctx, tc, saleID, known, inputs, nil)
}

// SetListedLag sets how much earlier than the full listing the resync's
// second listing begins, until the test ends.
func SetListedLag(t testing.TB, d time.Duration) {
	was := listedLag
	listedLag = d
	t.Cleanup(func() { listedLag = was })
}
