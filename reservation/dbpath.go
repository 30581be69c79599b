package reservation

import (
	"context"
	"errors"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/redisgateway"
)

// dbPathTimeout bounds one database-path reservation.
const dbPathTimeout = 3 * time.Second

var (
	errNoPath = domain.Unavailable("neither Redis nor the database can take the reservation now; retry with the same request_id")
	errDwell  = domain.Unavailable("Redis is failing and the sale stays on it a moment longer; retry with the same request_id")
)

// reserveInDatabase is the reservation path while Redis is out: one
// transaction in MySQL (store.ReserveInDB), behind the degraded mode's
// limiter, so the database is not flooded: a request it refuses gets 429
// at once (nothing was tried, so a retry may use a new request_id or the
// same), not a queue in front of a slow database. The first database-path
// reservation of a sale switches the sale's mode in MySQL with a new
// epoch; every instance learns it within a second and stops using Redis
// for that sale.
func (s *Service) reserveInDatabase(ctx context.Context, r Request, token string) (Answer, error) {
	release, refusal, refused := s.degraded.Acquire(time.Now())
	if refusal != nil {
		return Answer{Layer: LayerDatabase, Reason: refused}, refusal
	}
	defer release()
	dbCtx, cancel := context.WithTimeout(ctx, dbPathTimeout)
	defer cancel()
	if r.Sale.Mode == domain.ModeRedis {
		if reason, err := s.switchToDatabase(dbCtx, r); err != nil {
			return Answer{Layer: LayerDatabase, Reason: reason}, err
		}
	}
	in := domain.DatabasePathInput(token, r.SaleID, r.UserID, r.RequestID)
	res, replay, err := s.ledger.ReserveInDBWithSkew(dbCtx, in, s.set.ClockSkew)
	if err != nil {
		reason, refusal := s.databaseRefusal(ctx, r, err)
		return Answer{Layer: LayerDatabase, Reason: reason}, refusal
	}
	if replay {
		return Answer{Token: res.Token, Layer: LayerDatabase, Reason: "replay"}, nil
	}
	s.starter.Enqueue(ctx, in) // the request's context: the start outlives the transaction's
	return Answer{Token: res.Token, Layer: LayerDatabase, Reason: "ok"}, nil
}

// switchToDatabase moves a sale this instance still sees on Redis to the
// database path, unless it came back to Redis too recently.
func (s *Service) switchToDatabase(ctx context.Context, r Request) (reason string, err error) {
	switched, err := s.degraded.SwitchToDatabase(ctx, r.SaleID)
	if err != nil {
		s.log(ctx).ErrorContext(ctx, "switch sale to database mode", "sale_id", r.SaleID, "err", err)
		return "error", errNoPath
	}
	if switched.Mode == domain.ModeRedis {
		// Back on Redis too recently (the least dwell in a mode).
		return "dwell", errDwell
	}
	s.log(ctx).WarnContext(ctx, "sale moved to the database path", "sale_id", r.SaleID, "epoch", switched.ModeEpoch)
	r.Cached.Moved(switched)
	return "", nil
}

// databaseRefusal names a database-path transaction's error and answers
// it.
func (s *Service) databaseRefusal(ctx context.Context, r Request, err error) (reason string, refusal error) {
	var refused *domain.Error
	switch {
	case errors.Is(err, domain.ErrSaleMoving):
		// Redis holds sent before the switch may still be taken: the
		// database path waits them out rather than sell their units.
		return "not_ready", domain.ErrSaleMoving
	case errors.Is(err, domain.ErrSaleResyncing):
		// The sale is going back to Redis (resync): a moment's pause.
		return "not_ready", domain.ErrSaleResyncing
	case errors.As(err, &refused):
		// The store's other refusals are the domain's: sold out, already
		// holding one, the sale paused, stopped or out of its window.
		// The metric names them as the script's outcomes do.
		return outcomeOf(refused.Code), refused
	}
	s.log(ctx).ErrorContext(ctx, "reserve: database path", "sale_id", r.SaleID, "err", err)
	return "error", domain.ErrOutcomeUnknown
}

// outcomeOf names a refusal in the filter metric as the script's outcome
// of the same refusal is named.
func outcomeOf(code string) string {
	switch code {
	case domain.ESoldOut:
		return redisgateway.OutcomeSoldOut
	case domain.EAlreadyPurchased:
		return redisgateway.OutcomeAlready
	}
	return code
}
