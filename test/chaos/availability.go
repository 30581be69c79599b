package chaos

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Availability invariants: a fault on one instance must not take the
// sale from the others, and a sale changes mode only for a Redis outage of
// the fleet, once per outage.
const (
	IHealthyServe = "other_instances_keep_serving"
	IModeStable   = "sale_mode_moves_only_for_redis_outages"
)

// Bounds of the availability checks.
const (
	// goodputFloor: the other API's share of good answers during a fault
	// on one instance, against the same share while no fault was active
	// (a schedule of overlapping faults leaves few quiet windows right
	// before a fault, so the baseline is every quiet moment of the run).
	goodputFloor = 0.9
	// goodputMinAnswers: fewer answers in either window say nothing.
	goodputMinAnswers = 20
	// modeSwitchSlack: a switch may land this long after a Redis fault
	// healed (the breaker and the fleet's evidence lag the fault).
	modeSwitchSlack = 15 * time.Second
	// fleetSettle: after a fault of a service every instance shares heals,
	// the fleet is still recovering from it this long (a sale returns from
	// the database path after the mode's dwell and Redis's healthy time,
	// then resyncs), so a fault on one instance then is not judged alone.
	fleetSettle = 15 * time.Second
)

// OpMode is the note the runner's sampler writes when a sale's mode
// changes; Detail is the new mode.
const OpMode = "mode"

var oneAPI = regexp.MustCompile(`^api(\d+)(<->|$)`)

