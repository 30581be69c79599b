package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/store"
)

// Change feed timing of the worker's loops. A loop's full pass over every
// open sale, whatever the change feed said, is the backstop for a lost
// note; it is spread over the period's ticks (a share of the sales each
// tick), so its cost is steady, and its period is what an idle sale costs
// the loop: one read a period. Together the worker's passes cost an idle
// sale about 0.02 Redis commands a second (docs/architecture.md).
const (
	// fullEvery is the resyncer's key check: a sale whose keys were lost
	// while nobody buys is rebuilt within it (a reserve that finds the
	// keys gone notes its sale, so a sale people buy is rebuilt at once).
	fullEvery = 2 * time.Minute
	// relayFullEvery is the relay's inbox check: an entry whose note was
	// lost (its writer died within a note's delay) waits up to this long.
	relayFullEvery = 5 * time.Minute
	// stockFullEvery is the stock recorder's: a quiet sale's sample is
	// older than the database path accepts within seconds anyway
	// (store.MaxStockSampleAge), so the pass only catches a lost note.
	stockFullEvery = 5 * time.Minute
	// controlFullEvery is the control follower's: it writes a control the
	// database moved at once, so the pass only repairs a Redis that lost
	// a control write without losing the sale (a rebuild writes it too).
	controlFullEvery = 10 * time.Minute
	// feedMargin is how far before its last read a loop looks back in the
	// feed: clock skew between writers and a note's own delay.
	feedMargin = 3 * time.Second
)

// changeWatch tells a loop which sales to look at on a tick: those the
// fleet's change feed named since its last successful tick, and this
// tick's share of the full pass; every sale on the first tick and
// whenever the feed is unreadable.
type changeWatch struct {
	Redis     *redisgateway.Client
	Every     time.Duration // the loop's tick
	FullEvery time.Duration // fullEvery when zero

	lastFeed time.Time
	ticks    int64 // successful ticks: which share of the full pass is due
}

// dueSet is what a tick looks at.
type dueSet struct {
	all     bool
	changed map[int64]bool
	share   int64 // sales with domain.PassShare(id, shares) == share are due
	shares  int64
}

// has reports whether sale id is due.
func (d dueSet) has(id int64) bool {
	return d.all || d.changed[id] || domain.PassShare(id, d.shares) == d.share
}

// named reports whether the feed named sale id.
func (d dueSet) named(id int64) bool { return d.changed[id] }

// of is the open sales due, and those of also (a loop's retries): every
// open sale when all are due, else the named ones and the tick's share,
// found without looking at the others.
func (d dueSet) of(open *store.OpenSales, also map[int64]bool) []*domain.Sale {
	if d.all {
		return open.List()
	}
	share := open.Share(d.shares, d.share)
	out := make([]*domain.Sale, 0, len(share)+len(d.changed)+len(also))
	out = append(out, share...)
	extra := func(id int64) {
		if s, ok := open.Get(id); ok && domain.PassShare(id, d.shares) != d.share {
			out = append(out, s)
		}
	}
	for id := range d.changed {
		extra(id)
	}
	for id := range also {
		if !d.changed[id] {
			extra(id)
		}
	}
	return out
}

// due answers what the tick looks at; the loop calls done after it.
func (w *changeWatch) due(ctx context.Context) (dueSet, error) {
	shares := max(int64(orDefault(w.FullEvery, fullEvery)/max(w.Every, time.Second)), 1)
	d := dueSet{share: w.ticks % shares, shares: shares}
	if w.lastFeed.IsZero() {
		d.all = true
		return d, nil
	}
	rctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	ids, err := w.Redis.ChangedSince(rctx, w.lastFeed.Add(-feedMargin))
	if err != nil {
		d.all = true
		return d, fmt.Errorf("read the change feed; passing over every sale: %w", err)
	}
	d.changed = make(map[int64]bool, len(ids))
	for _, id := range ids {
		d.changed[id] = true
	}
	return d, nil
}

// done records a tick begun at now that looked at every sale due: what
// the feed said up to it is seen, and its share of the full pass is done.
// A tick that failed records nothing, so the next one reads the same
// changes and share again.
func (w *changeWatch) done(now time.Time) {
	w.lastFeed = now
	w.ticks++
}
