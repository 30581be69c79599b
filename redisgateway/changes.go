package redisgateway

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// ChangesKey is the fleet's change feed: a sorted set of sale ids, each
// scored with the time (ms) of its last noted change. It lives in one slot
// of its own; a sale's scripts touch only the sale's slot, so the writer
// notes the change in a second command after the script (NoteChange), and
// a reader that misses one finds the change at its next full pass.
const ChangesKey = "{seckill}:changes"

// Change feed timing.
const (
	// NoteEvery is the least time between two notes of one sale by one
	// client: a busy sale costs the feed a few writes a second, not one
	// per reservation. A change inside the window is noted at its end.
	NoteEvery = 250 * time.Millisecond
	// ChangesKeep is how long a sale stays in the feed after its last
	// note: the loops look back seconds, a worker's sale signaller as far
	// as this when it starts, a SaleWorkflow run from before
	// wake-on-change up to half of it (LastChange).
	ChangesKeep = 10 * time.Minute
	noteTimeout = time.Second
)

// notes throttles one client's notes of each sale: a pending flag per sale,
// cleared just before the write, so a change made after the clear is noted
// again and one made before it is covered by the write.
type notes struct {
	pending sync.Map // sale id -> *noteState
}

type noteState struct {
	pending atomic.Bool
	last    atomic.Int64 // unix ns of the last write
}

// NoteChange tells the fleet that the sale's Redis state changed (stock,
// waitlist, inbox, control, keys): the write happens in the background,
// at most once per NoteEvery per sale, so a caller on the hot path never
// waits for it. A failed note only delays the readers to their full pass.
func (c *Client) NoteChange(saleID int64) {
	v, ok := c.notes.pending.Load(saleID)
	if !ok {
		v, _ = c.notes.pending.LoadOrStore(saleID, &noteState{})
	}
	st := v.(*noteState)
	if !st.pending.CompareAndSwap(false, true) {
		return // a write is due and will cover this change
	}
	go func() {
		if wait := time.Duration(st.last.Load()+int64(NoteEvery)) - time.Duration(time.Now().UnixNano()); wait > 0 {
			time.Sleep(wait)
		}
		st.pending.Store(false)
		st.last.Store(time.Now().UnixNano())
		ctx, cancel := context.WithTimeout(context.Background(), noteTimeout)
		defer cancel()
		if err := c.WriteChange(ctx, saleID, time.Now()); err != nil && c.noteErrs != nil {
			c.noteErrs(saleID, err)
		}
	}()
}

// OnNoteError sets what hears of a failed note (a logger); nil ignores
// them, which only delays the readers to their full pass.
func (c *Client) OnNoteError(fn func(saleID int64, err error)) { c.noteErrs = fn }

// WriteChange writes the sale's change at once, scored at.
func (c *Client) WriteChange(ctx context.Context, saleID int64, at time.Time) error {
	err := c.rdb.ZAdd(ctx, ChangesKey, redis.Z{Score: float64(at.UnixMilli()), Member: saleID}).Err()
	if err != nil {
		return fmt.Errorf("note change of sale %d: %w", saleID, err)
	}
	return nil
}

// ChangedSince lists the sales noted at or after since, in one command.
func (c *Client) ChangedSince(ctx context.Context, since time.Time) ([]int64, error) {
	members, err := c.rdb.ZRangeByScore(ctx, ChangesKey, &redis.ZRangeBy{
		Min: strconv.FormatInt(since.UnixMilli(), 10), Max: "+inf",
	}).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("read change feed: %w", err)
	}
	ids := make([]int64, 0, len(members))
	for _, m := range members {
		id, err := strconv.ParseInt(m, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("change feed member %q: %w", m, err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// NotesSince answers the sales noted at or after since, each with the
// time of its last note, in one command.
func (c *Client) NotesSince(ctx context.Context, since time.Time) (map[int64]time.Time, error) {
	zs, err := c.rdb.ZRangeByScoreWithScores(ctx, ChangesKey, &redis.ZRangeBy{
		Min: strconv.FormatInt(since.UnixMilli(), 10), Max: "+inf",
	}).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("read change feed: %w", err)
	}
	notes := make(map[int64]time.Time, len(zs))
	for _, z := range zs {
		m, _ := z.Member.(string)
		id, err := strconv.ParseInt(m, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("change feed member %q: %w", m, err)
		}
		notes[id] = time.UnixMilli(int64(z.Score))
	}
	return notes, nil
}

// PruneChanges drops the sales noted before ChangesKeep ago (a full pass
// of a reader calls it, so the feed stays as long as the recent sales).
func (c *Client) PruneChanges(ctx context.Context, now time.Time) error {
	upper := "(" + strconv.FormatInt(now.Add(-ChangesKeep).UnixMilli(), 10)
	if err := c.rdb.ZRemRangeByScore(ctx, ChangesKey, "-inf", upper).Err(); err != nil {
		return fmt.Errorf("prune change feed: %w", err)
	}
	return nil
}

// LastChange is when the sale's last change was noted; ok is false when
// the feed has no note of it within ChangesKeep.
func (c *Client) LastChange(ctx context.Context, saleID int64) (at time.Time, ok bool, err error) {
	score, err := c.rdb.ZScore(ctx, ChangesKey, strconv.FormatInt(saleID, 10)).Result()
	if errors.Is(err, redis.Nil) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("read change feed of sale %d: %w", saleID, err)
	}
	return time.UnixMilli(int64(score)), true, nil
}

// SignalledKey holds when the fleet's change signallers (the workers'
// SaleSignaller) last read the feed, in ms: a signaller starting after it
// finds the mark older than ChangesKeep, or gone with Redis's data, cannot
// know which notes were pruned or lost unread.
const SignalledKey = "{seckill}:changes:signalled"

// WriteSignalMark records that the feed was read through at.
func (c *Client) WriteSignalMark(ctx context.Context, at time.Time) error {
	if err := c.rdb.Set(ctx, SignalledKey, at.UnixMilli(), 0).Err(); err != nil {
		return fmt.Errorf("write the signal mark: %w", err)
	}
	return nil
}

// ReadSignalMark answers the feed's last read by a signaller; ok is false
// when none is recorded.
func (c *Client) ReadSignalMark(ctx context.Context) (at time.Time, ok bool, err error) {
	ms, err := c.rdb.Get(ctx, SignalledKey).Int64()
	if errors.Is(err, redis.Nil) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("read the signal mark: %w", err)
	}
	return time.UnixMilli(ms), true, nil
}
