package sales

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/store"
)

// ErrNotSettled: the sale may still take a reservation or a payment (it has
// not ended, or its payment window is open), or a reservation of it is
// still live (QUEUED or PENDING_PAYMENT) in the database.
var ErrNotSettled = errors.New("sale not settled")

// Retire tears a settled sale down (Teardown): its Redis keys go and the
// sale is recorded finished, after which every instance drops what it
// keeps of it in memory. A sale is settled once it has ended (or was
// stopped), its payment window has closed, and no reservation of it is
// live in the database; PAID ones stay in MySQL. An unsettled sale is
// refused with ErrNotSettled and left as it is.
func Retire(ctx context.Context, st *store.Store, rdb *redisgateway.Client, saleID int64, now time.Time) error {
	sale, err := st.GetSale(ctx, saleID)
	if err != nil {
		return fmt.Errorf("retire sale %d: %w", saleID, err)
	}
	ended := sale.Control == domain.ControlStopped || !now.Before(sale.EndsAt)
	if !ended || now.Before(sale.EndsAt.Add(sale.PaymentWindow())) {
		return fmt.Errorf("retire sale %d: %w: payments close at %s", saleID, ErrNotSettled,
			sale.EndsAt.Add(sale.PaymentWindow()).UTC().Format(time.RFC3339))
	}
	counts, err := st.CountReservations(ctx, saleID)
	if err != nil {
		return fmt.Errorf("retire sale %d: %w", saleID, err)
	}
	if live := counts[domain.StatusQueued] + counts[domain.StatusPendingPayment]; live > 0 {
		return fmt.Errorf("retire sale %d: %w: %d live reservations", saleID, ErrNotSettled, live)
	}
	if err := Teardown(ctx, st, rdb, saleID); err != nil {
		return fmt.Errorf("retire sale %d: %w", saleID, err)
	}
	return nil
}

// SweepRetired removes the Redis keys that a late writer put back after
// their sale was torn down (a repeated release, a waitlist join racing the
// end), of the retired sales ids (store.FinishedSince), and answers how
// many it swept.
func SweepRetired(ctx context.Context, rdb *redisgateway.Client, ids []int64) (swept int, err error) {
	left, err := rdb.SalesWithKeys(ctx, ids)
	if err != nil {
		return 0, fmt.Errorf("sweep retired sales: %w", err)
	}
	for _, id := range left {
		if err := rdb.DeleteSale(ctx, id); err != nil {
			return swept, fmt.Errorf("sweep retired sales: %w", err)
		}
		swept++
	}
	return swept, nil
}
