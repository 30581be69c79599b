package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uptrace/bun"
)

// Group commit of new writes: Redis holds' records (RecordRedisHold) and
// database-path reservations (ReserveInDB). Under a crowd every 202 waits
// for its write, and a write of its own per request costs a round trip, a
// commit and a parse of its script each: the database's throughput, not
// Redis's, set the rate of 202s. Writes that arrive while another of their
// shard is in flight wait for it and then go together, in one transaction
// of one round trip (group), each still decided on its own: a part the
// group cannot decide (a duplicate key, a guard on the sale row, an empty
// bucket, a lock held too long) is rolled back alone and decided by its
// caller's statement-by-statement path, as a lone request's would be.
//
// The writes of one sale always fall in the same shard. A shard sends one
// group at a time, so two groups of one kind never take a sale's bucket
// rows in opposite orders (no deadlock between them), unless its kind's
// parts take their buckets in one order (a group's parts sorted by sale,
// each sale's buckets in ascending order: holdSteps; or one bucket a sale:
// dbGroupPart); such a kind's shards send up to inFlight groups at once,
// another beside the one in flight once groupOverlapParts wait, so one
// sale's writes use more than one of the database's threads without
// splitting a crowd into small groups, or once the group in flight has
// taken longer than groupStalled, so the writes arriving meanwhile do not
// wait out a group the database stalls (a commit, a page flush, a thread
// off the CPU). The shards bound the groups in flight, and with them the
// connections they use. At low load a write goes alone at once: a group
// forms only while another waits.
const (
	groupShards   = 8
	groupMaxParts = 64
	// groupTimeout bounds a group whose members set no deadline.
	groupTimeout = 5 * time.Second
	// holdGroupsInFlight is how many groups of holds' records a shard
	// sends at once.
	holdGroupsInFlight = 2
	// dbGroupsInFlight is how many groups of database-path reservations a
	// shard sends at once.
	dbGroupsInFlight = 2
	// groupOverlapParts is how many parts must wait for another group to
	// go beside the one in flight: smaller groups cost the database more
	// per part than their wait.
	groupOverlapParts = 16
	// groupStallFloor is the least time a group is in flight before
	// another goes beside it for being slow (groupStalled).
	groupStallFloor = 10 * time.Millisecond
)

// groupStalled reports whether a group sent at sent has been in flight long
// enough at now for another to go beside it: twice the kind's typical
// round trip, and at least groupStallFloor. A stall that long is the
// database's, not the group's size; most groups take less.
func groupStalled(sent, now time.Time, typical time.Duration) bool {
	return !sent.IsZero() && now.Sub(sent) > max(2*typical, groupStallFloor)
}

// commitGroups are the shards' queues of one kind of write; the zero value
// is ready, and sends one group a shard at a time.
type commitGroups struct {
	// inFlight is how many groups a shard may send at once (0 is 1): more
	// than one only for a kind whose parts take their rows in one order.
	inFlight int
	shards   [groupShards]groupShard
	// groups and grouped count the groups sent and the parts in them;
	// undecided the parts a group did not commit (left to their callers'
	// statement-by-statement path); peak is the most groups a shard had in
	// flight at once.
	groups, grouped, undecided, peak atomic.Int64
	// trips: the groups' round trips that answered.
	trips roundTrips
}

// roundTrips follows a kind of write's round trips with the database that
// answered: when the last one did, and how long they take (a moving
// average). A caller that waits behind a queue of them tells a busy
// database, which keeps answering, from a stalled one, which does not.
type roundTrips struct {
	last, typical atomic.Int64 // Unix nanoseconds; nanoseconds
}

// note records a round trip begun at began that has just answered.
func (r *roundTrips) note(began time.Time) {
	now := time.Now()
	d := int64(now.Sub(began))
	r.last.Store(now.UnixNano())
	for {
		old := r.typical.Load()
		avg := d
		if old > 0 {
			avg = old + (d-old)/8
		}
		if r.typical.CompareAndSwap(old, avg) {
			return
		}
	}
}

// read returns when a round trip last answered (zero before any) and how
// long they typically take.
func (r *roundTrips) read() (time.Time, time.Duration) {
	var last time.Time
	if n := r.last.Load(); n > 0 {
		last = time.Unix(0, n)
	}
	return last, time.Duration(r.typical.Load())
}

type groupShard struct {
	mu      sync.Mutex
	pending []*pendingPart
	senders int // groups being sent
	// sent is when the shard's latest group went.
	sent time.Time
}

