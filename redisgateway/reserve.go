package redisgateway

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/domain"
)

// The reserve script's contract: its arguments, its outcomes and the
// domain refusals they mean, and its two callers (Scripts for a given
// Redis, Client for the process's own).

// ReserveSource is the reserve script's text, for the benchmark's baseline.
func ReserveSource() string { return reserveSrc }

// Reserve outcomes.
const (
	OutcomeOK         = "ok"
	OutcomeReplay     = "replay"
	OutcomeNotReady   = "not_ready"
	OutcomePaused     = "paused"
	OutcomeEnded      = "ended"
	OutcomeNotStarted = "not_started"
	OutcomeAlready    = "already"
	OutcomeSoldOut    = "sold_out"
	// OutcomeLate: the script ran after the caller's deadline; nothing taken.
	OutcomeLate = "late"
	// OutcomeAsk: the request is not in the replay map but the user's ended
	// reservations' records moved out to the database (retire.lua); the
	// caller asks the database whether this request reserved before, and
	// runs the script again with ReserveArgs.NotInDatabase when it did not.
	OutcomeAsk = "ask"
)

// reserveRefusals are the reserve script's refusals as the domain names
// them.
var reserveRefusals = map[string]error{
	OutcomeAlready:    domain.ErrAlreadyHolds,
	OutcomeSoldOut:    domain.ErrSoldOut,
	OutcomeNotStarted: domain.ErrSaleNotStarted,
	OutcomeEnded:      domain.ErrSaleEnded,
	OutcomePaused:     domain.ErrSalePaused,
	OutcomeNotReady:   domain.ErrSaleNotReady,
	// The script ran past the caller's deadline and took nothing, but the
	// caller gave up before it could know: the retry finds out.
	OutcomeLate: domain.ErrOutcomeUnknown,
}

// Refusal is the domain's refusal the script's outcome means; nil for a
// hold, a replay, an ask, and an outcome this build does not know.
func (r ReserveResult) Refusal() error { return reserveRefusals[r.Outcome] }

// ReserveResult is what the reserve script decided.
type ReserveResult struct {
	Outcome   string
	Token     string
	StockLeft int64
	// Seq numbers a new hold ('ok'): the sale's counter of holds, which the
	// database records under a unique key; 0 otherwise.
	Seq int64
}

// ReserveArgs are the arguments of Reserve.
type ReserveArgs struct {
	SaleID    int64
	UserID    int64
	RequestID string
	Token     string
	Epoch     int64
	// Deadline is when the caller gives up; a script that runs later takes
	// nothing (OutcomeLate). Zero: none.
	Deadline time.Time
	// TraceParent (W3C) and HTTPRequestID (X-Request-Id), both optional,
	// go into the inbox entry (InboxEntry.TraceParent and HTTPRequestID).
	TraceParent   string
	HTTPRequestID string
	// NotInDatabase: the caller found no reservation of this request in
	// the database, so a user with retired records is not asked again.
	NotInDatabase bool
}

// MineCap is how many tokens the user index lists per user and sale; a
// user who takes more holds (cycling reserve and cancel) is no longer
// listed and reads their reservations from the database, so the string the
// reserve script rebuilds stays short.
const MineCap = 16

// ReserveKeys returns the reserve script's keys, in its order.
func ReserveKeys(k Keys) []string {
	return []string{k.Meta, k.Stock, k.Buyers, k.Tokens, k.Requests, k.Inbox, k.Reserved, k.Mine, k.Waitlist, k.Retired}
}

// Reserve runs the reservation script.
func (s *Scripts) Reserve(ctx context.Context, rdb redis.Scripter, a ReserveArgs) (ReserveResult, error) {
	k := SaleKeys(a.SaleID)
	deadline := int64(0)
	if !a.Deadline.IsZero() {
		deadline = a.Deadline.UnixMilli()
	}
	v, err := s.reserve.Run(ctx, rdb, ReserveKeys(k),
		strconv.FormatInt(a.UserID, 10), a.RequestID, a.Token, strconv.FormatInt(a.Epoch, 10), strconv.FormatInt(deadline, 10),
		a.TraceParent, a.HTTPRequestID, MineCap, "0", flag(a.NotInDatabase)).Slice()
	if err != nil {
		return ReserveResult{}, fmt.Errorf("reserve script: %w", err)
	}
	if len(v) != 3 && len(v) != 4 {
		return ReserveResult{}, fmt.Errorf("reserve script: unexpected reply %v", v)
	}
	outcome, _ := v[0].(string)
	token, _ := v[1].(string)
	left, _ := v[2].(int64)
	res := ReserveResult{Outcome: outcome, Token: token, StockLeft: left}
	if len(v) == 4 {
		res.Seq, _ = v[3].(int64)
	}
	return res, nil
}

// Reserve runs the reservation script (Scripts.Reserve).
func (c *Client) Reserve(ctx context.Context, a ReserveArgs) (ReserveResult, error) {
	defer c.NoteChange(a.SaleID)
	return c.scripts.Reserve(ctx, c.rdb, a)
}
