package chaos

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// reserves is n reservation answers of one API, one every step from from.
func reserves(api, n int, from time.Time, step time.Duration, code int) []Event {
	out := make([]Event, n)
	for i := range out {
		t := from.Add(time.Duration(i) * step)
		out[i] = Event{Kind: KindRequest, Op: OpReserve, T: t, End: t, API: api, Sale: 1, HTTP: code}
	}
	return out
}

func cutAPI1(from, to time.Time) []Event {
	return []Event{
		{Kind: KindFault, Op: FLinkCut, T: from, FaultID: 7, Target: "api1<->redis"},
		{Kind: KindHeal, Op: FLinkCut, T: to, FaultID: 7, Target: "api1<->redis"},
	}
}

func TestOtherInstancesKeepServingThroughAFaultOnOne(t *testing.T) {
	base := at(100)
	h := cutAPI1(base, base.Add(20*time.Second))
	h = append(h, reserves(2, 60, base.Add(-30*time.Second), 500*time.Millisecond, http.StatusAccepted)...)
	h = append(h, reserves(2, 40, base, 500*time.Millisecond, http.StatusAccepted)...)
	h = append(h, reserves(1, 40, base, 500*time.Millisecond, http.StatusServiceUnavailable)...) // the cut one may refuse
	c := &checker{h: h, spans: Spans(h), checked: map[string]int{}}
	c.healthyServe()
	assert.Empty(t, c.out)
	assert.Equal(t, 1, c.checked[IHealthyServe])

	// The healthy instance answering 503 to a third of its clients fails.
	h = append(cutAPI1(base, base.Add(20*time.Second)), reserves(2, 60, base.Add(-30*time.Second), 500*time.Millisecond, http.StatusAccepted)...)
	h = append(h, reserves(2, 27, base, 750*time.Millisecond, http.StatusAccepted)...)
	h = append(h, reserves(2, 13, base.Add(100*time.Millisecond), 1500*time.Millisecond, http.StatusServiceUnavailable)...)
	c = &checker{h: h, spans: Spans(h), checked: map[string]int{}}
	c.healthyServe()
	assert.Equal(t, []string{IHealthyServe}, invariantsOf(c.out))
}

func TestAFaultOverlappingAnotherDuringItIsNotJudgedForGoodput(t *testing.T) {
	base := at(100)
	h := cutAPI1(base, base.Add(20*time.Second))
	h = append(h, Event{Kind: KindFault, Op: FRedisFreeze, T: base.Add(5 * time.Second), FaultID: 8, Target: "redis"},
		Event{Kind: KindHeal, Op: FRedisFreeze, T: base.Add(10 * time.Second), FaultID: 8, Target: "redis"})
	h = append(h, reserves(2, 60, base.Add(-30*time.Second), 500*time.Millisecond, http.StatusAccepted)...)
	h = append(h, reserves(2, 40, base, 500*time.Millisecond, http.StatusServiceUnavailable)...)
	c := &checker{h: h, spans: Spans(h), checked: map[string]int{}}
	c.healthyServe()
	assert.Empty(t, c.out)
	assert.Zero(t, c.checked[IHealthyServe])
}

func TestAFaultWhileTheFleetRecoversFromAnotherIsNotJudgedForGoodput(t *testing.T) {
	// Chaos seed 3: an API deploy 2.5 s after a Redis freeze healed, while
	// the sale was still on its way back from the database path.
	base := at(100)
	h := cutAPI1(base, base.Add(time.Second))
	h = append(h, Event{Kind: KindFault, Op: FRedisFreeze, T: base.Add(-6 * time.Second), FaultID: 3, Target: "redis"},
		Event{Kind: KindHeal, Op: FRedisFreeze, T: base.Add(-2500 * time.Millisecond), FaultID: 3, Target: "redis"})
	h = append(h, reserves(2, 60, base.Add(-60*time.Second), 500*time.Millisecond, http.StatusAccepted)...)
	h = append(h, reserves(2, 40, base, 25*time.Millisecond, http.StatusServiceUnavailable)...)
	c := &checker{h: h, spans: Spans(h), checked: map[string]int{}}
	c.healthyServe()
	assert.Empty(t, c.out)
	assert.Zero(t, c.checked[IHealthyServe])

	// Long after the heal it is judged again.
	for i := range h[:4] {
		if h[i].FaultID == 3 {
			h[i].T = h[i].T.Add(-time.Minute)
		}
	}
	c = &checker{h: h, spans: Spans(h), checked: map[string]int{}}
	c.healthyServe()
	assert.Equal(t, []string{IHealthyServe}, invariantsOf(c.out))
}

