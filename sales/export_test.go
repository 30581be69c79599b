package sales

import (
	"context"

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
// run unrecorded.
var UnrecordedHolds = unrecordedHolds
