// Package activities holds the side effects of seckill's workflows: short
// MySQL transactions and Redis scripts. Each activity is idempotent, because
// Temporal runs an activity at least once.
package activities

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/sales"
	"github.com/seckill/seckill/store"
)

// Activities are the order workflow's activities. The workflow calls them
// as local activities through method values of a nil *Activities; the
// worker registers a real instance, whose methods the SDK then runs.
type Activities struct {
	Store *store.Store
	Redis *redisgateway.Client
	// FailAfterCommit (fault suite, development mode only) makes the first
	// PlaceOrder of each token fail after its transaction committed, so the
	// retry must find the order instead of deducting again.
	FailAfterCommit bool
	// Metrics, when set, count ended orders.
	Metrics *Metrics
	failed  sync.Map // token -> struct{}: PlaceOrder already failed once
}

// Per-call bounds inside an attempt; the workflow's StartToCloseTimeout
// bounds the attempt as a whole.
const (
	dbTimeout    = 8 * time.Second
	redisTimeout = 3 * time.Second
)

// A business refusal crosses Temporal as a non-retryable application error
// whose type is the refusal's domain code (domain.E*): the workflow and the
// API read the code back with temporalgateway.RefusalCode, and the API answers it
// through its one status map (api/errors.go). Histories recorded before the
// codes were the types carry older type names; RefusalCode accepts those too.

// NonRetryableErrorTypes are the refusal codes the order activities answer
// with; a retry cannot change them. (refuse marks them non-retryable too.)
var NonRetryableErrorTypes = []string{
	domain.ESoldOut,
	domain.EAlreadyPurchased,
	domain.ENotPayable,
	domain.ENotCancellable,
}

// refuse wraps a business refusal as the application error whose type is
// its domain code.
func refuse(op, code string, err error) error {
	return temporal.NewNonRetryableApplicationError(op+": "+err.Error(), code, err)
}

// classify passes on a business refusal (the store answers them as
// *domain.Error) as the application error of its code; everything else
// (lost connections, deadlocks, timeouts) stays retryable, wrapped with
// the operation.
func classify(op string, err error) error {
	var refused *domain.Error
	if errors.As(err, &refused) && slices.Contains(NonRetryableErrorTypes, refused.Code) {
		return refuse(op, refused.Code, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// RecordReservation records the reservation as QUEUED, or finds the row a
// previous run (or the database path) wrote, and says where it stands.
func (a *Activities) RecordReservation(ctx context.Context, in domain.OrderInput) (domain.OrderState, error) {
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	r, err := a.Store.RecordReservation(ctx, in)
	if err != nil {
		return domain.OrderState{}, classify("record reservation", err)
	}
	return r.State(), nil
}

// PlaceOrder creates the order and deducts its unit from a bucket in one
// transaction; rerun it returns the order it placed.
func (a *Activities) PlaceOrder(ctx context.Context, token string) (domain.OrderState, error) {
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	r, err := a.Store.PlaceOrder(ctx, token)
	if err != nil {
		return domain.OrderState{}, classify("place order", err)
	}
	if a.FailAfterCommit {
		if _, done := a.failed.LoadOrStore(token, struct{}{}); !done {
			slog.Warn("fault hook: place order fails after its commit", "token", token)
			return domain.OrderState{}, fmt.Errorf("place order %s: injected failure after commit", token)
		}
	}
	return r.State(), nil
}

// MarkPaid records the payment; repeated with the same ref it returns the
// same state.
func (a *Activities) MarkPaid(ctx context.Context, token, paymentRef string) (domain.OrderState, error) {
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	before, known := a.statusBefore(ctx, token)
	r, err := a.Store.MarkPaid(ctx, token, paymentRef)
	if err != nil {
		return domain.OrderState{}, classify("mark paid", err)
	}
	a.countEnd(before, known, r.Status)
	return r.State(), nil
}

// ReleaseOrder ends a pending order as EXPIRED or CANCELLED and puts its
// unit back into its bucket.
func (a *Activities) ReleaseOrder(ctx context.Context, token string, to domain.ReservationStatus) (domain.OrderState, error) {
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	before, known := a.statusBefore(ctx, token)
	r, err := a.Store.ReleaseOrder(ctx, token, to)
	if err != nil {
		return domain.OrderState{}, classify("release order", err)
	}
	a.countEnd(before, known, r.Status)
	return r.State(), nil
}

// EndQueued ends a reservation that never got an order, as FAILED or
// CANCELLED.
func (a *Activities) EndQueued(ctx context.Context, token string, to domain.ReservationStatus, reason string) (domain.OrderState, error) {
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	before, known := a.statusBefore(ctx, token)
	r, err := a.Store.EndQueued(ctx, token, to, reason)
	if err != nil {
		return domain.OrderState{}, classify("end queued", err)
	}
	a.countEnd(before, known, r.Status)
	return r.State(), nil
}

// RedisAdvance moves the token's Redis state to `to` if it is in one of
// from; it reports whether it moved (false on a rerun). It is the Redis
// step of workflows recorded before redisFromState, which write no status
// record: any record (a repair's) goes, so status reads ask the database.
func (a *Activities) RedisAdvance(ctx context.Context, saleID int64, token, to string, from []string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	moved, err := a.Redis.Advance(ctx, saleID, token, to, from...)
	if err != nil {
		return false, fmt.Errorf("redis advance %s to %s: %w", token, to, err)
	}
	if err := a.Redis.ForgetStatus(ctx, saleID, token); err != nil {
		return false, fmt.Errorf("redis advance %s to %s: %w", token, to, err)
	}
	return moved, nil
}

// SyncRedis brings Redis's copy of the token to the database's current
// state (sales.SyncToken): the Redis step of every release and advance of
// workflows at version redisFromState. It reports whether Redis changed.
func (a *Activities) SyncRedis(ctx context.Context, token string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	changed, err := sales.SyncToken(ctx, a.Store, a.Redis, token)
	if err != nil {
		return false, fmt.Errorf("sync redis: %w", err)
	}
	return changed, nil
}

// RedisRelease releases the token's hold: the buyer mark goes, the token is
// marked released and, when restore, the unit goes back to Redis's stock.
// It reports whether it released now (false on a rerun). Like RedisAdvance
// it drops the token's status record.
func (a *Activities) RedisRelease(ctx context.Context, saleID, userID int64, token string, restore bool) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	keepBuyer, err := a.Store.HoldsAnotherLive(ctx, saleID, userID, token)
	if err != nil {
		return false, fmt.Errorf("redis release %s: %w", token, err)
	}
	released, err := a.Redis.Release(ctx, saleID, userID, token, restore, keepBuyer)
	if err != nil {
		return false, fmt.Errorf("redis release %s: %w", token, err)
	}
	if err := a.Redis.ForgetStatus(ctx, saleID, token); err != nil {
		return false, fmt.Errorf("redis release %s: %w", token, err)
	}
	return released, nil
}
