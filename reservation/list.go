package reservation

import (
	"context"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/reqid"
)

// listTimeout bounds the database read of a user's reservations.
const listTimeout = 5 * time.Second

// List is up to limit of a user's reservations as the database has them,
// newest first, of one sale when saleID > 0: the list across sales, and
// of one sale when Redis cannot answer it. It may come from the replica
// (store.ReadReservations: the reservations it lacks yet come from the
// primary). A failed read is 503.
func (o *Orders) List(ctx context.Context, userID, saleID int64, limit int) ([]domain.ReservationView, error) {
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	rs, _, err := o.d.Store.ReadReservations(ctx, userID, saleID, limit)
	if err != nil {
		reqid.Logger(ctx, o.d.Logger).Warn("list reservations", "user_id", userID, "err", err)
		return nil, domain.Unavailable("reservation store unavailable")
	}
	views := make([]domain.ReservationView, len(rs))
	for i, r := range rs {
		views[i] = r.View()
	}
	return views, nil
}