// pendingPart is a write of a sale waiting for its group: its steps,
// written at the group's time, knowing whether the part just before it in
// the group writes the same sale (follows).
type pendingPart struct {
	ctx    context.Context
	saleID int64
	steps  func(now time.Time, follows bool) []step
	done   chan groupAnswer
}

// groupAnswer is a part's share of its group's outcome.
type groupAnswer struct {
	committed bool
	err       error
}

// errGroupLeft: the part's caller stopped waiting before its group went.
var errGroupLeft = errors.New("the caller left before its group was sent")

// record queues a write of saleID for its shard's next group and waits for
// the group: committed when the part committed; not committed when the
// caller's statement-by-statement path must decide it; an error when the
// group's outcome is unknown or the caller's context ended.
func (g *commitGroups) record(ctx context.Context, db bun.IDB, saleID int64, steps func(now time.Time, follows bool) []step) (bool, error) {
	p := &pendingPart{ctx: ctx, saleID: saleID, steps: steps, done: make(chan groupAnswer, 1)}
	sh := &g.shards[uint64(saleID)%groupShards]
	sh.mu.Lock()
	sh.pending = append(sh.pending, p)
	start := sh.senders == 0 || (sh.senders < g.inFlight && (len(sh.pending) >= groupOverlapParts || g.stalled(sh.sent)))
	if start {
		sh.senders++
		for n, old := int64(sh.senders), g.peak.Load(); n > old && !g.peak.CompareAndSwap(old, n); old = g.peak.Load() {
		}
	}
	sh.mu.Unlock()
	if start {
		go sh.send(db, g)
	}
	select {
	case a := <-p.done:
		return a.committed, a.err
	case <-ctx.Done():
		return false, fmt.Errorf("wait for the group: %w", ctx.Err())
	}
}

// stalled reports whether a group sent at sent is taking long enough for
// another to go beside it (groupStalled).
func (g *commitGroups) stalled(sent time.Time) bool {
	_, typical := g.trips.read()
	return groupStalled(sent, time.Now(), typical)
}

// send sends groups of the shard, one at a time, until none waits; other
// senders of the shard may run beside it (commitGroups.inFlight).
func (sh *groupShard) send(db bun.IDB, g *commitGroups) {
	for {
		sh.mu.Lock()
		n := min(len(sh.pending), groupMaxParts)
		if n == 0 {
			sh.senders--
			sh.mu.Unlock()
			return
		}
		batch := sh.pending[:n:n]
		sh.pending = sh.pending[n:]
		if len(sh.pending) == 0 {
			sh.pending = nil
		}
		began := time.Now()
		sh.sent = began
		sh.mu.Unlock()
		n, committed, answered := sendGroup(db, batch)
		if answered {
			g.trips.note(began)
		}
		if n > 0 {
			g.groups.Add(1)
			g.grouped.Add(int64(n))
			g.undecided.Add(int64(n - committed))
		}
	}
}

// sendGroup sends the parts whose callers still wait, as one group, under
// the latest of their deadlines, and answers each. It returns how many
// parts the group carried, how many it committed, and whether the
// database answered it.
func sendGroup(db bun.IDB, batch []*pendingPart) (n, committedParts int, answered bool) {
	var (
		g        group
		members  []*pendingPart
		deadline time.Time
	)
	now := time.Now().UTC().Truncate(time.Millisecond)
	// A sale's parts together, so each follows the one before it.
	slices.SortStableFunc(batch, func(a, b *pendingPart) int { return cmp.Compare(a.saleID, b.saleID) })
	for _, p := range batch {
		if p.ctx.Err() != nil {
			p.done <- groupAnswer{err: errGroupLeft}
			continue
		}
		d, ok := p.ctx.Deadline()
		if !ok {
			d = time.Now().Add(groupTimeout)
		}
		if d.After(deadline) {
			deadline = d
		}
		follows := len(members) > 0 && members[len(members)-1].saleID == p.saleID
		g.add(p.steps(now, follows)...)
		members = append(members, p)
	}
	if len(members) == 0 {
		return 0, 0, false
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	committed, err := g.run(ctx, db)
	for i, p := range members {
		if err != nil {
			p.done <- groupAnswer{err: fmt.Errorf("send a group of %d parts: %w", len(members), err)}
			continue
		}
		if committed[i] {
			committedParts++
		}
		p.done <- groupAnswer{committed: committed[i]}
	}
	return len(members), committedParts, err == nil
}
