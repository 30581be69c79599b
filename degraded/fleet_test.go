package degraded

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
)

// Redis is down for the fleet only when most of the processes seen lately
// find it down: one process cut from a Redis the rest reach, or a tie,
// moves no sale.
func TestTheFleetFindsRedisDownByMajority(t *testing.T) {
	for _, tc := range []struct {
		up, down int
		want     bool
	}{
		{0, 0, false}, {3, 0, false}, {2, 1, false}, {1, 1, false}, {1, 2, true}, {0, 1, true},
	} {
		require.Equal(t, tc.want, FleetDown(domain.RedisFleetView{Up: tc.up, Down: tc.down}), "up %d, down %d", tc.up, tc.down)
	}
}
