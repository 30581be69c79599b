package sales

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/store"
)

// Which store failed an operation that touches both (match with
// errors.Is; the cause is wrapped too).
var (
	// ErrDatabase: the database failed; nothing is left half done.
	ErrDatabase = domain.Unavailable("database unavailable")
	// ErrRedis: Redis failed before the database changed; nothing changed.
	ErrRedis = domain.Unavailable("redis unavailable")
	// ErrRedisBehind: the database changed but Redis did not follow; a
	// retry under the same ref, FollowStock or FollowControl bring Redis
	// up to date. A caller that does not follow it answers it as a 503.
	ErrRedisBehind = domain.Unavailable("the change is recorded but redis has not followed it yet; retry")
)

// SetControl pauses, resumes or stops a sale: the database holds the
// decision, then the sale's Redis metadata follows when the sale is warmed
// (redisgateway/control.lua), so the reserve script enforces it at once. Errors:
// store.ErrNotFound, ErrDatabase, or ErrRedisBehind with the sale
// (recorded, but Redis did not take it: FollowControl, by the API and each
// second by the worker, brings Redis to the database's control).
func SetControl(ctx context.Context, st *store.Store, rdb *redisgateway.Client, saleID int64, to domain.SaleControl) (*domain.Sale, error) {
	sale, err := st.SetSaleControl(ctx, saleID, to)
	if errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("set control of sale %d: %w: %w", saleID, ErrDatabase, err)
	}
	if _, err := rdb.SetControl(ctx, saleID, string(to)); err != nil {
		return sale, fmt.Errorf("set control of sale %d in redis: %w: %w", saleID, ErrRedisBehind, err)
	}
	return sale, nil
}

// FollowControl writes the database's control of each sale (read now) into
// Redis where the sale is warmed; an unchanged control costs Redis no write.
func FollowControl(ctx context.Context, st *store.Store, rdb *redisgateway.Client, saleIDs ...int64) error {
	for _, id := range saleIDs {
		sale, err := st.GetSale(ctx, id)
		if err != nil {
			return fmt.Errorf("follow control of sale %d: %w", id, err)
		}
		if _, err := rdb.SetControl(ctx, id, string(sale.Control)); err != nil {
			return fmt.Errorf("follow control of sale %d: %w", id, err)
		}
	}
	return nil
}

// followControl makes Redis's control of a sale the database's after a
// script (warm-up, rebuild) wrote the control it had read earlier: a pause
// or resume committed in between wrote Redis before the script did, and the
// script overwrote it (a resume would answer 200 and the sale stay
// paused). A change committed after the read here writes Redis
// itself, after its database write, so it is not undone.
func followControl(ctx context.Context, st *store.Store, rdb *redisgateway.Client, saleID int64, written domain.SaleControl) error {
	for range 3 {
		sale, err := st.GetSale(ctx, saleID)
		if err != nil {
			return fmt.Errorf("follow control of sale %d: %w", saleID, err)
		}
		if sale.Control == written {
			return nil
		}
		if _, err := rdb.SetControl(ctx, saleID, string(sale.Control)); err != nil {
			return fmt.Errorf("follow control of sale %d: %w", saleID, err)
		}
		written = sale.Control
	}
	return fmt.Errorf("follow control of sale %d: still changing", saleID)
}

