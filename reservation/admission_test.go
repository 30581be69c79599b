package reservation

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"
)

// A database-path request refused because every slot is in flight spends
// none of SECKILL_FALLBACK_RPS: the rate is for transactions, and one that
// never ran must not leave the next request that finds a slot refused by
// the rate. Before, the rate's token was taken first, so a burst the slots
// refused cost the path its rate for the time the tokens took to refill,
// and the path sold less than its limit.
func TestDatabaseAdmissionSaturatedSpendsNoRate(t *testing.T) {
	a := &admission{rate: rate.NewLimiter(1, 2), slots: make(chan struct{}, 1)}
	now := time.Unix(1_000_000, 0)
	release, refused := a.admit(now)
	require.Empty(t, refused)
	for range 3 {
		_, refused := a.admit(now)
		require.Equal(t, "saturated", refused)
	}
	release()
	release, refused = a.admit(now)
	require.Empty(t, refused, "the second token of the burst is still there")
	release()
	_, refused = a.admit(now)
	require.Equal(t, "rate_limited", refused, "the burst is spent")
	release, refused = a.admit(now.Add(time.Second))
	require.Empty(t, refused, "a second later a token refilled")
	release()
}

// The rate's burst is at most the slots: a burst the slots would refuse
// anyway is not admitted at once.
func TestDatabaseAdmissionBurstIsAtMostTheSlots(t *testing.T) {
	require.Equal(t, 4, newAdmission(500, 4).rate.Burst())
	require.Equal(t, 50, newAdmission(500, 64).rate.Burst())
	require.Equal(t, 1, newAdmission(5, 16).rate.Burst())
	require.Equal(t, rate.Inf, newAdmission(0, 16).rate.Limit())
}
