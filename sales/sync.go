package sales

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/seckill/seckill/degraded"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/store"
)

// forgetTimeout bounds the removal of a status record while the database
// path owns the sale.
const forgetTimeout = 100 * time.Millisecond

// SyncToken brings Redis's copy of a reservation to the state the database
// holds now, whatever path took the unit and whatever Redis holds of it:
// a released reservation's token is marked released, its buyer mark goes
// and the unit goes back to Redis's stock (for FAILED only when the reason
// says the database kept it); a pending order's token moves to ordered, a
// paid one's to paid. It is the Redis step of every release and advance,
// decided by the token's current state, never by what the workflow knew
// at its start, so it is idempotent and safe to repeat from a rerun or a
// repair. The scripts act only from the states they expect and bump the
// sale's fence, which a concurrent rebuild checks (see rebuild.lua).
//
// While the sale is in database mode it leaves Redis alone: Redis's copy
// is stale then, and the resync rebuilds it from a database snapshot taken
// after this reservation's database write, which is already committed.
// It reports whether Redis changed.
func SyncToken(ctx context.Context, st *store.Store, rdb *redisgateway.Client, token string) (bool, error) {
	ts, err := st.ReadTokenSync(ctx, token)
	if err != nil {
		return false, fmt.Errorf("sync token %s: %w", token, err)
	}
	res := ts.Reservation
	if ts.Mode == domain.ModeDatabase {
		return false, forgetInDatabaseMode(ctx, rdb, res.SaleID, ts.ModeChangedAt, token)
	}
	// The status record follows the token's Redis state in the same
	// script, before the workflow acknowledges the change to anyone.
	rec := StatusRecordOf(res)
	var changed bool
	switch res.Status {
	case domain.StatusPendingPayment:
		changed, err = rdb.AdvanceWithStatus(ctx, res.SaleID, token, rec, domain.TokenOrdered, domain.TokenHeld)
	case domain.StatusPaid:
		changed, err = rdb.AdvanceWithStatus(ctx, res.SaleID, token, rec, domain.TokenPaid, domain.TokenHeld, domain.TokenOrdered)
	case domain.StatusExpired, domain.StatusCancelled, domain.StatusFailed:
		// A FAILED hold's unit goes back only when the database is known
		// to have it (the user's unit was another order's); restoring one
		// the database lacks would promise a unit that does not exist.
		restore := res.Status != domain.StatusFailed || domain.KeepsUnitOnFailure(res.FailReason)
		changed, err = rdb.ReleaseWithStatus(ctx, res.SaleID, res.UserID, token, restore, ts.AnotherLive, rec)
	}
	if err != nil {
		return false, fmt.Errorf("sync token %s: %w", token, err)
	}
	return changed, nil
}

// forgetInDatabaseMode removes the token's status record from Redis, whose
// copy is stale while the database path owns the sale: an instance that
// has not learnt of the switch yet would serve the record after this
// change is acknowledged. Bounded tightly (Redis is often what failed, and
// the database path must not wait for it); when it fails, the caller's
// acknowledgement waits until every instance has learnt of the switch
// (degraded.EveryInstanceLearnt), after which none reads the record; the next
// rebuild's epoch voids it anyway.
func forgetInDatabaseMode(ctx context.Context, rdb *redisgateway.Client, saleID int64, modeChangedAt time.Time, token string) error {
	fctx, cancel := context.WithTimeout(ctx, forgetTimeout)
	err := rdb.ForgetStatus(fctx, saleID, token)
	cancel()
	if err == nil {
		return nil
	}
	wait := time.Until(degraded.EveryInstanceLearnt(modeChangedAt))
	slog.Warn("sync token: forget status record; waiting until every instance reads the database", "token", token, "wait", wait, "err", err)
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("sync token %s: wait for instances to learn of database mode: %w", token, ctx.Err())
	}
}

// restoreAttempts bounds RestoreLive's retries while releases and advances
// keep moving the sale's fence.
const restoreAttempts = 3

// RestoreLive puts a live order's token state and buyer mark back in Redis
// where a fault lost them (a restart that lost the AOF's last second): its
// user must not buy twice, and its release must find the token. The fence
// is read before the order, so a release committed after that read is never
// undone (see restore.lua). Stock is left to the drift repair, which copies
// it from the database once nothing is in flight. It reports whether Redis
// changed; a sale in database mode, or not in Redis, is left alone.
func RestoreLive(ctx context.Context, st *store.Store, rdb *redisgateway.Client, token string) (bool, error) {
	saleID, ok := domain.ParseToken(token)
	if !ok {
		return false, fmt.Errorf("restore %s: not a reservation token", token)
	}
	for attempt := 1; ; attempt++ {
		fence, err := rdb.ReadFence(ctx, saleID)
		if err != nil {
			return false, fmt.Errorf("restore %s: %w", token, err)
		}
		res, err := st.GetReservation(ctx, token)
		if err != nil {
			return false, fmt.Errorf("restore %s: %w", token, err)
		}
		sale, err := st.GetSale(ctx, saleID)
		if err != nil {
			return false, fmt.Errorf("restore %s: %w", token, err)
		}
		if sale.Mode == domain.ModeDatabase || !res.Status.Live() {
			return false, nil
		}
		changed, err := rdb.RestoreLive(ctx, saleID, res.UserID, token, res.Status.TokenState(), fence)
		if errors.Is(err, redisgateway.ErrFenceMoved) && attempt < restoreAttempts {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("restore %s: %w", token, err)
		}
		return changed, nil
	}
}

// StatusSeq is a status's rank along the contract's arrows: it grows with
// every change, so it is the event id of the reservation's event stream.
func StatusSeq(s domain.ReservationStatus) int64 {
	switch {
	case s.Terminal():
		return 3
	case s == domain.StatusPendingPayment:
		return 2
	}
	return 1
}

// StatusRecordOf is the status record of a reservation row.
func StatusRecordOf(r *domain.Reservation) redisgateway.StatusRecord {
	rec := redisgateway.StatusRecord{
		Seq:         StatusSeq(r.Status),
		UserID:      r.UserID,
		Status:      string(r.Status),
		OrderNo:     r.OrderNo,
		AmountCents: r.AmountCents,
	}
	if r.PayBy != nil {
		rec.PayBy = r.PayBy.UTC()
	}
	return rec
}

// ViewOfStatusRecord is the reservation view a status record stands for.
func ViewOfStatusRecord(token string, saleID int64, rec *redisgateway.StatusRecord) domain.ReservationView {
	r := domain.Reservation{Token: token, SaleID: saleID, Status: domain.ReservationStatus(rec.Status),
		OrderNo: rec.OrderNo, AmountCents: rec.AmountCents}
	if !rec.PayBy.IsZero() {
		t := rec.PayBy
		r.PayBy = &t
	}
	return r.View()
}
