package api

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/store"
)

// Bounds of recording a Redis hold before its 202.
const (
	// holdRecordTimeout bounds the insert on the request path.
	holdRecordTimeout = 500 * time.Millisecond
	// holdRecordRest is how long after a failed insert the 202s go out
	// unrecorded (the relay records them from the inbox), so a database
	// that is down or frozen adds no wait to every 202.
	holdRecordRest = 5 * time.Second
)

// holdRecorder records each Redis hold in MySQL before its 202 is
// answered (store.RecordRedisHold). The database path's quota counts the
// Redis holds recorded before it opens, and it opens only after every
// instance has stopped sending reservations to Redis, so a hold recorded
// here is never sold twice: a burst's 202s are kept when Redis stalls
// right after it, however far the relay lags. The cost is one insert per
// 202, bounded by the stock. A hold the quota may not count (it opened
// first) answers "outcome unknown"; with the database failing, the 202
// goes out as the inbox alone holds it (Redis keeps selling through a
// database outage), which the quota then cannot count if Redis also fails
// before the relay records it.
type holdRecorder struct {
	st       *store.Store
	logger   *slog.Logger
	outcomes *prometheus.CounterVec
	failedAt atomic.Int64 // unix ns of the last failed insert
}

func newHoldRecorder(st *store.Store, logger *slog.Logger, outcomes *prometheus.CounterVec) *holdRecorder {
	return &holdRecorder{st: st, logger: logger, outcomes: outcomes}
}

// promise reports whether a Redis hold may be answered 202.
func (h *holdRecorder) promise(ctx context.Context, in domain.OrderInput, epoch int64) bool {
	if at := h.failedAt.Load(); at != 0 && time.Since(time.Unix(0, at)) < holdRecordRest {
		h.outcomes.WithLabelValues("skipped").Inc()
		return true
	}
	rctx, cancel := context.WithTimeout(ctx, holdRecordTimeout)
	defer cancel()
	counted, err := h.st.RecordRedisHold(rctx, in, epoch)
	switch {
	case err != nil:
		h.failedAt.Store(time.Now().UnixNano())
		h.outcomes.WithLabelValues("failed").Inc()
		h.logger.WarnContext(ctx, "recording a redis hold before its 202 failed; the relay records it", "sale_id", in.SaleID, "err", err)
		return true
	case !counted:
		h.outcomes.WithLabelValues("uncounted").Inc()
		h.logger.WarnContext(ctx, "a redis hold met the database path's open quota; outcome unknown", "sale_id", in.SaleID)
		return false
	}
	h.failedAt.Store(0)
	h.outcomes.WithLabelValues("recorded").Inc()
	return true
}

// acceptRedisHold answers a Redis hold (new, or a replay of one): 202 once
// it is recorded where the database path counts it, else 503.
func (s *server) acceptRedisHold(c *fiber.Ctx, a admission, token string) error {
	if !s.holds.promise(c.UserContext(), domain.RedisHoldInput(token, a.saleID, a.userID, a.requestID), a.sale.ModeEpoch) {
		return unavailable(c, 1, "reservation outcome unknown, retry with the same request_id")
	}
	return s.accepted(c, token, a.saleID, a.requestID)
}
