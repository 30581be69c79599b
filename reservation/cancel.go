package reservation

import (
	"context"
	"errors"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/sales"
	"github.com/seckill/seckill/store"
)

// HoldIndex finds a Redis hold's request id, and puts back a live
// reservation's replay key Redis forgot (redisgateway.Client).
type HoldIndex interface {
	RequestID(ctx context.Context, saleID, userID int64, token string) (string, bool, error)
	RestoreReplay(ctx context.Context, saleID, userID int64, requestID, token string) (bool, error)
}

// Syncer makes Redis follow a reservation's state in the database
// (sales.SyncToken): a cancelled hold's unit back in stock, its buyer
// mark released.
type Syncer interface {
	SyncToken(ctx context.Context, token string) (bool, error)
}

// SalesSyncer is the Syncer of a store and a Redis client.
type SalesSyncer struct {
	Store *store.Store
	Redis *redisgateway.Client
}

// SyncToken calls sales.SyncToken.
func (s SalesSyncer) SyncToken(ctx context.Context, token string) (bool, error) {
	return sales.SyncToken(ctx, s.Store, s.Redis, token)
}

var (
	errStoreDown  = domain.Unavailable("reservation store unavailable")
	errHoldsDown  = domain.Unavailable("reservation data unavailable")
	errNotRelease = domain.Unavailable("the cancellation is recorded; releasing the unit failed, retry")
)

// CancelQueued cancels a reservation that has no order yet (or answers a
// repeated cancel of a cancelled one), with or without a running workflow:
// the database first (the row recorded if the workflow has not written it
// yet, then ended CANCELLED), then Redis (the hold, the buyer mark and the
// token released, the unit back in stock), both idempotent, so a retry
// after a 503 finishes the job. A workflow that runs or starts later reads
// CANCELLED and ends without an order. It returns the row as it stands:
// not CANCELLED when the order was placed first (the caller then cancels
// through the workflow).
func (s *Service) CancelQueued(ctx context.Context, userID, saleID int64, token string) (*domain.Reservation, error) {
	dctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	if err := s.recordBeforeCancel(dctx, userID, saleID, token); err != nil {
		return nil, err
	}
	r, err := s.ledger.EndQueued(dctx, token, domain.StatusCancelled, "user")
	if err != nil {
		s.log(ctx).WarnContext(ctx, "cancel: end queued reservation", "token", token, "err", err)
		return nil, errStoreDown
	}
	if r.Status != domain.StatusCancelled {
		return r, nil
	}
	// Its workflow may never have started (Temporal down, the reserving
	// API gone, the inbox entry lost with Redis's writes): start it now,
	// and durably through the outbox relay, so that it reads CANCELLED and
	// ends and every reservation has its workflow. Both idempotent.
	s.starter.Enqueue(ctx, r.OrderInput())
	if err := s.ledger.EnqueueStart(dctx, token, saleID); err != nil {
		s.log(ctx).WarnContext(ctx, "cancel: enqueue the workflow start", "token", token, "err", err)
	}
	// Also on a repeat: the release that ended it may not have reached
	// Redis yet (a workflow writes the database first), and the answer
	// promises the unit is back on sale. Redis follows the token's state
	// now, whatever path took the unit.
	rctx, rcancel := context.WithTimeout(ctx, s.set.RedisTimeout*4)
	defer rcancel()
	if _, err := s.syncer.SyncToken(rctx, token); err != nil {
		s.log(ctx).WarnContext(ctx, "cancel: release Redis hold", "token", token, "err", err)
		return nil, errNotRelease
	}
	return r, nil
}

// recordBeforeCancel records a hold no workflow has recorded yet, as the
// workflow would, so that it can be ended.
func (s *Service) recordBeforeCancel(ctx context.Context, userID, saleID int64, token string) error {
	_, err := s.ledger.GetReservation(ctx, token)
	switch {
	case err == nil:
		return nil
	case !errors.Is(err, store.ErrNotFound):
		return errStoreDown
	}
	requestID, ok, err := s.holdIndex.RequestID(ctx, saleID, userID, token)
	if err != nil {
		s.log(ctx).WarnContext(ctx, "cancel: find request id", "token", token, "err", err)
		return errHoldsDown
	}
	if !ok {
		return domain.ErrNoReservation
	}
	if _, err := s.ledger.RecordReservation(ctx, domain.RedisHoldInput(token, saleID, userID, requestID)); err != nil {
		s.log(ctx).WarnContext(ctx, "cancel: record reservation", "token", token, "err", err)
		return errStoreDown
	}
	return nil
}
