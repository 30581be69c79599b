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
	require.Equal(t, 4, newAdmission(50, 4).rate.Burst())
	require.Equal(t, 50, newAdmission(500, 64).rate.Burst())
	require.Equal(t, 1, newAdmission(5, 16).rate.Burst())
	require.Equal(t, rate.Inf, newAdmission(0, 16).rate.Limit())
}

// The slots are enough for the rate at the path's target latency: at 500 a
// second and 50 ms a reservation, 25 are in flight, so 16 slots would
// refuse "saturated" while the rate had tokens, and the path would sell at
// most 320 a second. Fewer in flight than that is not a setting that
// refuses what the rate allows; more is kept.
func TestDatabaseAdmissionSlotsCoverTheRate(t *testing.T) {
	a := newAdmission(500, 16)
	require.Equal(t, 25, cap(a.slots))
	require.Equal(t, 25, a.rate.Burst())
	require.Equal(t, 64, cap(newAdmission(500, 64).slots))
	require.Equal(t, 16, cap(newAdmission(0, 16).slots), "unlimited rate: the setting alone")

	// At the target latency a steady 500 a second is all admitted.
	now := time.Unix(1_000_000, 0)
	var inFlight []func()
	admitted := 0
	for i := range 1000 { // two seconds, one request every 2 ms
		now = now.Add(2 * time.Millisecond)
		if i >= 25 { // each reservation ends 50 ms after it began
			inFlight[i-25]()
		}
		release, refused := a.admit(now)
		if refused != "" {
			inFlight = append(inFlight, func() {})
			continue
		}
		admitted++
		inFlight = append(inFlight, release)
	}
	require.Equal(t, 1000, admitted)
}
