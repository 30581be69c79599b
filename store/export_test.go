package store

import (
	"context"

	"github.com/seckill/seckill/domain"
)

// PlaceOrderWanting is PlaceOrder with the bucket the order wants named by
// the test, as if the read had picked it: a stale pick, or one another
// transaction holds.
func (s *Store) PlaceOrderWanting(ctx context.Context, token string, bucket int) (*domain.Reservation, error) {
	return s.placeOrder(ctx, token, &bucket)
}

// ReserveInDBWanting is ReserveInDB with the bucket the reservation wants
// named by the test, as if the read had picked it.
func (s *Store) ReserveInDBWanting(ctx context.Context, in domain.OrderInput, bucket int) (*domain.Reservation, bool, error) {
	return s.reserveInDB(ctx, in, 0, &bucket)
}

// ScriptStep is a step of a script: a statement, the error a duplicate key
// in it fails the script with, and the error a count of affected rows
// other than one does (nil: none).
type ScriptStep struct {
	Query     string
	Args      []any
	Dup, None error
}

// RunScript runs steps as one script.
func (s *Store) RunScript(ctx context.Context, steps ...ScriptStep) error {
	var sc script
	for _, st := range steps {
		sc.add(step{stmt: stmt{st.Query, st.Args}, what: "test step", dup: st.Dup, none: st.None})
	}
	return sc.run(ctx, s.DB)
}
