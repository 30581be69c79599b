package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/seckill/seckill/lua"
)

// Change feed timing of the worker's loops.
const (
	// fullEvery is the period of a loop's full pass over every open sale,
	// whatever the change feed said: the backstop for a lost note.
	fullEvery = 60 * time.Second
	// feedMargin is how far before its last read a loop looks back in the
	// feed: clock skew between writers and a note's own delay.
	feedMargin = 3 * time.Second
)

// changeWatch tells a loop which sales to look at on a tick: those the
// fleet's change feed named since its last successful tick, or every sale
// on a full pass (every fullEvery, and whenever the feed is unreadable).
type changeWatch struct {
	Redis     *lua.Client
	FullEvery time.Duration // fullEvery when zero

	lastFeed time.Time
	lastFull time.Time
}

// due answers the sales the feed names (nil and full true on a full pass).
// The loop calls done after the tick, with whether it read them all.
func (w *changeWatch) due(ctx context.Context, now time.Time) (changed map[int64]bool, full bool, err error) {
	if w.lastFull.IsZero() || now.Sub(w.lastFull) >= orDefault(w.FullEvery, fullEvery) {
		return nil, true, nil
	}
	rctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	ids, err := w.Redis.ChangedSince(rctx, w.lastFeed.Add(-feedMargin))
	if err != nil {
		return nil, true, fmt.Errorf("read the change feed; passing over every sale: %w", err)
	}
	changed = make(map[int64]bool, len(ids))
	for _, id := range ids {
		changed[id] = true
	}
	return changed, false, nil
}

// done records a tick begun at now: what the feed said up to it is seen,
// and a full pass is done; a tick that failed records nothing, so the
// next one reads the same changes again.
func (w *changeWatch) done(now time.Time, full, ok bool) {
	if !ok {
		return
	}
	w.lastFeed = now
	if full {
		w.lastFull = now
	}
}
