package reservation

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/seckill/seckill/domain"
)

// holdRecordTimeout bounds recording a Redis hold on the request path.
const holdRecordTimeout = 500 * time.Millisecond

// Holds records each Redis hold in MySQL before its 202 is
// answered (store.RecordRedisHold). The database path's quota counts the
// Redis holds recorded before it opens, and it opens only after every
// instance has stopped sending reservations to Redis, so a hold recorded
// here is never sold twice: a burst's 202s are kept when Redis stalls
// right after it, however far the relay lags. The cost is one insert per
// 202, bounded by the stock.
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
	// count counts an outcome: recorded, uncounted, failed or refused.
	count   func(outcome string)
	failing atomic.Bool // the last insert failed
	probing atomic.Bool // one request is trying while failing
}

// HoldLedger is where holds are recorded: the database (store.Store).
type HoldLedger interface {
	RecordRedisHold(ctx context.Context, in domain.OrderInput, epoch int64) (counted bool, err error)
	Ping(ctx context.Context) error
}

// newHolds is a recorder on st; count receives each outcome.
func newHolds(st HoldLedger, logger *slog.Logger, count func(outcome string)) *Holds {
	return &Holds{st: st, logger: logger, count: count}
}

// Promise reports whether a Redis hold may be answered 202: once it is
// recorded where the database path's quota counts it.
func (h *Holds) Promise(ctx context.Context, in domain.OrderInput, epoch int64) bool {
	if h.failing.Load() {
		if !h.probing.CompareAndSwap(false, true) {
			h.count("refused")
			return false
		}
		defer h.probing.Store(false)
	}
	counted, err := h.insert(ctx, in, epoch)
	switch {
	case err != nil:
		return false
	case !counted:
		h.count("uncounted")
		h.logger.WarnContext(ctx, "a redis hold met the database path's open quota; outcome unknown", "sale_id", in.SaleID)
		return false
	}
	return true
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
	pctx, cancel := context.WithTimeout(ctx, holdRecordTimeout)
	defer cancel()
	if err := h.st.Ping(pctx); err != nil {
		return false
	}
	h.failing.Store(false)
	return true
}

// Record records a hold made without a 202 (a waitlist hand-over); a
// failure counts like Promise's (the relay records the hold later).
func (h *Holds) Record(ctx context.Context, in domain.OrderInput, epoch int64) error {
	counted, err := h.insert(ctx, in, epoch)
	if err == nil && !counted {
		h.count("recorded") // a hand-over is recorded either way
	}
	return err
}

// insert records the hold and keeps the failing flag and the outcome
// counts; Promise and Record share it.
func (h *Holds) insert(ctx context.Context, in domain.OrderInput, epoch int64) (counted bool, err error) {
	rctx, cancel := context.WithTimeout(ctx, holdRecordTimeout)
	defer cancel()
	counted, err = h.st.RecordRedisHold(rctx, in, epoch)
	if err != nil {
		if !h.failing.Swap(true) {
			h.logger.WarnContext(ctx, "recording a redis hold failed; holds answer 503 and hand-overs wait until an insert succeeds", "sale_id", in.SaleID, "err", err)
		}
		h.count("failed")
		return false, err
	}
	if h.failing.Swap(false) {
		h.logger.InfoContext(ctx, "recording redis holds works again", "sale_id", in.SaleID)
	}
	if counted {
		h.count("recorded")
	}
	return counted, nil
}
