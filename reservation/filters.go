package reservation

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/seckill/seckill/domain"
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

// Each layer decides through one method, so Admit reads without its
// implementations.

// SaleSource is this instance's sale cache (salecache.Cache.Get): the
// sale's entry, refreshed each second and by the change feed; a
// domain.ENotFound error for no such sale, any other when it cannot tell.
type SaleSource interface {
	Get(ctx context.Context, saleID int64) (*salecache.Entry, error)
}

// PassCheck is the sale's challenge (gate.Service.CheckPass): nil when
// the sale needs no pass, the user is exempt or pass is theirs for this
// sale and unexpired; else a domain.EChallengeRequired error. One HMAC.
type PassCheck interface {
	CheckPass(sale *domain.Sale, userID int64, pass string, now time.Time) error
}

// Allowlist is the sale's allowlist (gate.Service.Eligible): whether the
// user may reserve, from memory but for a new allowlist version.
type Allowlist interface {
	Eligible(ctx context.Context, sale *domain.Sale, userID int64) (bool, error)
}

// SoldOutMark is a Redis-mode sale's in-process picture of its sold-out
// state (salecache.Entry.Check): MarkReplay with the token of a request
// it already answered, MarkSoldOut for a newcomer once Redis found no
// unit left; MarkScript (a holder, a user with retired records) or
// MarkNone leave the answer to the script.
type SoldOutMark interface {
	Check(userID int64, requestID string) (salecache.MarkAnswer, string)
}

// UserBucket is the per-user token bucket (ratelimit.Keyed.Allow).
type UserBucket interface {
	Allow(userID int64, now time.Time) bool
}

// Blacklist is the in-process blacklist (salecache.Cache.Blacklisted).
type Blacklist interface {
	Blacklisted(userID int64) bool
}

// Turns is the opening lottery (Lottery.Wait): how long the user waits
// for their band (0: now); domain.ErrSaleNotStarted before the opening;
// another error when the pool in Redis cannot be read.
type Turns interface {
	Wait(ctx context.Context, sale *domain.Sale, userID int64, now time.Time) (time.Duration, error)
}

// FilterDeps are what the filters read, all in process but the lottery's
// pool (Redis, within RedisTimeout). PerUser is the per-user bucket, of
// PerUserRPS. Count receives each layer's outcome ("pass", or why it
// refused).
type FilterDeps struct {
	Cache interface {
		SaleSource
		Blacklist
	}
	Gate interface {
		PassCheck
		Allowlist
	}
	Lottery      Turns
	PerUser      UserBucket
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
	layers         []filterLayer
	userLimited    *domain.Error
	saleUnknowable *domain.Error
}

// filterLayer is one filter: its check names the outcome it is counted
// under ("pass", or why it refused) and answers its refusal.
type filterLayer struct {
	name  string
	check func(ctx context.Context, a *admitting) (outcome string, err error)
}

// admitting is a request going through the filters.
type admitting struct {
	userID, saleID  int64
	requestID, pass string
	now             time.Time
	out             Filtered
}

// NewFilters is the filters of d.
func NewFilters(d FilterDeps) *Filters {
	f := &Filters{d: d,
		userLimited:    &domain.Error{Code: domain.ERateLimited, Message: "too many requests", RetryAfter: ratelimit.RetryAfter(d.PerUserRPS)},
		saleUnknowable: domain.Unavailable("sale data unavailable, retry with the same request_id"),
	}
	f.layers = []filterLayer{
		{LayerSale, f.sale},
		{LayerGate, f.gate},
		{LayerSoldOut, f.soldOutMark},
		{LayerUser, f.user},
		{LayerBlacklist, f.blacklist},
		{LayerLottery, f.lottery},
	}
	return f
}

// Filtered is what a request that passed the filters carries on: the
// sale's cache entry and the sale as cached. Replay is the token the
// sold-out mark already knows for the request (then nothing else ran).
type Filtered struct {
	Entry  *salecache.Entry
	Sale   *domain.Sale
	Replay string
}

// Admit runs the layers in order, counting each one's outcome, until one
// refuses or answers a replay.
func (f *Filters) Admit(ctx context.Context, userID, saleID int64, requestID, pass string, now time.Time) (Filtered, error) {
	a := &admitting{userID: userID, saleID: saleID, requestID: requestID, pass: pass, now: now}
	for _, l := range f.layers {
		outcome, err := l.check(ctx, a)
		f.d.Count(l.name, outcome)
		if err != nil || a.out.Replay != "" {
			return a.out, err
		}
	}
	return a.out, nil
}