func TestSaleModeMovesOnlyForARedisOutageOfTheFleet(t *testing.T) {
	base := at(100)
	outage := []Event{
		{Kind: KindFault, Op: FRedisFreeze, T: base, FaultID: 1, Target: "redis"},
		{Kind: KindHeal, Op: FRedisFreeze, T: base.Add(10 * time.Second), FaultID: 1, Target: "redis"},
	}
	h := append(append([]Event{}, outage...),
		modeNote(1, "redis", "database", 2), modeNote(1, "database", "resync", 3), modeNote(1, "resync", "redis", 3))
	h[2].T, h[3].T, h[4].T = base.Add(2*time.Second), base.Add(14*time.Second), base.Add(14*time.Second)
	c := &checker{h: h, spans: Spans(h), checked: map[string]int{}}
	c.modeStable()
	assert.Empty(t, c.out, "one move in one outage")

	// A cut API link is not an outage of the fleet.
	h = append(cutAPI1(base, base.Add(20*time.Second)), modeNote(1, "redis", "database", 2))
	h[2].T = base.Add(3 * time.Second)
	c = &checker{h: h, spans: Spans(h), checked: map[string]int{}}
	c.modeStable()
	assert.Equal(t, []string{IModeStable}, invariantsOf(c.out))

	// Two moves in one outage: the sale flapped.
	h = append(append([]Event{}, outage...), modeNote(1, "redis", "database", 2), modeNote(1, "redis", "database", 4))
	h[2].T, h[3].T = base.Add(2*time.Second), base.Add(8*time.Second)
	c = &checker{h: h, spans: Spans(h), checked: map[string]int{}}
	c.modeStable()
	assert.Equal(t, []string{IModeStable}, invariantsOf(c.out))

	// A failover takes Redis from the fleet (its master killed, then the
	// promoted data served): a move during it is one.
	h = []Event{
		{Kind: KindFault, Op: FRedisFailover, T: base, FaultID: 4, Target: "redis -> redis-replica", WritesLost: true},
		{Kind: KindHeal, Op: FRedisFailover, T: base.Add(6 * time.Second), FaultID: 4, Target: "redis -> redis-replica"},
		modeNote(1, "redis", "database", 2),
	}
	h[2].T = base.Add(5 * time.Second)
	c = &checker{h: h, spans: Spans(h), checked: map[string]int{}}
	c.modeStable()
	assert.Empty(t, c.out)
}

func TestRecoveredAfterIsTheLastAPIsFirstGoodAnswer(t *testing.T) {
	base := at(100)
	h := cutAPI1(base, base.Add(10*time.Second))
	h = append(h, reserves(1, 3, base.Add(10*time.Second), time.Second, http.StatusServiceUnavailable)...)
	h = append(h, reserves(1, 1, base.Add(13*time.Second), time.Second, http.StatusGone)...)
	h = append(h, reserves(2, 1, base.Add(11*time.Second), time.Second, http.StatusAccepted)...)
	d, ok := RecoveredAfter(h, Spans(h)[0])
	assert.True(t, ok)
	assert.Equal(t, 3*time.Second, d)

	_, ok = RecoveredAfter(h[:5], Spans(h)[0])
	assert.False(t, ok, "api1 never answered for good after the heal")
}

// Two outages close together: a move in the second belongs to it, though
// the first's slack still reaches it (soak seed 56: a Redis SIGSTOP, then
// 12 s later a SIGKILL; the second move was counted against the first).
func TestAMoveBelongsToTheLatestOutageItMayFollow(t *testing.T) {
	base := at(100)
	h := []Event{
		{Kind: KindFault, Op: FRedisFreeze, T: base, FaultID: 28, Target: "redis"},
		{Kind: KindHeal, Op: FRedisFreeze, T: base.Add(3 * time.Second), FaultID: 28, Target: "redis"},
		{Kind: KindFault, Op: FRedisKill, T: base.Add(16 * time.Second), FaultID: 32, Target: "redis"},
		{Kind: KindHeal, Op: FRedisKill, T: base.Add(19 * time.Second), FaultID: 32, Target: "redis"},
		modeNote(1, "redis", "database", 2), modeNote(1, "redis", "database", 4),
	}
	h[4].T, h[5].T = base.Add(2*time.Second), base.Add(17*time.Second)
	c := &checker{h: h, spans: Spans(h), checked: map[string]int{}}
	c.modeStable()
	assert.Empty(t, c.out)
}
