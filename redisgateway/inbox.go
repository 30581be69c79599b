package redisgateway

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The inbox: a sale's Redis stream of reservations (reserve.lua appends one
// entry per hold) read by the relay's consumer group InboxGroup, and its
// dead-letter stream. The started set holds the tokens whose order
// workflow is known started.

// ErrNoInbox: the sale's inbox or its consumer group is gone (not warmed
// yet, or torn down).
var ErrNoInbox = errors.New("inbox or consumer group missing")

// InboxEntry is one inbox entry as reserve.lua wrote it.
type InboxEntry struct {
	ID            string // stream entry id
	Token         string
	UserID        int64
	RequestID     string
	TraceParent   string // W3C traceparent of the reserving request ("" if none)
	HTTPRequestID string // X-Request-Id of the reserving request ("" if none)
	// Malformed says why the entry can never be relayed (nil when it can).
	Malformed error

	values map[string]any // every field as read, copied into a dead letter
}

// ParseInboxEntry parses an inbox stream message (fields token, user,
// request, tp, rid).
func ParseInboxEntry(m redis.XMessage) InboxEntry {
	e := InboxEntry{ID: m.ID, values: m.Values}
	e.Token, _ = m.Values["token"].(string)
	user, _ := m.Values["user"].(string)
	e.RequestID, _ = m.Values["request"].(string)
	e.TraceParent, _ = m.Values["tp"].(string)
	e.HTTPRequestID, _ = m.Values["rid"].(string)
	if e.Token == "" {
		e.Malformed = errors.New("no token")
		return e
	}
	userID, err := strconv.ParseInt(user, 10, 64)
	if err != nil || userID <= 0 {
		e.Malformed = fmt.Errorf("bad user %q", user)
		return e
	}
	e.UserID = userID
	return e
}

func parseEntries(msgs []redis.XMessage) []InboxEntry {
	if len(msgs) == 0 {
		return nil
	}
	out := make([]InboxEntry, len(msgs))
	for i, m := range msgs {
		out[i] = ParseInboxEntry(m)
	}
	return out
}

// EntryAge is how long ago a stream entry was added, from its id (0 for
// an id that is not one).
func EntryAge(id string) time.Duration {
	at, ok := entryTime(id)
	if !ok {
		return 0
	}
	return time.Since(at)
}

// entryTime is when a stream entry was added, from its id (Redis's clock).
func entryTime(id string) (time.Time, bool) {
	ms, _, ok := strings.Cut(id, "-")
	if !ok {
		return time.Time{}, false
	}
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.UnixMilli(n), true
}

func isNoGroup(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOGROUP")
}

// InboxExists reports whether the sale's inbox stream exists.
func (c *Client) InboxExists(ctx context.Context, saleID int64) (bool, error) {
	n, err := c.rdb.Exists(ctx, SaleKeys(saleID).Inbox).Result()
	if err != nil {
		return false, fmt.Errorf("exists inbox of sale %d: %w", saleID, err)
	}
	return n == 1, nil
}

// ReadInbox reads up to count entries for consumer: new ones (blocking up
// to block), or with own the consumer's pending ones, oldest first (never
// blocking). ErrNoInbox when the inbox or the group is gone.
func (c *Client) ReadInbox(ctx context.Context, saleID int64, consumer string, own bool, count int64, block time.Duration) ([]InboxEntry, error) {
	from := ">"
	if own {
		from = "0" // this consumer's pending entries
	}
	args := &redis.XReadGroupArgs{
		Group:    InboxGroup,
		Consumer: consumer,
		Streams:  []string{SaleKeys(saleID).Inbox, from},
		Count:    count,
		Block:    block,
	}
	if own {
		args.Block = -1 // a read of the pending history never blocks
	}
	streams, err := c.rdb.XReadGroup(ctx, args).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if isNoGroup(err) {
		return nil, ErrNoInbox
	}
	if err != nil {
		return nil, fmt.Errorf("read inbox of sale %d: %w", saleID, err)
	}
	var msgs []redis.XMessage
	for _, s := range streams {
		msgs = append(msgs, s.Messages...)
	}
	return parseEntries(msgs), nil
}

// ClaimInbox takes over, for consumer, up to count entries pending longer
// than minIdle, starting at cursor ("" for the start); next is "" when the
// scan is done. ErrNoInbox when the inbox or the group is gone.
func (c *Client) ClaimInbox(ctx context.Context, saleID int64, consumer string, minIdle time.Duration, cursor string, count int64) (entries []InboxEntry, next string, err error) {
	if cursor == "" {
		cursor = "0-0"
	}
	msgs, next, err := c.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{
		Stream:   SaleKeys(saleID).Inbox,
		Group:    InboxGroup,
		MinIdle:  minIdle,
		Start:    cursor,
		Count:    count,
		Consumer: consumer,
	}).Result()
	if isNoGroup(err) {
		return nil, "", ErrNoInbox
	}
	if err != nil {
		return nil, "", fmt.Errorf("reclaim inbox of sale %d: %w", saleID, err)
	}
	if next == "0-0" {
		next = ""
	}
	return parseEntries(msgs), next, nil
}

