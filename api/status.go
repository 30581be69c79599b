package api

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/sales"
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
	m   map[string]ownedView
	max int
}

type ownedView struct {
	owner int64
	view  domain.ReservationView
	body  []byte // the view as JSON, rendered once for a cached view; nil otherwise
}

// rendered is v with its body, for a cache that serves it many times.
// A view always encodes; were it not to, the body stays nil and the
// handler encodes (and reports) it.
func (v ownedView) rendered() ownedView {
	if v.body == nil {
		if b, err := json.Marshal(v.view); err == nil {
			v.body = b
		}
	}
	return v
}

func newEndedViews(max int) *endedViews {
	return &endedViews{m: make(map[string]ownedView), max: max}
}

func (e *endedViews) get(token string) (ownedView, bool) {
	e.mu.RLock()
	v, ok := e.m[token]
	e.mu.RUnlock()
	return v, ok
}

func (e *endedViews) put(token string, v ownedView) {
	if !v.view.Status.Terminal() {
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

// statusView is the reservation's current view for its owner and the
// view's sequence number (sales.StatusSeq). Errors are *domain.Error
// (not_found, unavailable).
func (s *server) statusView(ctx context.Context, userID int64, token string, saleID int64) (domain.ReservationView, int64, error) {
	v, err := s.statusOwned(ctx, userID, token, saleID)
	return v.view, sales.StatusSeq(v.view.Status), err
}

// statusOwned is statusView's view with its rendered body when it came
// from a cache.
func (s *server) statusOwned(ctx context.Context, userID int64, token string, saleID int64) (ownedView, error) {
	return s.readView(ctx, userID, token, saleID, true, true)
}

// errRedisBusy: Redis did not answer a stream's re-read in time; the
// stream tries again later instead of asking the database.
var errRedisBusy = errors.New("status read: redis did not answer")

// streamView is an open stream's re-read: as statusView, except that a
// Redis that does not answer now (slow, unreachable) while it owns the
// sale gives errRedisBusy instead of a database read. The stream already
// showed a view, so waiting for Redis costs it nothing, where thousands of
// streams re-reading from MySQL whenever Redis is slow would load the one
// primary the order workflows need. The database still answers what Redis
// does not know (no record, no hold) and while the database path owns the
// sale. It never answers from the cache of live views: a stream re-reads
// when woken, which drops the token's cached view anyway, and every
// streamReread, which guards against a lost wake-up and must reach Redis.
func (s *server) streamView(ctx context.Context, userID int64, token string, saleID int64) (domain.ReservationView, int64, error) {
	v, err := s.readView(ctx, userID, token, saleID, false, false)
	return v.view, sales.StatusSeq(v.view.Status), err
}

// readView is statusView; dbWhenRedisFails says whether the database
// answers when Redis does not answer in time in Redis mode, cached whether
// a live view may come from liveViews.
func (s *server) readView(ctx context.Context, userID int64, token string, saleID int64, dbWhenRedisFails, cached bool) (ownedView, error) {
	if v, ok := s.ended.get(token); ok {
		s.m.statusReads.inc(sourceEnded)
		return s.owned(v, userID)
	}
	e, err := s.cache.Get(ctx, saleID)
	redisMode := err == nil && e.Sale().Mode == domain.ModeRedis
	switch {
	case redisMode && cached:
		if v, ok := s.live.get(token, saleID); ok {
			s.m.statusReads.inc(sourceLive)
			return s.owned(v, userID)
		}
	case err == nil && !redisMode:
		// Views cached while Redis owned the sale are stale now.
		s.live.invalidateSale(saleID)
	}
	var held *ownedView
	if err == nil {
		seq := s.live.begin()
		got, ok := s.redisStatus(ctx, token, saleID)
		if !ok && redisMode && !dbWhenRedisFails {
			return ownedView{}, errRedisBusy
		}
		switch {
		case ok && got.Record != nil && redisMode:
			v := ownedView{owner: got.Record.UserID, view: sales.ViewOfStatusRecord(token, saleID, got.Record)}
			s.ended.put(token, v)
			s.live.put(token, saleID, v, seq)
			s.m.statusReads.inc(sourceRedis)
			return s.owned(v, userID)
		case ok && got.TokenState == domain.TokenHeld:
			held = &ownedView{owner: got.Owner, view: domain.ReservationView{Token: token, SaleID: saleID,
				Status: domain.StatusQueued, AmountCents: e.Sale().PriceCents}}
			if redisMode {
				// Not cached: the hold's state also changes by scripts
				// that announce nothing (advance, release).
				s.m.statusReads.inc(sourceRedis)
				return s.owned(*held, userID)
			}
		}
	}
	// Redis does not know the status, or its copy is stale because the
	// database path owns the sale: the row decides, and a hold the
	// workflow has not recorded yet is QUEUED.
	s.m.statusReads.inc(sourceDatabase)
	r, err := s.dbReservation(ctx, token)
	if err != nil {
		s.logger.Warn("status read: database", "token", token, "err", err)
		return ownedView{}, domain.Unavailable("reservation store unavailable")
	}
	if r == nil {
		if held != nil {
			return s.owned(*held, userID)
		}
		return ownedView{}, errNoReservation
	}
	v := ownedView{owner: r.UserID, view: r.View()}
	s.ended.put(token, v)
	return s.owned(v, userID)
}

func (s *server) owned(v ownedView, userID int64) (ownedView, error) {
	if v.owner != userID {
		return ownedView{}, errNoReservation
	}
	return v, nil
}

// redisStatus reads the token's hold and status record (of the sale's
// current epoch); ok is false when Redis cannot answer now.
func (s *server) redisStatus(ctx context.Context, token string, saleID int64) (lua.StatusRead, bool) {
	rctx, cancel := context.WithTimeout(ctx, s.cfg.RedisTimeout)
	defer cancel()
	got, err := s.reads.get(rctx, saleID, token)
	if err != nil {
		s.logger.Warn("status read: redis", "sale", saleID, "err", err)
		return lua.StatusRead{}, false
	}
	return got, true
}

// initStatus prepares the status reads and starts the event fan-in.
func (s *server) initStatus() {
	s.ended = newEndedViews(1 << 17)
	s.live = newLiveViews(s.rdb.Fences(), 1<<17)
	s.reads = newStatusReads(s.rdb, s.cfg.RedisTimeout)
	s.mine = newMineReads(s.rdb, s.cfg.RedisTimeout)
	s.hub = newStatusHub(s)
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		s.hub.run(s.stop, s.rdb, s.logger)
	}()
}

// listViews is the caller's reservations of one sale, newest first, from
// Redis alone: the user index lists the user's tokens (lua/mine_read.lua)
// and each is shown as statusView would show it (its status record, its
// hold while QUEUED, or the cache of ended reservations). ok is false when
// Redis cannot answer for every reservation (the index incomplete, a token
// neither recorded nor held, the database path owning the sale, Redis
// unreachable): the database answers then.
func (s *server) listViews(ctx context.Context, userID, saleID int64, limit int) ([]domain.ReservationView, bool) {
	e, err := s.cache.Get(ctx, saleID)
	if err != nil {
		return nil, false
	}
	sale := e.Sale()
	if sale.Mode != domain.ModeRedis {
		return nil, false
	}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.RedisTimeout)
	defer cancel()
	got, err := s.mine.get(rctx, saleID, userID)
	if err != nil {
		s.logger.Warn("list reservations: redis", "sale_id", saleID, "err", err)
		return nil, false
	}
	if !got.Complete {
		return nil, false
	}
	views := make([]domain.ReservationView, 0, min(len(got.Tokens), limit))
	for i := len(got.Tokens) - 1; i >= 0 && len(views) < limit; i-- {
		t := got.Tokens[i]
		var v ownedView
		switch {
		case t.Record != nil:
			v = ownedView{owner: t.Record.UserID, view: sales.ViewOfStatusRecord(t.Token, saleID, t.Record)}
			s.ended.put(t.Token, v)
		default:
			if ended, ok := s.ended.get(t.Token); ok {
				v = ended
			} else if t.TokenState == domain.TokenHeld {
				v = ownedView{owner: t.Owner, view: domain.ReservationView{Token: t.Token, SaleID: saleID,
					Status: domain.StatusQueued, AmountCents: sale.PriceCents}}
			} else {
				return nil, false
			}
		}
		if v.owner != userID {
			return nil, false // not the index's user: trust the database
		}
		views = append(views, v.view)
	}
	return views, true
}
