package redisgateway

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed status.lua
	statusSrc string
	//go:embed status_read.lua
	statusReadSrc string

	statusScript     = redis.NewScript(statusSrc)
	statusReadScript = redis.NewScript(statusReadSrc)
)

// StatusRecord is a reservation's status as the order workflow last wrote
// it to Redis: the reservation view's fields plus its owner. Seq is the
// status's rank (it only grows), which event streams use as event id.
type StatusRecord struct {
	Seq         int64
	Epoch       int64
	UserID      int64
	Status      string
	OrderNo     string
	AmountCents int64
	PayBy       time.Time // zero until payment is awaited
}

// encode renders the record's tail (after seq and epoch), which status.lua
// prefixes with both. Order numbers and statuses contain no '|'.
func (r StatusRecord) encode() string {
	payBy := int64(0)
	if !r.PayBy.IsZero() {
		payBy = r.PayBy.UnixMilli()
	}
	return strconv.FormatInt(r.UserID, 10) + "|" + r.Status + "|" + r.OrderNo + "|" +
		strconv.FormatInt(r.AmountCents, 10) + "|" + strconv.FormatInt(payBy, 10)
}

// ParseStatusRecord parses a status-hash value
// "seq|epoch|user|status|order_no|amount_cents|pay_by_ms".
func ParseStatusRecord(v string) (StatusRecord, bool) {
	f := strings.Split(v, "|")
	if len(f) != 7 {
		return StatusRecord{}, false
	}
	var r StatusRecord
	var payBy int64
	var err error
	for i, dst := range []*int64{&r.Seq, &r.Epoch, &r.UserID, nil, nil, &r.AmountCents, &payBy} {
		if dst == nil {
			continue
		}
		if *dst, err = strconv.ParseInt(f[i], 10, 64); err != nil {
			return StatusRecord{}, false
		}
	}
	r.Status, r.OrderNo = f[3], f[4]
	if r.Status == "" {
		return StatusRecord{}, false
	}
	if payBy > 0 {
		r.PayBy = time.UnixMilli(payBy).UTC()
	}
	return r, true
}

// EventChannel is the sale's pub/sub channel on which status.lua announces
// a changed record (message: the token), and warmup.lua and rebuild.lua a
// new epoch, which voids every record of the sale (message: SaleWide).
func EventChannel(saleID int64) string { return "{sale:" + strconv.FormatInt(saleID, 10) + "}:events" }

// EventChannelPattern matches every sale's event channel.
const EventChannelPattern = "{sale:*}:events"

// SaleWide is the event message that concerns every token of the sale.
const SaleWide = "*"

// SaleOfEventChannel returns the sale id of an event channel name.
func SaleOfEventChannel(ch string) (int64, bool) {
	rest, ok := strings.CutPrefix(ch, "{sale:")
	if !ok {
		return 0, false
	}
	id, ok := strings.CutSuffix(rest, "}:events")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(id, 10, 64)
	return n, err == nil && n > 0
}

// WriteStatus records a reservation's status (see status.lua) and reports
// whether the record changed. r.Epoch is ignored: the script stamps the
// sale's current epoch.
func (s *Scripts) WriteStatus(ctx context.Context, rdb redis.Scripter, saleID int64, token string, r StatusRecord) (bool, error) {
	keys, args := statusCall(saleID, token, r)
	n, err := statusScript.Run(ctx, rdb, keys, args...).Int64()
	if err != nil {
		return false, fmt.Errorf("status script: %w", err)
	}
	return n == 1, nil
}

// statusCall is status.lua's keys and arguments.
func statusCall(saleID int64, token string, r StatusRecord) ([]string, []any) {
	k := SaleKeys(saleID)
	return []string{k.Status, k.Meta}, []any{token, r.Seq, r.encode(), EventChannel(saleID)}
}

// ForgetStatus deletes a reservation's status record, so reads fall back
// to the database (used while the database path owns the sale), and
// announces it on the sale's event channel as status.lua does: a view
// cached from the record is stale now.
func (s *Scripts) ForgetStatus(ctx context.Context, rdb redis.Cmdable, saleID int64, token string) error {
	if err := rdb.HDel(ctx, SaleKeys(saleID).Status, token).Err(); err != nil {
		return fmt.Errorf("forget status: %w", err)
	}
	if err := rdb.Publish(ctx, EventChannel(saleID), token).Err(); err != nil {
		return fmt.Errorf("forget status: announce: %w", err)
	}
	return nil
}

// StatusRead is what Redis knows of a reservation for a status read.
type StatusRead struct {
	TokenState string // hold state ("" when Redis does not know the token)
	Owner      int64  // the hold's user, when TokenState is set
	Record     *StatusRecord
}

// ReadStatus reads a token's hold state and its status record of the
// sale's current epoch, in one script.
func (s *Scripts) ReadStatus(ctx context.Context, rdb redis.Scripter, saleID int64, token string) (StatusRead, error) {
	out, err := s.ReadStatuses(ctx, rdb, saleID, []string{token})
	if err != nil {
		return StatusRead{}, err
	}
	return out[0], nil
}

// ReadStatuses is ReadStatus for several tokens of one sale, in one
// script: the reads answered in order.
func (s *Scripts) ReadStatuses(ctx context.Context, rdb redis.Scripter, saleID int64, tokens []string) ([]StatusRead, error) {
	k := SaleKeys(saleID)
	args := make([]any, len(tokens))
	for i, t := range tokens {
		args[i] = t
	}
	v, err := statusReadScript.Run(ctx, rdb, []string{k.Tokens, k.Status, k.Meta}, args...).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("status read script: %w", err)
	}
	if len(v) != 2*len(tokens) {
		return nil, fmt.Errorf("status read script: %d values for %d tokens", len(v), len(tokens))
	}
	out := make([]StatusRead, len(tokens))
	for i := range tokens {
		if out[i], err = parseStatusRead(v[2*i], v[2*i+1]); err != nil {
			return nil, fmt.Errorf("status read script: %w", err)
		}
	}
	return out, nil
}

// parseStatusRead parses a token's hold state ("state:user") and status
// record as the read scripts return them ("" when absent).
func parseStatusRead(state, rec string) (StatusRead, error) {
	var out StatusRead
	if state != "" {
		st, user, ok := TokenState(state)
		if !ok {
			return StatusRead{}, fmt.Errorf("bad token state %q", state)
		}
		out.TokenState, out.Owner = st, user
	}
	if rec != "" {
		r, ok := ParseStatusRecord(rec)
		if !ok {
			return StatusRead{}, fmt.Errorf("bad status record %q", rec)
		}
		out.Record = &r
	}
	return out, nil
}