// Deliveries reads how often each of a consumer's pending entries was
// delivered, by entry id (entries in stream order).
func (c *Client) Deliveries(ctx context.Context, saleID int64, consumer string, entries []InboxEntry) (map[string]int64, error) {
	inbox := SaleKeys(saleID).Inbox
	pending, err := c.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{
		Stream:   inbox,
		Group:    InboxGroup,
		Start:    entries[0].ID,
		End:      entries[len(entries)-1].ID,
		Count:    int64(2 * len(entries)),
		Consumer: consumer,
	}).Result()
	if err != nil {
		return nil, fmt.Errorf("delivery counts of %s: %w", inbox, err)
	}
	out := make(map[string]int64, len(pending))
	for _, p := range pending {
		out[p.ID] = p.RetryCount
	}
	return out, nil
}

// Started reports, for each token, whether its workflow is known started.
func (c *Client) Started(ctx context.Context, saleID int64, tokens []string) ([]bool, error) {
	members := make([]any, len(tokens))
	for i, t := range tokens {
		members[i] = t
	}
	known, err := c.rdb.SMIsMember(ctx, SaleKeys(saleID).Started, members...).Result()
	if err != nil {
		return nil, fmt.Errorf("started set of sale %d: %w", saleID, err)
	}
	return known, nil
}

// MarkStarted records that a token's workflow is started.
func (c *Client) MarkStarted(ctx context.Context, saleID int64, token string) error {
	if err := c.rdb.SAdd(ctx, SaleKeys(saleID).Started, token).Err(); err != nil {
		return fmt.Errorf("mark %s started: %w", token, err)
	}
	return nil
}

// AckInbox records the newly started tokens and acknowledges the entries,
// in one MULTI (all of a sale's keys share a hash slot); it answers how
// many entries Redis acknowledged.
func (c *Client) AckInbox(ctx context.Context, saleID int64, ids, started []string) (int64, error) {
	k := SaleKeys(saleID)
	var xack *redis.IntCmd
	_, err := c.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		if len(started) > 0 {
			members := make([]any, len(started))
			for i, t := range started {
				members[i] = t
			}
			p.SAdd(ctx, k.Started, members...)
		}
		xack = p.XAck(ctx, k.Inbox, InboxGroup, ids...)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("ack %d inbox entries of sale %d: %w", len(ids), saleID, err)
	}
	return xack.Val(), nil
}

// DeadLetter is an inbox entry condemned, with why and after how many
// deliveries.
type DeadLetter struct {
	Entry     InboxEntry
	Reason    string
	Delivered int64
}

// DeadLetterInbox copies entries to the dead-letter stream (every field,
// plus reason, delivered and entry) and acknowledges them, in one MULTI so
// that an entry is never both dead and pending.
func (c *Client) DeadLetterInbox(ctx context.Context, saleID int64, dead []DeadLetter) error {
	k := SaleKeys(saleID)
	ids := make([]string, len(dead))
	_, err := c.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for i, d := range dead {
			ids[i] = d.Entry.ID
			values := make(map[string]any, len(d.Entry.values)+3)
			for f, v := range d.Entry.values {
				values[f] = v
			}
			values["reason"] = d.Reason
			values["delivered"] = d.Delivered
			values["entry"] = d.Entry.ID
			p.XAdd(ctx, &redis.XAddArgs{Stream: k.Dead, Values: values})
		}
		p.XAck(ctx, k.Inbox, InboxGroup, ids...)
		return nil
	})
	if err != nil {
		return fmt.Errorf("dead-letter %d inbox entries of sale %d: %w", len(dead), saleID, err)
	}
	return nil
}

// InboxGroupInfo is the relay group's view of a sale's inbox.
type InboxGroupInfo struct {
	Pending         int64  // delivered, not acknowledged
	Lag             int64  // not yet delivered; -1 when Redis cannot tell
	LastDeliveredID string // the group's last delivered entry
}

