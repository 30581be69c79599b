package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/sales"
	"github.com/seckill/seckill/store"
	"github.com/seckill/seckill/temporalgateway"
)

// The order workflow's steps at its order-steps-folded version: each is one
// local activity (one history event) that makes the database write and
// then has Redis follow it, where it took up to three activities and a
// version marker. Every part is idempotent, so a retried step, whose
// earlier attempt may have committed, redoes only what is left.

// quickSync bounds a step's Redis part: when Redis is slow or away the step
// answers without it, and the workflow retries SyncRedis as an activity of
// its own, so the step does not hold the workflow task (and every update).
const quickSync = 2 * time.Second

// Step is a step's answer: the reservation's state after its database
// write, and whether Redis follows it.
type Step struct {
	State domain.OrderState
	// Synced: Redis's copy of the token follows State. False when the
	// workflow asked for no Redis part (another Redis step was running) or
	// the Redis part failed (RedisError says why); the workflow then runs
	// SyncRedis itself.
	Synced     bool
	RedisError string
}

// BeginRequest is what BeginOrder needs.
type BeginRequest struct {
	Input domain.OrderInput
	// Cancel: a cancel was accepted before the order existed; a QUEUED
	// reservation then ends CANCELLED, with CancelReason, without an order.
	Cancel       bool
	CancelReason string
	// Sync asks for the Redis part.
	Sync bool
}

// BeginOrder records the reservation (or finds the row an earlier run or
// the database path wrote), places its order or ends it, and has Redis
// follow: RecordReservation, PlaceOrder (EndQueued on a refusal or a
// cancel) and SyncRedis in one step. A reservation found ended or pending
// (a rerun) is only synced.
func (a *Activities) BeginOrder(ctx context.Context, req BeginRequest) (Step, error) {
	st, err := a.begin(ctx, req)
	if err != nil {
		return Step{}, err
	}
	return a.follow(ctx, st, req.Sync), nil
}

func (a *Activities) begin(ctx context.Context, req BeginRequest) (domain.OrderState, error) {
	token := req.Input.Token
	if req.Cancel {
		st, err := a.RecordReservation(ctx, req.Input)
		if err != nil || st.Status != domain.StatusQueued {
			return st, err
		}
		return a.EndQueued(ctx, token, domain.StatusCancelled, req.CancelReason)
	}
	placed, err := a.recordAndPlace(ctx, req.Input)
	var reason string
	switch temporalgateway.RefusalCode(err) {
	case "":
		return placed, err
	case domain.ESoldOut:
		// The database had no unit for this hold; SyncRedis does not give
		// Redis one back for this reason.
		reason = domain.FailReasonNoStock
	case domain.EAlreadyPurchased:
		// The user's unit is another order's; this hold's unit goes back.
		reason = domain.FailReasonAlreadyPurchased
	default:
		return domain.OrderState{}, err
	}
	ended, err := a.EndQueued(ctx, token, domain.StatusFailed, reason)
	if err != nil {
		return domain.OrderState{}, fmt.Errorf("end %s as failed: %w", token, err)
	}
	if ended.FailReason == "" && ended.Status == domain.StatusFailed {
		ended.FailReason = reason
	}
	return ended, nil
}

// recordAndPlace places the reservation's order, recording the reservation
// first when the database has no row of it. Most have one (a Redis hold is
// recorded before its 202, a database-path reservation in its transaction),
// and PlaceOrder reads the row anyway: trying it first saves
// RecordReservation's read. A row found not QUEUED (ended, or placed by an
// earlier attempt) is answered as it stands, as RecordReservation would.
func (a *Activities) recordAndPlace(ctx context.Context, in domain.OrderInput) (domain.OrderState, error) {
	placed, err := a.PlaceOrder(ctx, in.Token)
	if !errors.Is(err, store.ErrNotFound) {
		return placed, err
	}
	st, err := a.RecordReservation(ctx, in)
	if err != nil || st.Status != domain.StatusQueued {
		return st, err
	}
	return a.PlaceOrder(ctx, in.Token)
}

// MarkPaidAndSync records the payment (MarkPaid) and has Redis follow.
func (a *Activities) MarkPaidAndSync(ctx context.Context, token, paymentRef string, sync bool) (Step, error) {
	st, err := a.MarkPaid(ctx, token, paymentRef)
	if err != nil {
		return Step{}, err
	}
	return a.follow(ctx, st, sync), nil
}

// ReleaseAndSync ends a pending order as EXPIRED or CANCELLED, its unit back
// in its bucket (ReleaseOrder), and has Redis follow: the hold released and
// its unit back on sale.
func (a *Activities) ReleaseAndSync(ctx context.Context, token string, to domain.ReservationStatus, sync bool) (Step, error) {
	st, err := a.ReleaseOrder(ctx, token, to)
	if err != nil {
		return Step{}, err
	}
	return a.follow(ctx, st, sync), nil
}

// follow is a step's Redis part: SyncRedis, bounded by quickSync. Its
// failure does not fail the step, whose database write is done: it is
// reported for the workflow to retry.
func (a *Activities) follow(ctx context.Context, st domain.OrderState, sync bool) Step {
	if !sync {
		return Step{State: st}
	}
	ctx, cancel := context.WithTimeout(ctx, quickSync)
	defer cancel()
	if _, err := sales.SyncToken(ctx, a.Store, a.Redis, st.Token); err != nil {
		return Step{State: st, RedisError: fmt.Sprintf("sync redis: %v", err)}
	}
	return Step{State: st, Synced: true}
}
