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
