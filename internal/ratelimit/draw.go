package ratelimit

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/seckill/seckill/internal/keyedmac"
)

// Draw keeps the reservation path fair under overload (contract
// 1.2, "Fairness"): when more reservations arrive than the global rate
// (SECKILL_GLOBAL_RPS) takes, a per-request drop would give a user who
// sends ten times the requests ten times the chance. Instead each second
// every user holds one draw, an HMAC of the user and the second under the
// fleet's token key: while the last second asked for more than the rate,
// a user is admitted for this whole second when their draw falls in the
// share the rate covers (rate / requests of the last second), and refused
// for the whole second otherwise, with Retry-After at the next one. Asking
// again within the second changes nothing; the global bucket stays behind
// it as the hard cap for the first second of a surge.
type Draw struct {
	tickets *keyedmac.Tickets
	rate    float64      // requests per second the path takes
	second  atomic.Int64 // the Unix second being counted
	asked   atomic.Int64 // requests in that second
	share   atomic.Uint64
}

// NewDraw is the draw of a path taking rate requests a second, keyed by
// the fleet's tokenKey (every instance draws alike).
func NewDraw(tokenKey []byte, rate float64) *Draw {
	if rate <= 0 {
		rate = math.Inf(1) // no global rate: never overloaded
	}
	d := &Draw{tickets: keyedmac.NewTickets(tokenKey, "seckill overload draw v1"), rate: rate}
	d.share.Store(math.Float64bits(1))
	return d
}

// Admit reports whether the user's request passes this second's draw.
func (d *Draw) Admit(userID int64, now time.Time) bool {
	sec := now.Unix()
	if cur := d.second.Load(); sec != cur && d.second.CompareAndSwap(cur, sec) {
		asked := float64(d.asked.Swap(0))
		share := 1.0
		if sec == cur+1 && asked > d.rate {
			share = d.rate / asked
		}
		d.share.Store(math.Float64bits(share))
	}
	d.asked.Add(1)
	share := math.Float64frombits(d.share.Load())
	return share >= 1 || d.ticket(userID, sec) < share
}

// ticket is a user's draw for one second, uniform in [0, 1).
func (d *Draw) ticket(userID, sec int64) float64 {
	return float64(d.tickets.Draw(userID, sec)) / (1 << 53)
}
