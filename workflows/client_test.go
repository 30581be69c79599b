package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lua"
)

// startOnce tells a new run, a running one and a closed one apart; an
// ordinary start never replaces a completed order, RestartOrder does, and
// neither ever runs two at once.
func TestStartOrderReportsItsOutcome(t *testing.T) {
	s := MustStack(t)
	sale := s.MustWarmSale(t, 1, 10*time.Minute, 1)
	user := testenv.UniqueUser()
	outcome, token := s.reserve(sale, user, "req-outcome")
	require.Equal(t, lua.OutcomeOK, outcome)
	in := domain.OrderInput{Token: token, SaleID: sale.ID, UserID: user, RequestID: "req-outcome", Path: domain.PathRedis}
	ctx := ctxT(t, time.Minute)

	o, err := StartOrderOutcome(ctx, s.c, s.queue, in)
	require.NoError(t, err)
	require.Equal(t, StartedNew, o)
	o, err = StartOrderOutcome(ctx, s.c, s.queue, in)
	require.NoError(t, err)
	require.Equal(t, AlreadyRunning, o)
	o, err = RestartOrder(ctx, s.c, s.queue, in)
	require.NoError(t, err)
	require.Equal(t, AlreadyRunning, o, "a running workflow is never duplicated")

	s.waitStatus(token, domain.StatusPendingPayment)
	s.mustUpdate(token, domain.UpdateCancel, domain.CancelRequest{Reason: "test"}, domain.StatusCancelled)
	require.Equal(t, domain.StatusCancelled, s.result(token).Status)
	o, err = StartOrderOutcome(ctx, s.c, s.queue, in)
	require.NoError(t, err)
	require.Equal(t, FoundClosed, o, "an ordinary start finds the completed order")
	require.NoError(t, StartOrder(ctx, s.c, s.queue, in), "for the relay a closed workflow counts as started")

	// The repair's restart runs again; the new run adopts the end.
	o, err = RestartOrder(ctx, s.c, s.queue, in)
	require.NoError(t, err)
	require.Equal(t, StartedNew, o)
	require.Equal(t, domain.StatusCancelled, s.result(token).Status)
	s.requireConsistent(sale)
}
