package degraded

import (
	"time"

	"golang.org/x/time/rate"

	"github.com/seckill/seckill/internal/ratelimit"
)

// Limiter lets through the database path's transactions: at most
// SECKILL_FALLBACK_IN_FLIGHT in flight (slots) and at most
// SECKILL_FALLBACK_RPS (rate). A request it refuses is refused at once. A
// slot is taken before the rate's token, so a request refused because
// every slot is in flight spends none of the rate: the rate then lets through
// as many transactions as it allows, not fewer for each refusal the slots
// made.
type Limiter struct {
	rate  *rate.Limiter
	slots chan struct{}
}

// NewLimiter is the limiter of a path of rps transactions a second
// (0: unlimited), inFlight at once. The rate's burst, a tenth of a second's
// worth, is at most the slots: a burst they would refuse is not let through.
func NewLimiter(rps float64, inFlight int) *Limiter {
	inFlight = max(inFlight, 1)
	return &Limiter{
		rate:  rate.NewLimiter(ratelimit.Limit(rps), min(max(int(rps/10), 1), inFlight)),
		slots: make(chan struct{}, inFlight),
	}
}

// Acquire takes a slot and a token of the rate at now, and returns the
// slot's release, or why it refused: "saturated" (no slot free) or
// "rate_limited" (the rate is spent).
func (l *Limiter) Acquire(now time.Time) (release func(), refused string) {
	select {
	case l.slots <- struct{}{}:
	default:
		return nil, "saturated"
	}
	if !l.rate.AllowN(now, 1) {
		<-l.slots
		return nil, "rate_limited"
	}
	return func() { <-l.slots }, ""
}

// InFlight is how many transactions hold a slot.
func (l *Limiter) InFlight() int { return len(l.slots) }
