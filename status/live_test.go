package status

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
)

func pendingView(owner int64) Owned {
	return Owned{Owner: owner, View: domain.ReservationView{Status: domain.StatusPendingPayment}}
}

// TestLiveViewsServeOnlyWhatNoAnnouncementVoided: the cache's rules, one by
// one, without Redis.
func TestLiveViewsServeOnlyWhatNoAnnouncementVoided(t *testing.T) {
	l := newLiveViews(true, 1000)
	seq := l.begin()
	l.put("a", 1, pendingView(7), seq)
	_, ok := l.get("a", 1)
	require.False(t, ok, "no fence yet")
	before := l.since(time.Now())
	l.fenced(time.Now())
	require.GreaterOrEqual(t, l.fence.Load(), before, "a fence is its send time")
	// Fences sent "later" keep the cache fresh whatever this test's pace.
	keepFresh := func() { l.fence.Store(l.since(time.Now().Add(time.Hour))) }
	keepFresh()
	v, ok := l.get("a", 1)
	require.True(t, ok)
	require.Equal(t, int64(7), v.Owner)
	_, ok = l.get("a", 2)
	require.False(t, ok, "another sale's token of that name")

	l.fence.Store(l.since(time.Now().Add(-liveFresh - time.Millisecond)))
	_, ok = l.get("a", 1)
	require.False(t, ok, "the newest fence is older than liveFresh")
	keepFresh()
	_, ok = l.get("a", 1)
	require.True(t, ok)

	// A read that began before an announcement it did not see is not kept.
	seq = l.begin()
	l.invalidate(1, "a")
	_, ok = l.get("a", 1)
	require.False(t, ok, "announced")
	l.put("a", 1, pendingView(7), seq)
	_, ok = l.get("a", 1)
	require.False(t, ok, "a fill that began before the announcement")
	l.put("a", 1, pendingView(7), l.begin())
	_, ok = l.get("a", 1)
	require.True(t, ok, "a fill that began after it")

	// A new epoch voids the sale's views, not others'.
	l.put("b", 2, pendingView(8), l.begin())
	seq = l.begin()
	l.invalidateSale(1)
	_, ok = l.get("a", 1)
	require.False(t, ok)
	_, ok = l.get("b", 2)
	require.True(t, ok)
	l.put("a", 1, pendingView(7), seq)
	_, ok = l.get("a", 1)
	require.False(t, ok, "a fill that began before the new epoch")

	// A resubscription voids everything.
	l.invalidateAll()
	_, ok = l.get("b", 2)
	require.False(t, ok)

	// Ended views are not kept here (endedViews has them).
	ended := pendingView(7)
	ended.View.Status = domain.StatusPaid
	l.put("c", 1, ended, l.begin())
	_, ok = l.get("c", 1)
	require.False(t, ok)

	// A listener that stalled may have lost announcements.
	l.put("d", 1, pendingView(7), l.begin())
	_, ok = l.get("d", 1)
	require.True(t, ok)
	l.arrived.Store(l.since(time.Now().Add(-2 * liveStall)))
	l.fenced(time.Now())
	keepFresh()
	_, ok = l.get("d", 1)
	require.False(t, ok, "fences more than liveStall apart")

	// Disabled (a cluster): never served, and acknowledgements do not wait.
	off := newLiveViews(false, 1000)
	off.fence.Store(off.since(time.Now().Add(time.Hour)))
	off.put("a", 1, pendingView(7), off.begin())
	_, ok = off.get("a", 1)
	require.False(t, ok)
	off.settle(context.Background(), time.Now().Add(time.Hour)) // enabled, this would wait an hour
}

// An instance asks Redis for fences only while reads want them: none
// before the first read, then for liveIdle after the last one.
func TestLiveViewsWantFencesOnlyWhileRead(t *testing.T) {
	l := newLiveViews(true, 10)
	require.False(t, l.wantsFences(), "nobody read yet")
	_, _ = l.get("a", 1)
	require.True(t, l.wantsFences())
	l.asked.Store(l.since(time.Now().Add(-liveIdle - time.Second)))
	require.False(t, l.wantsFences(), "idle for longer than liveIdle")
	require.False(t, newLiveViews(false, 10).wantsFences(), "a disabled cache never wants them")
}