// AdjustStock adds units to a sale (delta > 0) or withdraws unsold ones
// (delta < 0), in the database's buckets and in Redis's stock, under ref
// (a retry with the same ref changes nothing; "" for a fresh one).
//
// An addition is committed to the database with a pending row
// (stock_redis_pending), then applied to Redis under its ref, which
// adjust.lua applies once, also when a repair or rebuild copied the buckets
// (with this addition) into Redis meanwhile. A Redis failure then is
// ErrRedisBehind, which is a success for the caller: FollowStock (here at
// once, by the API in the background, by the worker each second) applies
// the pending row until Redis has it. While it lags Redis holds fewer units
// than the database, never more, so nothing is oversold.
//
// A withdrawal first applies the sale's pending additions, then takes the
// units from Redis, so none of them can be reserved meanwhile, then from
// the database; when the database refuses, the units go back to Redis. It
// never commits with Redis down (ErrRedis): the contract's rule, never
// below what is held or sold, is checked where the holds are.
// Errors: domain.ErrInsufficient, ErrRedis, ErrDatabase, ErrRedisBehind.
func AdjustStock(ctx context.Context, st *store.Store, rdb *redisgateway.Client, saleID, delta int64, ref string) error {
	if ref == "" {
		ref = "adjust-" + ulid.Make().String()
	}
	if delta > 0 {
		if err := st.AdjustStock(ctx, saleID, delta, ref); err != nil {
			return fmt.Errorf("adjust stock of sale %d in the database: %w: %w", saleID, ErrDatabase, err)
		}
		if _, err := FollowStock(ctx, st, rdb, saleID); err != nil {
			return fmt.Errorf("adjust stock of sale %d in redis after the database: %w: %w", saleID, ErrRedisBehind, err)
		}
		return nil
	}
	// A withdrawal repeated under its ref (an Idempotency-Key's write taken
	// over from a dead instance) must not take Redis's units again.
	if done, err := st.Adjusted(ctx, ref); err != nil || done {
		if err != nil {
			return fmt.Errorf("adjust stock of sale %d: %w: %w", saleID, ErrDatabase, err)
		}
		return nil
	}
	if _, err := FollowStock(ctx, st, rdb, saleID); err != nil {
		return fmt.Errorf("adjust stock of sale %d: %w: %w", saleID, ErrRedis, err)
	}
	outcome, _, err := rdb.Adjust(ctx, saleID, delta, "")
	if err != nil {
		return fmt.Errorf("adjust stock of sale %d in redis: %w: %w", saleID, ErrRedis, err)
	}
	if outcome == redisgateway.AdjustInsufficient {
		return domain.ErrInsufficient
	}
	if err := st.AdjustStock(ctx, saleID, delta, ref); err != nil {
		if withdrawnAfterAll(ctx, st, ref, err) {
			return nil
		}
		var gerr error
		if outcome == redisgateway.AdjustOK {
			// Give the units back to Redis: the database refused them.
			_, _, gerr = rdb.Adjust(context.WithoutCancel(ctx), saleID, -delta, "")
		}
		if errors.Is(err, domain.ErrInsufficient) {
			err = domain.ErrInsufficient // a bare refusal: an answer, not a failure
		} else {
			err = fmt.Errorf("adjust stock of sale %d in the database: %w: %w", saleID, ErrDatabase, err)
		}
		if gerr != nil {
			return fmt.Errorf("%w (and giving %d units back to redis: %v)", err, -delta, gerr)
		}
		return err
	}
	return nil
}

// withdrawnAfterAll reads back a withdrawal whose database write failed
// with a fault of the link or the node (an attempt's answer lost, its
// retries failing after it):
// if it committed, Redis keeps the units it took, or Redis would hold
// units the database no longer has. A read that fails too leaves the
// withdrawal undone, as a refusal would: the database decides every hold,
// so units Redis holds beyond the buckets are refused, never sold.
func withdrawnAfterAll(ctx context.Context, st *store.Store, ref string, err error) bool {
	if errors.Is(err, domain.ErrInsufficient) || store.Classify(err) == store.FaultNone {
		return false
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	done, rerr := st.Adjusted(rctx, ref)
	return rerr == nil && done
}

// notReadyGrace is how long a pending addition to a sale that Redis does
// not hold is kept: a warm-up that read the buckets before the addition
// committed may still be writing Redis; later, a warm-up or rebuild copies
// the buckets, which include it.
const notReadyGrace = time.Minute

// FollowStock applies the pending stock additions of a sale (of every sale
// when saleID is 0) to Redis, oldest first, and answers how many Redis
// took. Each is applied once under its ref, so two followers racing, or a
// follower after a rebuild, add nothing twice.
func FollowStock(ctx context.Context, st *store.Store, rdb *redisgateway.Client, saleID int64) (int, error) {
	pending, err := st.PendingAdditions(ctx, saleID, 100)
	if err != nil {
		return 0, fmt.Errorf("follow stock: %w", err)
	}
	n := 0
	for _, p := range pending {
		outcome, _, err := rdb.Adjust(ctx, p.SaleID, p.Delta, p.Ref)
		if err != nil {
			return n, fmt.Errorf("follow stock of sale %d: %w", p.SaleID, err)
		}
		if outcome == redisgateway.AdjustNotReady && time.Since(p.CreatedAt) < notReadyGrace {
			continue
		}
		if err := st.AdditionApplied(ctx, p.Ref); err != nil {
			return n, fmt.Errorf("follow stock of sale %d: %w", p.SaleID, err)
		}
		n++
	}
	return n, nil
}
