package reservation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/store"
)

// How long the request path waits for a hold's record. Under a crowd a
// record waits behind its shard's groups (store/holdgroups.go), so its time
// grows with the queue while the database is healthy; a fixed bound turned
// a busy database's 202s into 503s. So the wait is judged by the database's
// progress: a record is given up once no hold record's round trip has
// answered for holdRecordStall, or for several typical round trips when
// they are slower, counted from the later of the record's start and the
// last answer; and in any case after holdRecordMax, so a request is
// answered well within a client's timeout.
const (
	holdRecordStall = 500 * time.Millisecond
	holdRecordMax   = 3 * time.Second
	// stallTrips: how many typical round trips without an answer tell a
	// stalled database from a slow one.
	stallTrips = 4
)

// errRecordStalled: the database answered no hold record for longer than
// its progress allows.
var errRecordStalled = errors.New("the database answered no hold record meanwhile")

// Holds records each Redis hold in MySQL before its 202 is answered, and
// the database decides it there (store.RecordRedisHold): one live or paid
// hold per user and sale, and a unit taken from the sale's buckets, so a
// Redis that lost writes (a failover, an AOF missing its tail) and grants
// a unit twice, or more units than exist, is overruled before any 202. The
// database path's quota counts the holds recorded before it opens, and it
// opens only after every instance has stopped sending reservations to
// Redis, so a hold recorded here is never sold twice: a burst's 202s are
// kept when Redis stalls right after it, however far the relay lags. The
// cost is one round trip per group of 202s that arrive together (the
// store group-commits new holds), bounded by the stock.
//
// A hold that is not recorded is not promised: it answers 503 (outcome
// unknown) and the client's retry with the same request_id replays it.
// That covers a quota that opened first, and a database that fails: a 202
// the database never saw could not be counted if Redis failed too before
// the relay recorded it. While inserts fail, one request at a time tries
// (failing probes) and the others answer 503 at once, so a database that
// is down or frozen adds no wait to the crowd, and the first insert that
// succeeds again opens the way for all.
type Holds struct {
	st     HoldLedger
	logger *slog.Logger
	// count counts an outcome: recorded, uncounted, failed, refused,
	// overruled or went_back.
	count func(outcome string)
	// index restores a refused holder's replay key in Redis, within
	// redisTimeout; nil: not restored.
	index        HoldIndex
	redisTimeout time.Duration
	// takeUnits reports whether a hold takes its unit when it is recorded
	// (Fleet.HoldsTakeUnits); nil: always.
	takeUnits func() bool
	// wentBackAt is when this instance last marked each sale whose Redis
	// went back in time (int64 -> time.Time): a mark a second is enough.
	wentBackAt sync.Map
	failing    atomic.Bool // the last insert failed
	probing    atomic.Bool // one request is trying while failing
}

// HoldLedger is where holds are recorded and decided: the database
// (store.Store).
type HoldLedger interface {
	RecordRedisHold(ctx context.Context, in domain.OrderInput, epoch, seq int64, unit bool) (store.HoldRecord, error)
	// HoldProgress: when a hold record's round trip last answered, and
	// how long one typically takes.
	HoldProgress() (last time.Time, roundTrip time.Duration)
	Ping(ctx context.Context) error
	// MarkRedisWentBack asks the worker to rebuild the sale in Redis from
	// the database (store.MarkRedisWentBack).
	MarkRedisWentBack(ctx context.Context, saleID int64) error
}

// newHolds is a recorder on st; count receives each outcome.
func newHolds(st HoldLedger, logger *slog.Logger, count func(outcome string)) *Holds {
	return &Holds{st: st, logger: logger, count: count}
}

// Promise records a Redis hold numbered seq by Redis (0: unknown) and
// answers it: nil when it may be answered 202, the database's refusal
// (domain.ErrAlreadyHolds, domain.ErrSoldOut) when it overruled Redis, or
// domain.ErrOutcomeUnknown when it is not recorded (503).
func (h *Holds) Promise(ctx context.Context, in domain.OrderInput, epoch, seq int64) error {
	if h.failing.Load() {
		if !h.probing.CompareAndSwap(false, true) {
			h.count("refused")
			return domain.ErrOutcomeUnknown
		}
		defer h.probing.Store(false)
	}
	rec, err := h.insert(ctx, in, epoch, seq)
	switch {
	case err != nil:
		return domain.ErrOutcomeUnknown
	case rec.Refused != nil:
		return rec.Refused
	case !rec.Counted:
		h.count("uncounted")
		h.logger.WarnContext(ctx, "a redis hold met the database path's open quota; outcome unknown", "sale_id", in.SaleID)
		return domain.ErrOutcomeUnknown
	}
	return nil
}

// Ready reports whether holds can be recorded now. While inserts fail, one
// caller at a time asks the database (a ping) and reopens the way when it
// answers: a waitlist hand-over, which no 503 can take back, is made only
// when its record can follow at once.
func (h *Holds) Ready(ctx context.Context) bool {
	if !h.failing.Load() {
		return true
	}
	if !h.probing.CompareAndSwap(false, true) {
		return false
	}
	defer h.probing.Store(false)
	pctx, cancel := context.WithTimeout(ctx, holdRecordStall)
	defer cancel()
	if err := h.st.Ping(pctx); err != nil {
		return false
	}
	h.failing.Store(false)
	return true
}

