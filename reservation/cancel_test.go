package reservation

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/redisgateway"
)

// A hold no workflow has recorded yet is recorded as its workflow would
// record it, then ended CANCELLED; its workflow is started (at once and
// through the outbox) so that it reads CANCELLED and ends, and Redis gives
// the unit back.
func TestCancellingAnUnrecordedHold(t *testing.T) {
	r := newRig(t, answers(outcome(redisgateway.OutcomeOK)), &fakeLedger{}, testSettings)
	r.holds.requests["42-tok"] = "req-00000009"

	got, err := r.svc.CancelQueued(t.Context(), 1001, 42, "42-tok")
	require.NoError(t, err)
	require.Equal(t, domain.StatusCancelled, got.Status)
	require.Equal(t, []domain.OrderInput{domain.RedisHoldInput("42-tok", 42, 1001, "req-00000009")}, r.ledger.recorded)
	require.Len(t, r.starter.inputs(), 1)
	require.Equal(t, []string{"42-tok"}, r.ledger.outbox)
	require.Equal(t, []string{"42-tok"}, r.syncer.synced)
}

// A recorded reservation is ended without recording it again.
func TestCancellingARecordedReservation(t *testing.T) {
	ledger := &fakeLedger{row: func(token string) (*domain.Reservation, error) {
		return &domain.Reservation{Token: token, Status: domain.StatusQueued}, nil
	}}
	r := newRig(t, answers(outcome(redisgateway.OutcomeOK)), ledger, testSettings)
	got, err := r.svc.CancelQueued(t.Context(), 1001, 42, "42-tok")
	require.NoError(t, err)
	require.Equal(t, domain.StatusCancelled, got.Status)
	require.Empty(t, ledger.recorded)
	require.Equal(t, []string{"42-tok"}, r.syncer.synced)
}

// An order placed first wins: the row comes back as it stands, nothing is
// started or released (the caller cancels through the workflow).
func TestAnOrderPlacedFirstIsNotCancelledHere(t *testing.T) {
	ledger := &fakeLedger{
		row: func(token string) (*domain.Reservation, error) { return &domain.Reservation{Token: token}, nil },
		end: func(token string) (*domain.Reservation, error) {
			return &domain.Reservation{Token: token, Status: domain.StatusPendingPayment}, nil
		},
	}
	r := newRig(t, answers(outcome(redisgateway.OutcomeOK)), ledger, testSettings)
	got, err := r.svc.CancelQueued(t.Context(), 1001, 42, "42-tok")
	require.NoError(t, err)
	require.Equal(t, domain.StatusPendingPayment, got.Status)
	require.Empty(t, r.starter.inputs())
	require.Empty(t, r.syncer.synced)
}

// The cancel's refusals: an unknown token is 404; a store or Redis that
// fails answers 503 with its Retry-After, and a cancel recorded whose
// release failed says so (the retry finishes it).
func TestCancelRefusals(t *testing.T) {
	r := newRig(t, answers(outcome(redisgateway.OutcomeOK)), &fakeLedger{}, testSettings)
	_, err := r.svc.CancelQueued(t.Context(), 1001, 42, "42-unknown")
	require.ErrorIs(t, err, domain.ErrNoReservation)

	r.holds.err = errors.New("redis down")
	_, err = r.svc.CancelQueued(t.Context(), 1001, 42, "42-tok")
	require.ErrorIs(t, err, errHoldsDown)
	require.Equal(t, 1, errHoldsDown.RetryAfter)

	down := &fakeLedger{row: func(string) (*domain.Reservation, error) { return nil, errors.New("db down") }}
	_, err = newRig(t, answers(outcome(redisgateway.OutcomeOK)), down, testSettings).svc.CancelQueued(t.Context(), 1001, 42, "42-tok")
	require.ErrorIs(t, err, errStoreDown)

	recorded := &fakeLedger{row: func(token string) (*domain.Reservation, error) { return &domain.Reservation{Token: token}, nil }}
	r = newRig(t, answers(outcome(redisgateway.OutcomeOK)), recorded, testSettings)
	r.syncer.err = errors.New("redis down")
	_, err = r.svc.CancelQueued(t.Context(), 1001, 42, "42-tok")
	require.ErrorIs(t, err, errNotRelease)
	require.Equal(t, []string{"42-tok"}, recorded.outbox, "the workflow's start is queued before the release is tried")
}
