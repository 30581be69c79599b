package redisgateway

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/domain"
)

var (
	//go:embed handover.lua
	handOverSrc string
	//go:embed waitlist_join.lua
	waitlistJoinSrc string
	//go:embed waitlist_restore.lua
	waitlistRestoreSrc    string
	waitlistRestoreScript = redis.NewScript(waitlistRestoreSrc)
	//go:embed waitlist_drop.lua
	waitlistDropSrc    string
	waitlistDropScript = redis.NewScript(waitlistDropSrc)
)

// handOverSource is handover.lua with reserve.lua as its function
// reserve(KEYS, ARGV): a hand-over is the very reservation a 202 answers.
func handOverSource() string {
	return "local function reserve(KEYS, ARGV)\n" + reserveSrc + "\nend\n" + handOverSrc
}

// JoinWaitlist puts a user on a sale's waitlist (or keeps their place) and
// returns their 1-based position and their join number; a user who holds
// a live or paid unit of the sale does not wait for one
// (domain.ErrAlreadyHolds).
func (c *Client) JoinWaitlist(ctx context.Context, saleID, userID int64) (pos, joined int64, err error) {
	defer c.NoteChange(saleID)
	k := SaleKeys(saleID)
	v, err := c.scripts.waitlistJoin.Run(ctx, c.rdb, []string{k.Waitlist, k.WaitSeq, k.Buyers}, strconv.FormatInt(userID, 10)).Slice()
	if err != nil {
		return 0, 0, fmt.Errorf("join waitlist of sale %d: %w", saleID, err)
	}
	if len(v) != 2 {
		return 0, 0, fmt.Errorf("join waitlist of sale %d: unexpected reply %v", saleID, v)
	}
	pos, _ = v[0].(int64)
	if pos < 0 {
		return 0, 0, domain.ErrAlreadyHolds
	}
	s, _ := v[1].(string)
	score, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("join waitlist of sale %d: join number %q: %w", saleID, s, err)
	}
	return pos, int64(score), nil
}

// WaitlistJoined returns a user's join number, 0 when not waiting.
func (c *Client) WaitlistJoined(ctx context.Context, saleID, userID int64) (int64, error) {
	score, err := c.rdb.ZScore(ctx, SaleKeys(saleID).Waitlist, strconv.FormatInt(userID, 10)).Result()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("waitlist join number in sale %d: %w", saleID, err)
	}
	return int64(score), nil
}

// WaitlistPosition returns a user's 1-based position, 0 when not waiting.
func (c *Client) WaitlistPosition(ctx context.Context, saleID, userID int64) (int64, error) {
	rank, err := c.rdb.ZRank(ctx, SaleKeys(saleID).Waitlist, strconv.FormatInt(userID, 10)).Result()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("waitlist position in sale %d: %w", saleID, err)
	}
	return rank + 1, nil
}

// LeaveWaitlist takes a user off a sale's waitlist (nothing when absent).
func (c *Client) LeaveWaitlist(ctx context.Context, saleID, userID int64) error {
	defer c.NoteChange(saleID)
	if err := c.rdb.ZRem(ctx, SaleKeys(saleID).Waitlist, strconv.FormatInt(userID, 10)).Err(); err != nil {
		return fmt.Errorf("leave waitlist of sale %d: %w", saleID, err)
	}
	return nil
}

// RestoreWaitlist puts back joins the database kept that Redis forgot
// (waitlist_restore.lua), at their places, and reports how many.
func (c *Client) RestoreWaitlist(ctx context.Context, saleID int64, joins []Waiter) (int64, error) {
	defer c.NoteChange(saleID)
	if len(joins) == 0 {
		return 0, nil
	}
	k := SaleKeys(saleID)
	argv := make([]any, 0, 2*len(joins))
	for _, j := range joins {
		argv = append(argv, strconv.FormatInt(j.UserID, 10), strconv.FormatInt(j.Joined, 10))
	}
	n, err := waitlistRestoreScript.Run(ctx, c.rdb, []string{k.Waitlist, k.WaitSeq, k.Buyers}, argv...).Int64()
	if err != nil {
		return 0, fmt.Errorf("restore the waitlist of sale %d: %w", saleID, err)
	}
	return n, nil
}

// DropWaiters takes off the waitlist the waiters the database no longer
// keeps (waitlist_drop.lua): a leave or a hand-over a Redis that lost
// writes forgot. A user waiting under another number joined again and
// stays. It reports how many were taken off.
func (c *Client) DropWaiters(ctx context.Context, saleID int64, waiters []Waiter) (int64, error) {
	defer c.NoteChange(saleID)
	if len(waiters) == 0 {
		return 0, nil
	}
	argv := make([]any, 0, 2*len(waiters))
	for _, w := range waiters {
		argv = append(argv, strconv.FormatInt(w.UserID, 10), strconv.FormatInt(w.Joined, 10))
	}
	n, err := waitlistDropScript.Run(ctx, c.rdb, []string{SaleKeys(saleID).Waitlist}, argv...).Int64()
	if err != nil {
		return 0, fmt.Errorf("drop %d waiters of sale %d: %w", len(waiters), saleID, err)
	}
	return n, nil
}

