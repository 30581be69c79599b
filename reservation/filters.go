package reservation

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/gate"
	"github.com/seckill/seckill/internal/ratelimit"
	"github.com/seckill/seckill/internal/reqid"
	"github.com/seckill/seckill/salecache"
)

// The filter layers past the API's own (validation, the global and
// per-address buckets), in the order they run, cheapest first; the
// metric seckill_filter_total names them so.
const (
	LayerSale      = "sale_cache"
	LayerGate      = "gate"
	LayerSoldOut   = "sold_out_mark"
	LayerUser      = "user_limit"
	LayerBlacklist = "blacklist"
	LayerLottery   = "lottery"
)

// FilterDeps are what the filters read, all in process but the lottery's
// pool (Redis, within RedisTimeout). PerUser is the per-user bucket, of
// PerUserRPS. Count receives each layer's outcome ("pass", or why it
// refused).
type FilterDeps struct {
	Cache        *salecache.Cache
	Gate         *gate.Service
	Lottery      *Lottery
	PerUser      *ratelimit.Keyed[int64]
	PerUserRPS   float64
	RedisTimeout time.Duration
	Count        func(layer, outcome string)
	Logger       *slog.Logger
}

// Filters are the reservation's admission filters past the API's: the
// sale from the cache, the gate, the sold-out mark, the user's bucket and
// the blacklist, the opening lottery. Their refusals are *domain.Error
// (with Retry-After where the contract gives one).
type Filters struct {
	d              FilterDeps
	userLimited    *domain.Error
	saleUnknowable *domain.Error
}

// NewFilters is the filters of d.
func NewFilters(d FilterDeps) *Filters {
	return &Filters{d: d,
		userLimited:    &domain.Error{Code: domain.ERateLimited, Message: "too many requests", RetryAfter: ratelimit.RetryAfter(d.PerUserRPS)},
		saleUnknowable: domain.Unavailable("sale data unavailable, retry with the same request_id"),
	}
}

// Filtered is what a request that passed the filters carries on: the
// sale's cache entry and the sale as cached. Replay is the token the
// sold-out mark already knows for the request (then nothing else ran).
type Filtered struct {
	Entry  *salecache.Entry
	Sale   *domain.Sale
	Replay string
}

// Admit runs the filters in order, counting each pass and refusal.
func (f *Filters) Admit(ctx context.Context, userID, saleID int64, requestID, pass string, now time.Time) (Filtered, error) {
	var out Filtered
	var err error
	if out.Entry, out.Sale, err = f.sale(ctx, saleID, now); err != nil {
		return out, err
	}
	if err = f.gate(ctx, out.Sale, userID, pass, now); err != nil {
		return out, err
	}
	if out.Replay, err = f.soldOutMark(out, userID, requestID); err != nil || out.Replay != "" {
		return out, err
	}
	if err = f.user(userID, now); err != nil {
		return out, err
	}
	return out, f.lottery(ctx, out.Sale, userID, now)
}

// sale reads the sale from the cache and refuses it outside its window,
// stopped or paused.
func (f *Filters) sale(ctx context.Context, saleID int64, now time.Time) (*salecache.Entry, *domain.Sale, error) {
	entry, err := f.d.Cache.Get(ctx, saleID)
	if err != nil {
		if domain.ErrorCode(err) == domain.ENotFound {
			f.d.Count(LayerSale, "not_found")
			return nil, nil, err
		}
		f.d.Count(LayerSale, "unavailable")
		reqid.Logger(ctx, f.d.Logger).Warn("reserve: sale cache", "sale_id", saleID, "err", err)
		return nil, nil, f.saleUnknowable
	}
	sale := entry.Sale()
	switch {
	case sale.Control == domain.ControlStopped || now.After(sale.EndsAt.Add(TimeSlack)):
		f.d.Count(LayerSale, "ended")
		return nil, nil, domain.ErrSaleEnded
	case now.Before(sale.StartsAt.Add(-TimeSlack)):
		f.d.Count(LayerSale, "not_started")
		return nil, nil, domain.ErrSaleNotStarted
	case sale.Control == domain.ControlPaused:
		f.d.Count(LayerSale, "paused")
		return nil, nil, domain.ErrSalePaused
	}
	f.d.Count(LayerSale, "pass")
	return entry, sale, nil
}

