// Package status answers a reservation's status reads (polls, event
// streams, a user's list of one sale) without the database while Redis
// owns the sale.
package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"log/slog"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/salecache"
	"github.com/seckill/seckill/sales"
	"github.com/seckill/seckill/store"
)

// Status reads (polls and event streams) are answered without the
// database: from the status record the order workflow writes to Redis as
// the reservation advances (sales.SyncToken, before the workflow
// acknowledges the change to anyone), from the token's Redis hold while
// the order does not exist yet, and from an in-process cache of ended
// reservations, and of live ones (liveViews). MySQL answers only a token Redis no longer knows (the
// sale's keys torn down, a record voided by a database-mode episode,
// Redis unreachable); an ended reservation read there is cached too.

// endedViews caches the views of ended reservations (they never change);
// bounded: cleared when full.
type endedViews struct {
	mu  sync.RWMutex
	m   map[string]Owned
	max int
}

// Owned is a reservation's view and its owner; Body is the view as JSON,
// rendered once for a cached view (nil otherwise).
type Owned struct {
	Owner int64
	View  domain.ReservationView
	Body  []byte
}

// rendered is v with its body, for a cache that serves it many times.
// A view always encodes; were it not to, the body stays nil and the
// handler encodes (and reports) it.
func (v Owned) rendered() Owned {
	if v.Body == nil {
		if b, err := json.Marshal(v.View); err == nil {
			v.Body = b
		}
	}
	return v
}

func newEndedViews(max int) *endedViews {
	return &endedViews{m: make(map[string]Owned), max: max}
}

func (e *endedViews) get(token string) (Owned, bool) {
	e.mu.RLock()
	v, ok := e.m[token]
	e.mu.RUnlock()
	return v, ok
}

func (e *endedViews) put(token string, v Owned) {
	if !v.View.Status.Terminal() {
		return
	}
	v = v.rendered()
	e.mu.Lock()
	if len(e.m) >= e.max {
		clear(e.m)
	}
	e.m[token] = v
	e.mu.Unlock()
}

// ReadSeq is the reservation's current view for its owner and the
// view's sequence number (sales.StatusSeq). Errors are *domain.Error
// (not_found, unavailable).
func (r *Reader) ReadSeq(ctx context.Context, userID int64, token string, saleID int64) (domain.ReservationView, int64, error) {
	v, err := r.Read(ctx, userID, token, saleID)
	return v.View, sales.StatusSeq(v.View.Status), err
}

// Read is the reservation's current view for its owner, with its rendered
// body when it came from a cache. Errors are *domain.Error (not_found,
// unavailable).
func (r *Reader) Read(ctx context.Context, userID int64, token string, saleID int64) (Owned, error) {
	return r.readView(ctx, userID, token, saleID, true, true)
}

// ErrRedisBusy: Redis did not answer a stream's re-read in time; the
// stream tries again later instead of asking the database (errors.Is).
var ErrRedisBusy = domain.Unavailable("redis did not answer the status read in time; retry")

// Stream is an open stream's re-read: as statusView, except that a
// Redis that does not answer now (slow, unreachable) while it owns the
// sale gives ErrRedisBusy instead of a database read. The stream already
// showed a view, so waiting for Redis costs it nothing, where thousands of
// streams re-reading from MySQL whenever Redis is slow would load the one
// primary the order workflows need. The database still answers what Redis
// does not know (no record, no hold) and while the database path owns the
// sale. It never answers from the cache of live views: a stream re-reads
// when woken, which drops the token's cached view anyway, and every
// streamReread, which guards against a lost wake-up and must reach Redis.
func (r *Reader) Stream(ctx context.Context, userID int64, token string, saleID int64) (domain.ReservationView, int64, error) {
	v, err := r.readView(ctx, userID, token, saleID, false, false)
	return v.View, sales.StatusSeq(v.View.Status), err
}