// InboxGroupState reads the relay group's state of a sale's inbox (XINFO
// GROUPS); ErrNoInbox when the inbox or the group is gone.
func (c *Client) InboxGroupState(ctx context.Context, saleID int64) (InboxGroupInfo, error) {
	groups, err := c.rdb.XInfoGroups(ctx, SaleKeys(saleID).Inbox).Result()
	if err != nil {
		if strings.Contains(err.Error(), "no such key") {
			return InboxGroupInfo{}, ErrNoInbox
		}
		return InboxGroupInfo{}, fmt.Errorf("xinfo groups of sale %d: %w", saleID, err)
	}
	for _, g := range groups {
		if g.Name == InboxGroup {
			return InboxGroupInfo{Pending: g.Pending, Lag: g.Lag, LastDeliveredID: g.LastDeliveredID}, nil
		}
	}
	return InboxGroupInfo{}, ErrNoInbox
}

// RelayDelivered reports whether the relay group has delivered every
// entry of the sale's inbox appended before through (by the entries' ids,
// Redis's clock): none is undelivered, or the last delivered one was
// appended at or after through. Delivered entries are the relay's to start
// (pending: read, or claimed from a consumer that died). An inbox or group
// that is gone holds nothing the relay will deliver: true.
func (c *Client) RelayDelivered(ctx context.Context, saleID int64, through time.Time) (bool, error) {
	g, err := c.InboxGroupState(ctx, saleID)
	if errors.Is(err, ErrNoInbox) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if at, ok := entryTime(g.LastDeliveredID); g.Lag == 0 || ok && !at.Before(through) {
		return true, nil
	}
	if g.Lag > 0 {
		return false, nil
	}
	next, err := c.FirstUndelivered(ctx, saleID, g.LastDeliveredID)
	if err != nil {
		return false, err
	}
	return next == "", nil
}

// OldestPending is the id of the group's oldest pending entry ("" if none).
func (c *Client) OldestPending(ctx context.Context, saleID int64) (string, error) {
	p, err := c.rdb.XPending(ctx, SaleKeys(saleID).Inbox, InboxGroup).Result()
	if err != nil {
		return "", fmt.Errorf("xpending of sale %d: %w", saleID, err)
	}
	return p.Lower, nil
}

// FirstUndelivered is the id of the first entry after the group's last
// delivered one ("" if none).
func (c *Client) FirstUndelivered(ctx context.Context, saleID int64, lastDelivered string) (string, error) {
	next, err := c.rdb.XRangeN(ctx, SaleKeys(saleID).Inbox, "("+lastDelivered, "+", 1).Result()
	if err != nil {
		return "", fmt.Errorf("first undelivered entry of sale %d: %w", saleID, err)
	}
	if len(next) == 1 {
		return next[0].ID, nil
	}
	return "", nil
}

// AckedHead reads up to count of the inbox's oldest entries that the relay
// group has acknowledged: those before its oldest pending entry and not
// after its last delivered one. ErrNoInbox when the inbox or group is gone.
func (c *Client) AckedHead(ctx context.Context, saleID int64, count int64) ([]InboxEntry, error) {
	g, err := c.InboxGroupState(ctx, saleID)
	if err != nil {
		return nil, err
	}
	end := g.LastDeliveredID
	if g.Pending > 0 {
		lower, err := c.OldestPending(ctx, saleID)
		if err != nil {
			return nil, err
		}
		if lower != "" { // else acknowledged since: all up to end are
			end = "(" + lower
		}
	}
	if end == "" || end == "0-0" {
		return nil, nil // nothing delivered yet
	}
	msgs, err := c.rdb.XRangeN(ctx, SaleKeys(saleID).Inbox, "-", end, count).Result()
	if err != nil {
		return nil, fmt.Errorf("acknowledged head of the inbox of sale %d: %w", saleID, err)
	}
	return parseEntries(msgs), nil
}

// TrimInbox deletes the inbox entries before keepFrom (an entry id) and
// drops their tokens from the started set, in one MULTI: the started set
// only guards entries the inbox can still deliver.
func (c *Client) TrimInbox(ctx context.Context, saleID int64, keepFrom string, tokens []string) error {
	k := SaleKeys(saleID)
	_, err := c.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.XTrimMinID(ctx, k.Inbox, keepFrom)
		if len(tokens) > 0 {
			members := make([]any, len(tokens))
			for i, t := range tokens {
				members[i] = t
			}
			p.SRem(ctx, k.Started, members...)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("trim inbox of sale %d before %s: %w", saleID, keepFrom, err)
	}
	return nil
}

// NextEntryID is the smallest stream entry id after id.
func NextEntryID(id string) (string, error) {
	ms, seq, ok := strings.Cut(id, "-")
	n, err := strconv.ParseUint(seq, 10, 64)
	if !ok || err != nil {
		return "", fmt.Errorf("bad stream entry id %q", id)
	}
	return ms + "-" + strconv.FormatUint(n+1, 10), nil
}