// sale reads the sale from the cache and refuses it outside its window,
// stopped or paused.
func (f *Filters) sale(ctx context.Context, a *admitting) (string, error) {
	entry, err := f.d.Cache.Get(ctx, a.saleID)
	if domain.ErrorCode(err) == domain.ENotFound {
		return "not_found", err
	}
	if err != nil {
		reqid.Logger(ctx, f.d.Logger).Warn("reserve: sale cache", "sale_id", a.saleID, "err", err)
		return "unavailable", f.saleUnknowable
	}
	sale := entry.Sale()
	switch {
	case sale.Control == domain.ControlStopped || a.now.After(sale.EndsAt.Add(TimeSlack)):
		return "ended", domain.ErrSaleEnded
	case a.now.Before(sale.StartsAt.Add(-TimeSlack)):
		return "not_started", domain.ErrSaleNotStarted
	case sale.Control == domain.ControlPaused:
		return "paused", domain.ErrSalePaused
	}
	a.out.Entry, a.out.Sale = entry, sale
	return "pass", nil
}

var errNotEligible = domain.Errorf(domain.ENotEligible, "this sale is restricted to listed users")

// gate checks the sale's challenge pass (one HMAC) and its allowlist (an
// in-process set) before anything reaches Redis.
func (f *Filters) gate(ctx context.Context, a *admitting) (string, error) {
	if err := f.d.Gate.CheckPass(a.out.Sale, a.userID, a.pass, a.now); err != nil {
		return "challenge_required", err
	}
	eligible, err := f.d.Gate.Eligible(ctx, a.out.Sale, a.userID)
	switch {
	case err != nil:
		reqid.Logger(ctx, f.d.Logger).Warn("reserve: allowlist", "sale_id", a.saleID, "err", err)
		return "unavailable", f.saleUnknowable
	case !eligible:
		return "not_eligible", errNotEligible
	}
	return "pass", nil
}

// soldOutMark answers from the sold-out mark, a picture of Redis and so
// read only in Redis mode: a replay it knows gets its token, anyone else
// is refused at once.
func (f *Filters) soldOutMark(_ context.Context, a *admitting) (string, error) {
	if a.out.Sale.Mode != domain.ModeRedis {
		return "pass", nil
	}
	var mark SoldOutMark = a.out.Entry
	switch ans, token := mark.Check(a.userID, a.requestID); ans {
	case salecache.MarkReplay:
		a.out.Replay = token
		return "replay", nil
	case salecache.MarkSoldOut:
		return "sold_out", domain.ErrSoldOut
	}
	return "pass", nil
}

// user takes a token from the user's bucket.
func (f *Filters) user(_ context.Context, a *admitting) (string, error) {
	if !f.d.PerUser.Allow(a.userID, a.now) {
		return "rate_limited", f.userLimited
	}
	return "pass", nil
}

var errBlacklisted = domain.Errorf(domain.EBlacklisted, "this user may not take part")

// blacklist refuses a blacklisted user.
func (f *Filters) blacklist(_ context.Context, a *admitting) (string, error) {
	if f.d.Cache.Blacklisted(a.userID) {
		return "blacklisted", errBlacklisted
	}
	return "pass", nil
}

// lottery holds the user back until their band of the sale's opening
// lottery. Redis unreachable for the pool leaves the sale to the paths'
// own answers (the database path admits at its own lowered rate).
func (f *Filters) lottery(ctx context.Context, a *admitting) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, f.d.RedisTimeout)
	defer cancel()
	wait, err := f.d.Lottery.Wait(ctx, a.out.Sale, a.userID, a.now)
	switch {
	case errors.Is(err, domain.ErrSaleNotStarted):
		return "not_started", err
	case err != nil:
		return "unavailable", nil
	case wait > 0:
		secs := int((wait + time.Second - 1) / time.Second)
		return "waiting", &domain.Error{Code: domain.ERateLimited, RetryAfter: max(secs, 1),
			Message: "the sale's opening lottery has not reached your turn; retry after Retry-After (retrying sooner changes nothing)"}
	}
	return "pass", nil
}