// readView is ReadSeq's; dbWhenRedisFails says whether the database
// answers when Redis does not answer in time in Redis mode, cached whether
// a live view may come from liveViews.
func (r *Reader) readView(ctx context.Context, userID int64, token string, saleID int64, dbWhenRedisFails, cached bool) (Owned, error) {
	if v, ok := r.ended.get(token); ok {
		r.count(SourceEnded)
		return r.owned(v, userID)
	}
	e, err := r.cache.Get(ctx, saleID)
	redisMode := err == nil && e.Sale().Mode == domain.ModeRedis
	switch {
	case redisMode && cached:
		if v, ok := r.live.get(token, saleID); ok {
			r.count(SourceLive)
			return r.owned(v, userID)
		}
	case err == nil && !redisMode:
		// Views cached while Redis owned the sale are stale now.
		r.live.invalidateSale(saleID)
	}
	var held *Owned
	if err == nil {
		seq := r.live.begin()
		got, ok := r.redisStatus(ctx, token, saleID)
		if !ok && redisMode && !dbWhenRedisFails {
			return Owned{}, ErrRedisBusy
		}
		switch {
		case ok && got.Record != nil && redisMode:
			v := Owned{Owner: got.Record.UserID, View: sales.ViewOfStatusRecord(token, saleID, got.Record)}
			r.ended.put(token, v)
			r.live.put(token, saleID, v, seq)
			r.count(SourceRedis)
			return r.owned(v, userID)
		case ok && got.TokenState == domain.TokenHeld:
			held = &Owned{Owner: got.Owner, View: domain.ReservationView{Token: token, SaleID: saleID,
				Status: domain.StatusQueued, AmountCents: e.Sale().PriceCents}}
			if redisMode {
				// Not cached: the hold's state also changes by scripts
				// that announce nothing (advance, release).
				r.count(SourceRedis)
				return r.owned(*held, userID)
			}
		}
	}
	// Redis does not know the status, or its copy is stale because the
	// database path owns the sale: the row decides, and a hold the
	// workflow has not recorded yet is QUEUED.
	r.count(SourceDatabase)
	res, err := storedMayLag(ctx, r.st, token)
	if err != nil {
		r.logger.Warn("status read: database", "token", token, "err", err)
		return Owned{}, domain.Unavailable("reservation store unavailable")
	}
	if res == nil {
		if held != nil {
			return r.owned(*held, userID)
		}
		return Owned{}, domain.ErrNoReservation
	}
	v := Owned{Owner: res.UserID, View: res.View()}
	r.ended.put(token, v)
	return r.owned(v, userID)
}

func (r *Reader) owned(v Owned, userID int64) (Owned, error) {
	if v.Owner != userID {
		return Owned{}, domain.ErrNoReservation
	}
	return v, nil
}

// redisStatus reads the token's hold and status record (of the sale's
// current epoch); ok is false when Redis cannot answer now.
func (r *Reader) redisStatus(ctx context.Context, token string, saleID int64) (redisgateway.StatusRead, bool) {
	rctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	got, err := r.reads.get(rctx, saleID, token)
	if err != nil {
		r.logger.Warn("status read: redis", "sale", saleID, "err", err)
		return redisgateway.StatusRead{}, false
	}
	return got, true
}

// Where a read was answered from (Deps.Count's sources).
const (
	SourceEnded    = "ended_cache"
	SourceLive     = "live_cache"
	SourceRedis    = "redis"
	SourceDatabase = "database"
)

// Deps are what a Reader reads: the sale cache, Redis (through redisgateway, each
// call within RedisTimeout) and the ledger. Count receives each read's
// source.
type Deps struct {
	Cache        *salecache.Cache
	Redis        *redisgateway.Client
	Store        *store.Store
	RedisTimeout time.Duration
	Logger       *slog.Logger
	Count        func(source string)
}

// Reader answers status reads. Its cache of live views follows Redis's
// announcements, which Events hands to the subscription.
type Reader struct {
	cache   *salecache.Cache
	rdb     *redisgateway.Client
	st      *store.Store
	timeout time.Duration
	logger  *slog.Logger
	count   func(source string)
	ended   *endedViews
	live    *liveViews
	reads   *batcher[string, redisgateway.StatusRead]
	mine    *batcher[int64, redisgateway.UserReservations]
}

// NewReader is a Reader of d.
func NewReader(d Deps) *Reader {
	return &Reader{cache: d.Cache, rdb: d.Redis, st: d.Store, timeout: d.RedisTimeout, logger: d.Logger, count: d.Count,
		ended: newEndedViews(1 << 17), live: newLiveViews(d.Redis.Fences(), 1<<17),
		reads: newBatcher(d.Redis.ReadStatuses, d.RedisTimeout), mine: newBatcher(d.Redis.ReadUsersReservations, d.RedisTimeout)}
}