// apiOf is the API a span touches alone (1-based), or 0.
func apiOf(s FaultSpan) int {
	m := oneAPI.FindStringSubmatch(s.Target)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// redisForFleet reports whether a span takes Redis from every process
// (the server, or in a cluster a master's one proxy), and for which sale
// (0: all).
func redisForFleet(s FaultSpan) bool {
	switch s.Class {
	case FRedisKill, FRedisFreeze, FRedisAOFLoss, FRedisKeysDeleted, FRedisFailover:
		return true
	case FLinkCut, FLinkSlow:
		return strings.HasPrefix(s.Target, "all<->")
	}
	return false
}

// healthyServe checks, for each fault on one API instance with no other
// fault during it (nor the fleet's recovery from one), that the other instances' share of good reservation
// answers (an answer below 500) stays at least goodputFloor of their share
// while no fault was active.
func (c *checker) healthyServe() {
	for i, s := range c.spans {
		api := apiOf(s)
		if api == 0 || c.overlapsOther(i, s.From, s.To) {
			continue
		}
		for other := 1; other <= c.apis(); other++ {
			if other == api {
				continue
			}
			before := c.quietGoodput(other)
			during := c.goodput(other, s.From, s.To)
			if before.n < goodputMinAnswers || during.n < goodputMinAnswers {
				continue
			}
			c.checked[IHealthyServe]++
			if during.share() < goodputFloor*before.share() {
				c.add(IHealthyServe, 0, 0, "", "fault %d (%s on %s): api%d answered %.0f%% good (%d answers) against %.0f%% (%d) with no fault",
					s.ID, s.Class, s.Target, other, 100*during.share(), during.n, 100*before.share(), before.n)
			}
		}
	}
}

// overlapsOther reports whether a span other than the i-th, or the
// fleet's recovery after it, is active at some time in [from, to].
func (c *checker) overlapsOther(i int, from, to time.Time) bool {
	for j, o := range c.spans {
		if j != i && o.From.Before(to) && o.To.Add(settleAfter(o)).After(from) {
			return true
		}
	}
	return false
}

// settleAfter is how long the fleet may still be recovering after a span
// heals: fleetSettle for a fault of a service every instance shares.
func settleAfter(s FaultSpan) time.Duration {
	switch s.Class {
	case FMySQLKill, FMySQLFreeze, FMySQLDown, FDBFailoverKill, FDBFailoverCut, FTemporalKill, FTemporalFreeze:
		return fleetSettle
	}
	if redisForFleet(s) {
		return fleetSettle
	}
	return 0
}

// apis is the highest API index answering in the history.
func (c *checker) apis() int {
	n := 0
	for _, e := range c.h {
		n = max(n, e.API)
	}
	return n
}

// quietGoodput counts one API's answers to reservations sent while no
// fault was active.
func (c *checker) quietGoodput(api int) answers {
	var a answers
	for _, e := range c.h {
		if e.Kind != KindRequest || e.Op != OpReserve || e.API != api || c.faultAt(e.T) {
			continue
		}
		a.count(e)
	}
	return a
}

// faultAt reports whether a fault was active at t.
func (c *checker) faultAt(t time.Time) bool {
	for _, s := range c.spans {
		if !t.Before(s.From) && t.Before(s.To) {
			return true
		}
	}
	return false
}

type answers struct{ n, good int }

func (a *answers) count(e Event) {
	a.n++
	if e.Err == "" && e.HTTP > 0 && e.HTTP < http.StatusInternalServerError {
		a.good++
	}
}

func (a answers) share() float64 { return float64(a.good) / float64(a.n) }

// goodput counts one API's answers to reservations sent in [from, to).
func (c *checker) goodput(api int, from, to time.Time) answers {
	var a answers
	for _, e := range c.h {
		if e.Kind != KindRequest || e.Op != OpReserve || e.API != api || e.T.Before(from) || !e.T.Before(to) {
			continue
		}
		a.count(e)
	}
	return a
}

// modeStable checks each sale's moves to the database path (the sampler's
// notes): each lands during a Redis outage of the fleet (or within
// modeSwitchSlack after it), and no outage moves a sale twice (a sale that
// flaps).
func (c *checker) modeStable() {
	moves := map[int]map[int64]int{} // span index -> sale -> moves
	for _, e := range c.h {
		if !movedToDatabase(e) {
			continue
		}
		c.checked[IModeStable]++
		// The outage it belongs to: of those it may follow, the latest
		// to begin (an earlier one's slack may reach into a later one).
		span := -1
		for i, s := range c.spans {
			if redisForFleet(s) && (s.Sale == 0 || s.Sale == e.Sale) && !e.T.Before(s.From) && !e.T.After(s.To.Add(modeSwitchSlack)) &&
				(span < 0 || s.From.After(c.spans[span].From)) {
				span = i
			}
		}
		if span < 0 {
			c.add(IModeStable, e.Sale, 0, "", "moved to the database path at %s with no Redis outage of the fleet", fmtTime(e.T))
			continue
		}
		if moves[span] == nil {
			moves[span] = map[int64]int{}
		}
		if moves[span][e.Sale]++; moves[span][e.Sale] == 2 {
			s := c.spans[span]
			c.add(IModeStable, e.Sale, 0, "", "moved to the database path again at %s in one outage (fault %d, %s)", fmtTime(e.T), s.ID, s.Class)
		}
	}
}

// modeNote is the sampler's note of a sale's new mode; Target names the
// mode it left ("from redis, epoch 7").
func modeNote(sale int64, from, to string, epoch int64) Event {
	return Event{Kind: KindNote, Op: OpMode, Sale: sale, Detail: to, Target: fmt.Sprintf("from %s, epoch %d", from, epoch)}
}

// movedToDatabase reports a note of a sale leaving Redis for the database
// path (not a stalled resync rolled back to it).
func movedToDatabase(e Event) bool {
	return e.Kind == KindNote && e.Op == OpMode && e.Detail == "database" && strings.HasPrefix(e.Target, "from redis,")
}

// RecoveredAfter is how long after a fault healed every API first answered
// a reservation sent after the heal for good (not 503, 429 or no answer);
// false when one never did.
func RecoveredAfter(h []Event, s FaultSpan) (time.Duration, bool) {
	first := map[int]time.Time{}
	apis := 0
	for _, e := range h {
		apis = max(apis, e.API)
		if e.Kind != KindRequest || e.Op != OpReserve || e.T.Before(s.To) || unknownAnswer(e) {
			continue
		}
		if t, ok := first[e.API]; !ok || e.T.Before(t) {
			first[e.API] = e.T
		}
	}
	if apis == 0 || len(first) < apis {
		return 0, false
	}
	var last time.Time
	for _, t := range first {
		if t.After(last) {
			last = t
		}
	}
	return last.Sub(s.To), true
}

// unknownAnswer is an answer that leaves a reservation's outcome open.
func unknownAnswer(e Event) bool {
	return e.Err != "" || e.HTTP == 0 || e.HTTP == http.StatusServiceUnavailable || e.HTTP == http.StatusTooManyRequests || e.HTTP >= 500
}
