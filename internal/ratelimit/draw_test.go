package ratelimit

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Under overload a user's chance per second does not grow with how many
// requests they send: 2,000 users asking ten times a second and 2,000
// asking once, against a rate of 2,000 requests a second, for ten seconds.
// Every request of a user in one second gets the same answer, and both
// groups are admitted in about the same number of user-seconds.
func TestOverloadDrawIsPerUserNotPerRequest(t *testing.T) {
	d := NewDraw([]byte("test key"), 2000)
	start := time.Unix(1_800_000_000, 0)
	admitted := map[bool]int{} // fast? -> user-seconds admitted
	for s := range 11 {
		now := start.Add(time.Duration(s) * time.Second)
		for u := int64(1); u <= 4000; u++ {
			fast := u <= 2000
			sends := 1
			if fast {
				sends = 10
			}
			first := d.Admit(u, now)
			for range sends - 1 {
				require.Equal(t, first, d.Admit(u, now), "user %d second %d: one answer per second", u, s)
			}
			if s > 0 && first { // second 0 knows no demand yet: everyone passes
				admitted[fast]++
			}
		}
	}
	slow, fast := float64(admitted[false]), float64(admitted[true])
	require.Positive(t, slow)
	require.InDelta(t, 1.0, fast/slow, 0.2, "fast %v vs slow %v user-seconds admitted", fast, slow)
	// 22,000 requests a second at a rate of 2,000: about 1/11 of the users.
	require.InDelta(t, 40000.0/11, slow+fast, 300, "admitted user-seconds over ten seconds")
}

// Below the rate everyone passes without a draw.
func TestOverloadDrawAdmitsAllBelowTheRate(t *testing.T) {
	d := NewDraw([]byte("test key"), 1000)
	start := time.Unix(1_800_000_000, 0)
	for s := range 3 {
		for u := int64(1); u <= 900; u++ {
			require.True(t, d.Admit(u, start.Add(time.Duration(s)*time.Second)))
		}
	}
}
