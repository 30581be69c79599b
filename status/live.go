package status

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// liveViews caches the views of live reservations read from their Redis
// status records (PENDING_PAYMENT, QUEUED), so a crowd polling its reservations is answered
// from memory, never older than a change acknowledged to a client:
//
//   - Every change of a view in Redis is announced on the sale's event
//     channel in the same step (status.lua, ForgetStatus; a new epoch by
//     warmup.lua and rebuild.lua), and the instance drops the token's entry
//     (the whole sale's for a new epoch) when the announcement arrives.
//   - The instance sends a fence (a PING with its send time) every
//     redisgateway.FencePeriod on the same subscription connection. When the answer
//     to one sent at time f has arrived, every announcement Redis executed
//     before f has been applied
//     here. An entry is served only while the newest such f is at most
//     liveFresh old.
//   - An instance that acknowledges a change (a 200 from pay or cancel)
//     answers only liveFresh after the change was written (settle). A read
//     that arrives after the answer, at any instance, finds a fence sent
//     after the change, so that instance has dropped the old view.
//
// A fill whose Redis read began before an announcement it missed is not
// kept (each announcement leaves a tombstone with its sequence number); a
// (re)subscription or a stalled listener voids everything; entries live at
// most liveTTL, which bounds what a change nobody announces (a fault that
// loses keys) can leave. On a cluster there are no fences, so nothing is
// served from here.
type liveViews struct {
	enabled bool
	base    time.Time

	mu    sync.RWMutex
	seq   uint64           // announcements applied
	floor uint64           // entries filled before this are void
	sales map[int64]uint64 // per sale: entries filled before this are void
	// pruned: fills begun before this are not kept (a retired sale's
	// floor may have gone with it).
	pruned uint64
	m      map[string]liveEntry
	max    int

	fence   atomic.Int64 // since base: send time of the newest fence arrived
	arrived atomic.Int64 // since base: when it arrived
	asked   atomic.Int64 // since base: the last read that wanted a fresh fence
	// resume receives when a read wants fences after liveIdle without
	// (redisgateway.StatusEvents.Resume).
	resume chan struct{}
}

type liveEntry struct {
	view   Owned
	sale   int64
	seq    uint64 // the fill's begin, or a tombstone's announcement
	filled int64  // since base; 0 for a tombstone
}

const (
	liveFresh = 50 * time.Millisecond // how old a fence may be; what an acknowledgement waits
	liveTTL   = 15 * time.Second      // the longest an entry is served
	liveStall = time.Second           // a gap between fences this long voids everything
	// liveIdle: fences are published only this long after a read asked for
	// one, so an instance nobody polls sends Redis none; the first read
	// after a pause goes to Redis while fencing resumes.
	liveIdle = 5 * time.Second
)

func newLiveViews(enabled bool, max int) *liveViews {
	l := &liveViews{enabled: enabled, base: time.Now(), sales: make(map[int64]uint64), m: make(map[string]liveEntry), max: max,
		resume: make(chan struct{}, 1)}
	l.fence.Store(math.MinInt64 / 2)
	l.asked.Store(math.MinInt64 / 2)
	return l
}

func (l *liveViews) since(t time.Time) int64 { return int64(t.Sub(l.base)) }

// fresh reports whether the newest fence allows serving at now.
func (l *liveViews) fresh(now int64) bool {
	return l.enabled && now-l.fence.Load() <= int64(liveFresh)
}

// get is the token's cached view, when one may be served now.
func (l *liveViews) get(token string, saleID int64) (Owned, bool) {
	now := l.since(time.Now())
	if l.enabled && now-l.asked.Load() > int64(liveFresh) {
		if now-l.asked.Swap(now) > int64(liveIdle) {
			select {
			case l.resume <- struct{}{}:
			default: // the listener has yet to take the last one
			}
		}
	}
	if !l.fresh(now) {
		return Owned{}, false
	}
	l.mu.RLock()
	e, ok := l.m[token]
	ok = ok && e.filled != 0 && e.sale == saleID && e.seq >= l.floor && e.seq >= l.sales[saleID] &&
		now-e.filled < int64(liveTTL)
	l.mu.RUnlock()
	return e.view, ok
}

// begin is taken before a Redis read whose answer may be put.
func (l *liveViews) begin() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.seq
}

// put keeps a view read from Redis after begin returned seq, unless an
// announcement for it (or its sale, or all) has been applied since.
func (l *liveViews) put(token string, saleID int64, v Owned, seq uint64) {
	if !l.enabled || v.View.Status.Terminal() {
		return
	}
	v = v.rendered()
	now := l.since(time.Now())
	l.mu.Lock()
	defer l.mu.Unlock()
	if seq < l.floor || seq < l.sales[saleID] || seq < l.pruned {
		return
	}
	if e, ok := l.m[token]; ok && e.seq > seq {
		return
	}
	if len(l.m) >= l.max {
		l.clearLocked()
		return
	}
	l.m[token] = liveEntry{view: v, sale: saleID, seq: seq, filled: now}
}

// invalidate applies an announcement of the token's change.
func (l *liveViews) invalidate(saleID int64, token string) {
	l.mu.Lock()
	l.seq++
	if len(l.m) >= l.max {
		l.clearLocked()
	} else {
		l.m[token] = liveEntry{sale: saleID, seq: l.seq}
	}
	l.mu.Unlock()
}

// invalidateSale applies a new epoch of the sale (or the database path
// owning it): every entry of it is void.
func (l *liveViews) invalidateSale(saleID int64) {
	l.mu.Lock()
	l.seq++
	l.sales[saleID] = l.seq
	l.mu.Unlock()
}

// keepSales forgets the sales for which open is false (retired ones):
// their floors and entries go, so a retired sale leaves nothing here.
func (l *liveViews) keepSales(open func(int64) bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	gone := false
	for id := range l.sales {
		if !open(id) {
			delete(l.sales, id)
			gone = true
		}
	}
	if !gone {
		return
	}
	for token, e := range l.m {
		if !open(e.sale) {
			delete(l.m, token)
		}
	}
	l.seq++
	l.pruned = l.seq
}

// salesTracked is how many sales have a floor here.
func (l *liveViews) salesTracked() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.sales)
}

// invalidateAll voids every entry: announcements may have been lost.
func (l *liveViews) invalidateAll() {
	l.mu.Lock()
	l.clearLocked()
	l.mu.Unlock()
}

func (l *liveViews) clearLocked() {
	l.seq++
	l.floor = l.seq
	clear(l.m)
	clear(l.sales)
}

// wantsFences reports whether a read asked for a fresh fence lately
// (redisgateway.StatusEvents.Wanted).
func (l *liveViews) wantsFences() bool {
	return l.enabled && l.since(time.Now())-l.asked.Load() <= int64(liveIdle)
}

// fenced applies a fence message sent at sentAt (redisgateway.StatusEvents.Fence).
func (l *liveViews) fenced(sentAt time.Time) {
	now := l.since(time.Now())
	if prev := l.arrived.Swap(now); prev != 0 && now-prev > int64(liveStall) {
		// The listener stalled: go-redis drops a message it cannot hand
		// over for a long time, so announcements may be lost.
		l.invalidateAll()
	}
	l.fence.Store(l.since(sentAt))
}

// settle waits until a change written to Redis before changed may be
// acknowledged: by then every instance serving from its cache has
// applied the change's announcement (see liveViews).
func (l *liveViews) settle(ctx context.Context, changed time.Time) {
	if !l.enabled {
		return
	}
	wait := time.Until(changed.Add(liveFresh))
	if wait <= 0 {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
