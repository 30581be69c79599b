package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uptrace/bun"

	"github.com/seckill/seckill/domain"
)

// Group commit of new holds. Under a crowd every 202 waits for its hold's
// record, and a record of its own per hold costs a round trip, a commit
// and a parse of its script each: the database path's throughput, not
// Redis's, set the rate of 202s. New holds that arrive while a record is
// in flight wait for it and then go together, in one transaction of one
// round trip (group), each still decided on its own: a hold the group
// cannot decide (a duplicate key, the epoch guard, an empty bucket, a lock
// held too long) is rolled back alone and decided by the statement-by-
// statement record, as a lone hold's would be.
//
// The holds of one sale always fall in the same shard, and a shard sends
// one group at a time, so two groups never take a sale's bucket rows in
// opposite orders (no deadlock between groups); the shards bound the
// groups in flight, and with them the connections the records use. At low
// load a hold goes alone at once: a group forms only while another waits.
const (
	holdShards   = 8
	holdGroupMax = 64
	// holdGroupTimeout bounds a group whose members set no deadline.
	holdGroupTimeout = 5 * time.Second
)

// holdGroups are the shards' queues; the zero value is ready.
type holdGroups struct {
	shards [holdShards]holdShard
	// groups and grouped count the groups sent and the holds in them.
	groups, grouped atomic.Int64
}

type holdShard struct {
	mu      sync.Mutex
	pending []*pendingHold
	sending bool
}

// pendingHold is a new hold waiting for its group.
type pendingHold struct {
	ctx   context.Context
	in    domain.OrderInput
	guard []any
	seq   int64
	done  chan groupAnswer
}

// groupAnswer is a hold's part of its group's outcome.
type groupAnswer struct {
	committed bool
	err       error
}

// errGroupLeft: the hold's caller stopped waiting before its group went.
var errGroupLeft = errors.New("the hold's caller left before its group was sent")

// record queues a new hold for its shard's next group and waits for the
// group: committed when the hold is recorded with its unit; not committed
// when the statement-by-statement record must decide it; an error when the
// group's outcome is unknown or the caller's context ended.
func (g *holdGroups) record(ctx context.Context, db bun.IDB, in domain.OrderInput, guard []any, seq int64) (bool, error) {
	p := &pendingHold{ctx: ctx, in: in, guard: guard, seq: seq, done: make(chan groupAnswer, 1)}
	sh := &g.shards[uint64(in.SaleID)%holdShards]
	sh.mu.Lock()
	sh.pending = append(sh.pending, p)
	start := !sh.sending
	sh.sending = true
	sh.mu.Unlock()
	if start {
		go sh.send(db, g)
	}
	select {
	case a := <-p.done:
		return a.committed, a.err
	case <-ctx.Done():
		return false, fmt.Errorf("wait for the hold's group: %w", ctx.Err())
	}
}

// send sends the shard's groups, one at a time, until none waits.
func (sh *holdShard) send(db bun.IDB, g *holdGroups) {
	for {
		sh.mu.Lock()
		n := min(len(sh.pending), holdGroupMax)
		if n == 0 {
			sh.sending = false
			sh.mu.Unlock()
			return
		}
		batch := sh.pending[:n:n]
		sh.pending = sh.pending[n:]
		if len(sh.pending) == 0 {
			sh.pending = nil
		}
		sh.mu.Unlock()
		if n := sendHoldGroup(db, batch); n > 0 {
			g.groups.Add(1)
			g.grouped.Add(int64(n))
		}
	}
}

// sendHoldGroup records the holds whose callers still wait, as one group,
// under the latest of their deadlines, and answers each. It returns how
// many holds the group carried.
func sendHoldGroup(db bun.IDB, batch []*pendingHold) int {
	var (
		g        group
		members  []*pendingHold
		deadline time.Time
	)
	now := time.Now().UTC().Truncate(time.Millisecond)
	for _, p := range batch {
		if p.ctx.Err() != nil {
			p.done <- groupAnswer{err: errGroupLeft}
			continue
		}
		d, ok := p.ctx.Deadline()
		if !ok {
			d = time.Now().Add(holdGroupTimeout)
		}
		if d.After(deadline) {
			deadline = d
		}
		g.add(holdSteps(p.in, p.guard, p.seq, now)...)
		members = append(members, p)
	}
	if len(members) == 0 {
		return 0
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	committed, err := g.run(ctx, db)
	for i, p := range members {
		if err != nil {
			p.done <- groupAnswer{err: fmt.Errorf("record a group of %d holds: %w", len(members), err)}
			continue
		}
		p.done <- groupAnswer{committed: committed[i]}
	}
	return len(members)
}