// Record records a hold made without a 202 (a waitlist hand-over); a
// failure counts like Promise's (the relay records the hold later). A hold
// the database refuses ends FAILED, and its workflow releases it in Redis.
func (h *Holds) Record(ctx context.Context, in domain.OrderInput, epoch int64) error {
	rec, err := h.insert(ctx, in, epoch, 0)
	if err == nil && !rec.Counted {
		h.count("recorded") // a hand-over is recorded either way
	}
	return err
}

// insert records the hold and keeps the failing flag and the outcome
// counts; Promise and Record share it.
func (h *Holds) insert(ctx context.Context, in domain.OrderInput, epoch, seq int64) (store.HoldRecord, error) {
	rctx, cancel := h.recordContext(ctx)
	defer cancel()
	rec, err := h.st.RecordRedisHold(rctx, in, epoch, seq, h.takeUnits == nil || h.takeUnits())
	if cause := context.Cause(rctx); err != nil && errors.Is(cause, errRecordStalled) {
		err = fmt.Errorf("%w: %w", err, cause)
	}
	if err != nil {
		if !h.failing.Swap(true) {
			h.logger.WarnContext(ctx, "recording a redis hold failed; holds answer 503 and hand-overs wait until an insert succeeds", "sale_id", in.SaleID, "err", err)
		}
		h.count("failed")
		return rec, err
	}
	if h.failing.Swap(false) {
		h.logger.InfoContext(ctx, "recording redis holds works again", "sale_id", in.SaleID)
	}
	if rec.WentBack {
		h.redisWentBack(ctx, in.SaleID)
	}
	switch {
	case rec.Refused != nil:
		h.count("overruled")
		h.logger.WarnContext(ctx, "the database overruled a redis hold", "sale_id", in.SaleID, "code", rec.Refused.Code)
		if rec.Holder != nil && h.index != nil {
			h.restoreHolderReplay(ctx, in, rec.Holder)
		}
	case rec.Counted:
		h.count("recorded")
	}
	return rec, nil
}

// recordContext is a record's context: it ends after holdRecordMax, or
// once the database has made no progress for as long as stallBound allows
// (errRecordStalled as its cause). The stall is checked by a timer's
// function, not a goroutine of each record's: a record mostly ends long
// before it fires.
func (h *Holds) recordContext(ctx context.Context) (context.Context, context.CancelFunc) {
	began := time.Now()
	ctx, cancelMax := context.WithTimeout(ctx, holdRecordMax)
	ctx, cancel := context.WithCancelCause(ctx)
	var t atomic.Pointer[time.Timer]
	var check func()
	check = func() {
		if ctx.Err() != nil {
			return
		}
		left := h.stallLeft(began)
		if left <= 0 {
			cancel(errRecordStalled)
			return
		}
		t.Store(time.AfterFunc(left, check))
	}
	t.Store(time.AfterFunc(h.stallLeft(began), check))
	return ctx, func() {
		t.Load().Stop()
		cancel(nil)
		cancelMax()
	}
}

// stallLeft is how long a record begun at began may still wait for the
// database to answer a hold record.
func (h *Holds) stallLeft(began time.Time) time.Duration {
	last, trip := h.st.HoldProgress()
	return time.Until(later(began, last).Add(stallBound(trip)))
}

// stallBound is how long without an answer tells a stalled database, when
// a round trip typically takes trip.
func stallBound(trip time.Duration) time.Duration {
	return min(max(holdRecordStall, stallTrips*trip), holdRecordMax)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// restoreHolderReplay puts back the replay key of the reservation a holder
// holds, which Redis lost with the holder's other writes (it granted a
// refused hold, or refused the holder's own request for their mark), so a
// repeat of the holder's own request needs no database. Best effort: the
// rebuild writes it too.
func (h *Holds) restoreHolderReplay(ctx context.Context, in domain.OrderInput, holder *store.LiveHold) {
	rctx, cancel := context.WithTimeout(ctx, h.redisTimeout)
	defer cancel()
	restored, err := h.index.RestoreReplay(rctx, in.SaleID, in.UserID, holder.RequestID, holder.Token)
	switch {
	case err != nil:
		requestLog(ctx, h.logger).WarnContext(ctx, "restore a holder's replay key", "sale_id", in.SaleID, "err", err)
	case restored:
		requestLog(ctx, h.logger).InfoContext(ctx, "restored a holder's replay key Redis had lost", "sale_id", in.SaleID, "token", holder.Token)
	}
}

// wentBackEvery bounds how often an instance marks one sale whose Redis
// went back in time: the holds that follow until the rebuild find it too.
const wentBackEvery = time.Second

// redisWentBack hears of a hold whose number Redis had handed out before:
// Redis lost acknowledged writes (a failover to a lagging replica, an AOF
// missing its tail). The database decided the hold all the same; the sale
// is marked for the worker, which rebuilds it in Redis from the database.
func (h *Holds) redisWentBack(ctx context.Context, saleID int64) {
	h.count("went_back")
	now := time.Now()
	if last, ok := h.wentBackAt.Load(saleID); ok && now.Sub(last.(time.Time)) < wentBackEvery {
		return
	}
	h.wentBackAt.Store(saleID, now)
	requestLog(ctx, h.logger).ErrorContext(ctx, "redis went back in time: a hold number the database already has; the sale will be rebuilt from the database", "sale_id", saleID)
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), holdRecordStall)
	defer cancel()
	if err := h.st.MarkRedisWentBack(mctx, saleID); err != nil {
		requestLog(ctx, h.logger).ErrorContext(ctx, "mark the sale for a rebuild from the database", "sale_id", saleID, "err", err)
		h.wentBackAt.Delete(saleID)
	}
}