// WaitlistMissing answers the joins a sale's waitlist lacks: the user is
// not on it (ZMSCORE, one round trip). A user on it under another number
// joined again, which the database records too, so is not missing.
func (c *Client) WaitlistMissing(ctx context.Context, saleID int64, joins []Waiter) ([]Waiter, error) {
	if len(joins) == 0 {
		return nil, nil
	}
	users := make([]string, len(joins))
	for i, j := range joins {
		users[i] = strconv.FormatInt(j.UserID, 10)
	}
	scores, err := c.rdb.ZMScore(ctx, SaleKeys(saleID).Waitlist, users...).Result()
	if err != nil {
		return nil, fmt.Errorf("look up %d waitlist joins of sale %d: %w", len(joins), saleID, err)
	}
	var missing []Waiter
	for i, score := range scores {
		if score == 0 { // absent: a join number is never 0
			missing = append(missing, joins[i])
		}
	}
	return missing, nil
}

// Waiter is one user on a waitlist with their join number (Redis's clock
// in µs when they joined, strictly increasing per sale: waitlist_join.lua).
type Waiter struct {
	UserID int64
	Joined int64
}

// WaitlistHead reads the first n waiters of a sale, longest waiting first.
func (c *Client) WaitlistHead(ctx context.Context, saleID int64, n int) ([]Waiter, error) {
	if n <= 0 {
		return nil, nil
	}
	return c.waitlistRange(ctx, saleID, int64(n-1))
}

// Waiters reads every waiter of a sale, longest waiting first.
func (c *Client) Waiters(ctx context.Context, saleID int64) ([]Waiter, error) {
	return c.waitlistRange(ctx, saleID, -1)
}

func (c *Client) waitlistRange(ctx context.Context, saleID, stop int64) ([]Waiter, error) {
	zs, err := c.rdb.ZRangeWithScores(ctx, SaleKeys(saleID).Waitlist, 0, stop).Result()
	if err != nil {
		return nil, fmt.Errorf("read the waitlist of sale %d: %w", saleID, err)
	}
	out := make([]Waiter, 0, len(zs))
	for _, z := range zs {
		m, _ := z.Member.(string)
		user, err := strconv.ParseInt(m, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("read the waitlist of sale %d: member %q: %w", saleID, m, err)
		}
		out = append(out, Waiter{UserID: user, Joined: int64(z.Score)})
	}
	return out, nil
}

// HandOverCandidate is a waiter offered a unit: the reservation's request
// id and token, or Skip (blacklisted: leaves without one). Among the
// waiters a hand-over returns as left, Skip is set and Token empty.
type HandOverCandidate struct {
	UserID    int64
	RequestID string
	Token     string
	Skip      bool
}

// HandOver gives units in stock to the waitlist's head (handover.lua) and
// returns the reservations it made, each a Redis hold like a 202's, and
// the waiters who left without a unit (skipped, or holding one already),
// whose joins are done too.
func (c *Client) HandOver(ctx context.Context, saleID, epoch int64, cands []HandOverCandidate) (handed, left []HandOverCandidate, err error) {
	defer c.NoteChange(saleID)
	if len(cands) == 0 {
		return nil, nil, nil
	}
	argv := make([]any, 0, 2+4*len(cands))
	argv = append(argv, strconv.FormatInt(epoch, 10), MineCap)
	for _, h := range cands {
		argv = append(argv, strconv.FormatInt(h.UserID, 10), h.RequestID, h.Token, flag(h.Skip))
	}
	v, err := c.scripts.handOver.Run(ctx, c.rdb, ReserveKeys(SaleKeys(saleID)), argv...).StringSlice()
	if err != nil {
		return nil, nil, fmt.Errorf("hand over units of sale %d: %w", saleID, err)
	}
	if len(v)%3 != 0 {
		return nil, nil, fmt.Errorf("hand over units of sale %d: unexpected reply %v", saleID, v)
	}
	for i := 0; i < len(v); i += 3 {
		user, err := strconv.ParseInt(v[i], 10, 64)
		if err != nil {
			return nil, nil, fmt.Errorf("hand over units of sale %d: user %q: %w", saleID, v[i], err)
		}
		h := HandOverCandidate{UserID: user, Token: v[i+1], RequestID: v[i+2]}
		if h.Token == "" {
			h.Skip = true
			left = append(left, h)
			continue
		}
		handed = append(handed, h)
	}
	return handed, left, nil
}

// WaitlistLengths reads how many users wait in each sale, in one pipeline.
func (c *Client) WaitlistLengths(ctx context.Context, saleIDs []int64) (map[int64]int64, error) {
	out := make(map[int64]int64, len(saleIDs))
	if len(saleIDs) == 0 {
		return out, nil
	}
	pipe := c.rdb.Pipeline()
	cmds := make([]*redis.IntCmd, len(saleIDs))
	for i, id := range saleIDs {
		cmds[i] = pipe.ZCard(ctx, SaleKeys(id).Waitlist)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("read waitlist lengths: %w", err)
	}
	for i, id := range saleIDs {
		out[id] = cmds[i].Val()
	}
	return out, nil
}
