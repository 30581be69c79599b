package degraded

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"
)

// A database-path request refused because every slot is in flight spends
// none of SECKILL_FALLBACK_RPS: the rate is for transactions, and one that
// never ran must not leave the next request that finds a slot refused by
// the rate. Were the rate's token taken first, a burst the slots refused
// would cost the path its rate for the time the tokens take to refill,
// and the path would sell less than its limit.
func TestDatabasePathLimiterSaturatedSpendsNoRate(t *testing.T) {
	a := &Limiter{rate: rate.NewLimiter(1, 2), slots: make(chan struct{}, 1)}
	now := time.Unix(1_000_000, 0)
	release, refused := a.Acquire(now)
	require.Empty(t, refused)
	for range 3 {
		_, refused := a.Acquire(now)
		require.Equal(t, "saturated", refused)
	}
	release()
	release, refused = a.Acquire(now)
	require.Empty(t, refused, "the second token of the burst is still there")
	release()
	_, refused = a.Acquire(now)
	require.Equal(t, "rate_limited", refused, "the burst is spent")
	release, refused = a.Acquire(now.Add(time.Second))
	require.Empty(t, refused, "a second later a token refilled")
	release()
}

// The rate's burst is at most the slots: a burst the slots would refuse
// anyway is not let through at once.
func TestDatabasePathLimiterBurstIsAtMostTheSlots(t *testing.T) {
	require.Equal(t, 4, NewLimiter(500, 4).rate.Burst())
	require.Equal(t, 50, NewLimiter(500, 64).rate.Burst())
	require.Equal(t, 1, NewLimiter(5, 16).rate.Burst())
	require.Equal(t, rate.Inf, NewLimiter(0, 16).rate.Limit())
}
