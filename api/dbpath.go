package api

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/sales"
	"github.com/seckill/seckill/store"
)

// dbPathTimeout bounds one database-path reservation.
const dbPathTimeout = 3 * time.Second

// saleCacheLag bounds how long an instance takes to learn a sale's new
// mode (sales.ModeLag).
const saleCacheLag = sales.ModeLag

// dbPathHoldOff is how long after a switch the database path waits before
// it sells: the last Redis reservation any instance sends before it learns
// of the switch carries a deadline at most RedisTimeout + ClockSkew after
// it was sent, and Redis's clock may lag by ClockSkew more.
func (s *server) dbPathHoldOff() time.Duration {
	return saleCacheLag + s.cfg.RedisTimeout + 2*s.cfg.ClockSkew
}

// reserveViaDatabase is the reservation path while Redis is out: one
// transaction in MySQL (store.ReserveInDB), behind the lowered fallback rate
// and a bound on the transactions in flight, so the database is not
// flooded: beyond SECKILL_FALLBACK_RPS, or with SECKILL_FALLBACK_IN_FLIGHT
// transactions already running, clients get 429 at once (nothing was
// tried, so a retry may use a new request_id or the same), not a queue in
// front of a slow database. The first database-path reservation of a sale
// switches the sale's mode in MySQL with a new epoch; every instance learns
// it within a second and stops using Redis for that sale.
func (s *server) reserveViaDatabase(c *fiber.Ctx, entry *saleEntry, sale *domain.Sale, in domain.OrderInput) error {
	release, refused := s.dbAdmit.admit(time.Now())
	if refused != "" {
		s.m.reject(layerDatabase, refused)
		return s.rateLimited(c, s.cfg.FallbackRPS)
	}
	defer release()
	ctx, cancel := context.WithTimeout(c.UserContext(), dbPathTimeout)
	defer cancel()
	if sale.Mode == domain.ModeRedis {
		switched, err := sales.SwitchToDatabase(ctx, s.st, sale.ID, s.dbPathHoldOff(), s.cfg.ModeMinDwell)
		if err != nil {
			s.m.reject(layerDatabase, "error")
			s.log(c).Error("switch sale to database mode", "sale_id", sale.ID, "err", err)
			return unavailable(c, 1, "neither Redis nor the database can take the reservation now; retry with the same request_id")
		}
		if switched.Mode == domain.ModeRedis {
			// Back on Redis less than SECKILL_MODE_MIN_DWELL ago.
			s.m.reject(layerDatabase, "dwell")
			return unavailable(c, 1, "Redis is failing and the sale stays on it a moment longer; retry with the same request_id")
		}
		s.log(c).Warn("sale moved to the database path", "sale_id", sale.ID, "epoch", switched.ModeEpoch)
		entry.storeWritten(switched)
		entry.mark.Store(nil)
	}
	res, replay, err := s.st.ReserveInDBWithSkew(ctx, in, s.cfg.ClockSkew)
	switch {
	case err == nil:
	case errors.Is(err, store.ErrAlreadyPurchased):
		s.m.reject(layerDatabase, "already")
		return sendError(c, domain.EAlreadyPurchased, "this user already holds a unit of this sale")
	case errors.Is(err, store.ErrQuotaExhausted), errors.Is(err, store.ErrNoStock):
		s.m.reject(layerDatabase, "sold_out")
		return sendError(c, domain.ESoldOut, "sold out")
	case errors.As(err, new(*domain.Error)):
		// The sale as it is now: paused, stopped or out of its window.
		s.m.reject(layerDatabase, domain.ErrorCode(err))
		return sendErr(c, err)
	case errors.Is(err, store.ErrNotSellingYet):
		// Redis holds sent before the switch may still be taken: the
		// database path waits them out rather than sell their units.
		s.m.reject(layerDatabase, "not_ready")
		return unavailable(c, 1, "the sale is moving to the database path; retry with the same request_id")
	case errors.Is(err, store.ErrNotDatabaseMode):
		// The sale is going back to Redis (resync): a moment's pause.
		s.m.reject(layerDatabase, "not_ready")
		return unavailable(c, 1, "the sale is switching back to Redis; retry with the same request_id")
	default:
		s.m.reject(layerDatabase, "error")
		s.log(c).Error("reserve: database path", "sale_id", sale.ID, "err", err)
		return outcomeUnknown(c)
	}
	if replay {
		s.m.reject(layerDatabase, "replay")
		return s.accepted(c, res.Token, sale.ID, in.RequestID)
	}
	s.m.reject(layerDatabase, "ok")
	s.starter.enqueue(c.UserContext(), in)
	return s.accepted(c, res.Token, sale.ID, in.RequestID)
}

// dbAdmission admits the database path's transactions: at most
// SECKILL_FALLBACK_IN_FLIGHT in flight (slots) and at most
// SECKILL_FALLBACK_RPS (rate). A request it refuses is refused at once. A
// slot is taken before the rate's token, so a request refused because
// every slot is in flight spends none of the rate: the rate then admits
// as many transactions as it allows, not fewer for each refusal the slots
// made.
type dbAdmission struct {
	rate  *rate.Limiter
	slots chan struct{}
}

// newDBAdmission is the admission of a path of rps transactions a second
// (0: unlimited), inFlight at once. The rate's burst, a tenth of a second's
// worth, is at most the slots: a burst they would refuse is not admitted.
func newDBAdmission(rps float64, inFlight int) *dbAdmission {
	inFlight = max(inFlight, 1)
	return &dbAdmission{
		rate:  rate.NewLimiter(limitOf(rps), min(max(int(rps/10), 1), inFlight)),
		slots: make(chan struct{}, inFlight),
	}
}

// admit takes a slot and a token of the rate at now, and returns the
// slot's release, or why it refused: "saturated" (no slot free) or
// "rate_limited" (the rate is spent).
func (a *dbAdmission) admit(now time.Time) (release func(), refused string) {
	select {
	case a.slots <- struct{}{}:
	default:
		return nil, "saturated"
	}
	if !a.rate.AllowN(now, 1) {
		<-a.slots
		return nil, "rate_limited"
	}
	return func() { <-a.slots }, ""
}

// saleModeCollector exports, per cached sale, whether it is in database
// mode (1) or not (0).
type saleModeCollector struct {
	cache *saleCache
	desc  *prometheus.Desc
}

func newSaleModeCollector(cache *saleCache) *saleModeCollector {
	return &saleModeCollector{cache: cache, desc: prometheus.NewDesc("seckill_sale_database_mode",
		"1 while the sale takes reservations on the database path (or is switching back), else 0.", []string{"sale"}, nil)}
}

func (c *saleModeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *saleModeCollector) Collect(ch chan<- prometheus.Metric) {
	c.cache.mu.RLock()
	defer c.cache.mu.RUnlock()
	for id, e := range c.cache.entries {
		v := 0.0
		if s := e.sale.Load(); s != nil && s.Mode != domain.ModeRedis {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, strconv.FormatInt(id, 10))
	}
}