// KeepSales forgets what the reader keeps of each sale for which open is
// false (a retired sale: no reservation of it is live any more).
func (r *Reader) KeepSales(open func(saleID int64) bool) { r.live.keepSales(open) }

// SalesTracked is how many per-sale entries the reader holds: the floors
// of its live views and the sales with reads in flight.
func (r *Reader) SalesTracked() int {
	return r.live.salesTracked() + r.reads.size() + r.mine.size()
}

// Events are the hooks of the sales' event subscription
// (redisgateway.ListenStatusEvents): each announcement voids cached views, then
// wakes what follows the token (or every token, for a sale's new epoch or
// a new subscription).
func (r *Reader) Events(wakeToken func(token string), wakeAll func()) redisgateway.StatusEvents {
	live := r.live
	return redisgateway.StatusEvents{
		Token: func(saleID int64, token string) { live.invalidate(saleID, token); wakeToken(token) },
		Sale:  func(saleID int64) { live.invalidateSale(saleID); wakeAll() },
		Subscribed: func() {
			live.invalidateAll()
			wakeAll()
		},
		Fence:  live.fenced,
		Wanted: live.wantsFences,
		Resume: live.resume,
	}
}

// Settle waits until a change written to Redis before changed may be
// acknowledged (liveViews.settle).
func (r *Reader) Settle(ctx context.Context, changed time.Time) { r.live.settle(ctx, changed) }

// Fenced asks for fences and reports whether live views may be served now.
func (r *Reader) Fenced() bool {
	_, _ = r.live.get("", 0)
	return r.live.fresh(r.live.since(time.Now()))
}

// RedisReads is how many status scripts the Reader has sent.
func (r *Reader) RedisReads() int64 { return r.reads.calls.Load() }

// Stored reads a reservation's row; (nil, nil) when there is none.
func Stored(ctx context.Context, st *store.Store, token string) (*domain.Reservation, error) {
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	res, err := st.GetReservation(ctx, token)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read reservation %s: %w", token, err)
	}
	return res, nil
}

// storedMayLag is Stored for a status read: from the replica while it is
// fresh, from the primary when the replica does not have the row yet
// (store.ReadReservation), so a reservation just made is never "not
// found".
func storedMayLag(ctx context.Context, st *store.Store, token string) (*domain.Reservation, error) {
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	res, _, err := st.ReadReservation(ctx, token)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read reservation %s: %w", token, err)
	}
	return res, nil
}

// dbTimeout bounds one read of the ledger.
const dbTimeout = 5 * time.Second

// List is the caller's reservations of one sale, newest first, from
// Redis alone: the user index lists the user's tokens (redisgateway/mine_read.lua)
// and each is shown as Read would show it (its status record, its
// hold while QUEUED, or the cache of ended reservations). ok is false when
// Redis cannot answer for every reservation (the index incomplete, a token
// neither recorded nor held, the database path owning the sale, Redis
// unreachable): the database answers then.
func (r *Reader) List(ctx context.Context, userID, saleID int64, limit int) ([]domain.ReservationView, bool) {
	e, err := r.cache.Get(ctx, saleID)
	if err != nil {
		return nil, false
	}
	sale := e.Sale()
	if sale.Mode != domain.ModeRedis {
		return nil, false
	}
	rctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	got, err := r.mine.get(rctx, saleID, userID)
	if err != nil {
		r.logger.Warn("list reservations: redis", "sale_id", saleID, "err", err)
		return nil, false
	}
	if !got.Complete {
		return nil, false
	}
	views := make([]domain.ReservationView, 0, min(len(got.Tokens), limit))
	for i := len(got.Tokens) - 1; i >= 0 && len(views) < limit; i-- {
		t := got.Tokens[i]
		var v Owned
		switch {
		case t.Record != nil:
			v = Owned{Owner: t.Record.UserID, View: sales.ViewOfStatusRecord(t.Token, saleID, t.Record)}
			r.ended.put(t.Token, v)
		default:
			if ended, ok := r.ended.get(t.Token); ok {
				v = ended
			} else if t.TokenState == domain.TokenHeld {
				v = Owned{Owner: t.Owner, View: domain.ReservationView{Token: t.Token, SaleID: saleID,
					Status: domain.StatusQueued, AmountCents: sale.PriceCents}}
			} else {
				return nil, false
			}
		}
		if v.Owner != userID {
			return nil, false // not the index's user: trust the database
		}
		views = append(views, v.View)
	}
	return views, true
}