// gate checks the sale's challenge pass (one HMAC) and its allowlist (an
// in-process set) before anything reaches Redis.
func (f *Filters) gate(ctx context.Context, sale *domain.Sale, userID int64, pass string, now time.Time) error {
	if err := f.d.Gate.CheckPass(sale, userID, pass, now); err != nil {
		f.d.Count(LayerGate, "challenge_required")
		return err
	}
	eligible, err := f.d.Gate.Eligible(ctx, sale, userID)
	if err != nil {
		f.d.Count(LayerGate, "unavailable")
		reqid.Logger(ctx, f.d.Logger).Warn("reserve: allowlist", "sale_id", sale.ID, "err", err)
		return f.saleUnknowable
	}
	if !eligible {
		f.d.Count(LayerGate, "not_eligible")
		return errNotEligible
	}
	f.d.Count(LayerGate, "pass")
	return nil
}

var errNotEligible = domain.Errorf(domain.ENotEligible, "this sale is restricted to listed users")

// soldOutMark answers from the in-process sold-out mark (a picture of
// Redis: only in Redis mode): a replay it knows gets its token, anyone
// else is refused at once.
func (f *Filters) soldOutMark(in Filtered, userID int64, requestID string) (string, error) {
	ans, tok := salecache.MarkNone, ""
	if in.Sale.Mode == domain.ModeRedis {
		ans, tok = in.Entry.Check(userID, requestID)
	}
	switch ans {
	case salecache.MarkReplay:
		f.d.Count(LayerSoldOut, "replay")
		return tok, nil
	case salecache.MarkSoldOut:
		f.d.Count(LayerSoldOut, "sold_out")
		return "", domain.ErrSoldOut
	}
	f.d.Count(LayerSoldOut, "pass")
	return "", nil
}

var errBlacklisted = domain.Errorf(domain.EBlacklisted, "this user may not take part")

// user takes a token from the user's bucket and refuses a blacklisted
// user.
func (f *Filters) user(userID int64, now time.Time) error {
	if !f.d.PerUser.Allow(userID, now) {
		f.d.Count(LayerUser, "rate_limited")
		return f.userLimited
	}
	f.d.Count(LayerUser, "pass")
	if f.d.Cache.Blacklisted(userID) {
		f.d.Count(LayerBlacklist, "blacklisted")
		return errBlacklisted
	}
	f.d.Count(LayerBlacklist, "pass")
	return nil
}

// lottery holds the user back until their band of the sale's opening
// lottery. Redis unreachable for the pool leaves the sale to the paths'
// own answers (the database path admits at its own lowered rate).
func (f *Filters) lottery(ctx context.Context, sale *domain.Sale, userID int64, now time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, f.d.RedisTimeout)
	defer cancel()
	wait, err := f.d.Lottery.Wait(ctx, sale, userID, now)
	switch {
	case errors.Is(err, domain.ErrSaleNotStarted):
		f.d.Count(LayerLottery, "not_started")
		return err
	case err != nil:
		f.d.Count(LayerLottery, "unavailable")
		return nil
	}
	if wait > 0 {
		f.d.Count(LayerLottery, "waiting")
		secs := int((wait + time.Second - 1) / time.Second)
		return &domain.Error{Code: domain.ERateLimited, RetryAfter: max(secs, 1),
			Message: "the sale's opening lottery has not reached your turn; retry after Retry-After (retrying sooner changes nothing)"}
	}
	f.d.Count(LayerLottery, "pass")
	return nil
}
