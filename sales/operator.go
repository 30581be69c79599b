package sales

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/reqid"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/salecache"
	"github.com/seckill/seckill/store"
	"github.com/seckill/seckill/temporalgateway"
)

// followFor bounds an instance's own retries of a change Redis has not
// followed yet (the worker's follower goes on after it).
const followFor = 2 * time.Minute

// OperatorDeps are what the operators' use cases need. Temporal may be nil
// (no sale workflow is started; the worker's sweeper starts it). Go runs
// background work the server waits for at shutdown; Stop closes then.
type OperatorDeps struct {
	Store     *store.Store
	Redis     *redisgateway.Client
	Temporal  client.Client
	TaskQueue string
	Cache     *salecache.Cache
	Logger    *slog.Logger
	Go        func(fn func())
	Stop      <-chan struct{}
}

// Operator is the operators' use cases on sales (the admin routes): each
// writes the database and Redis together, keeps this instance's sale
// cache in step at once, and, when the database changed but Redis did
// not, has Redis follow in the background. Refusals and failures are
// *domain.Error.
type Operator struct {
	d      OperatorDeps
	starts *saleStarts // nil without Temporal
}

// NewOperator is the operators' use cases of d.
func NewOperator(d OperatorDeps) *Operator {
	if d.Temporal == nil {
		return &Operator{d: d}
	}
	return newOperator(d, func(ctx context.Context, in domain.SaleInput) error {
		return temporalgateway.StartSale(ctx, d.Temporal, d.TaskQueue, in)
	}, saleStartQueue)
}

// newOperator is the operators' use cases of d, starting sale workflows
// with start from a queue of queued sales.
func newOperator(d OperatorDeps, start func(ctx context.Context, in domain.SaleInput) error, queued int) *Operator {
	return &Operator{d: d, starts: newSaleStarts(start, queued, d.Go, d.Stop, d.Logger)}
}

// Create stores a new sale (once per idempotency ref) and answers the
// stored row: what the database kept (time precision, text) is what every
// later read serves. The sale's workflow starts in the background.
func (o *Operator) Create(ctx context.Context, sale *domain.Sale, ref string) (*domain.Sale, error) {
	if err := o.d.Store.CreateSaleOnce(ctx, sale, ref); err != nil {
		reqid.Logger(ctx, o.d.Logger).Error("create sale", "err", err)
		return nil, domain.Unavailable("could not create the sale")
	}
	if stored, err := o.d.Store.GetSale(ctx, sale.ID); err == nil {
		sale = stored
	} else {
		reqid.Logger(ctx, o.d.Logger).Warn("create sale: read back; answering from the request", "sale_id", sale.ID, "err", err)
	}
	o.d.Cache.Put(sale)
	o.startWorkflow(ctx, sale)
	reqid.Logger(ctx, o.d.Logger).Info("sale created", "sale_id", sale.ID, "stock", sale.StockTotal)
	return sale, nil
}

// startWorkflow starts the sale's SaleWorkflow (warm-up ahead of the
// opening, reconciliation, tear-down) in the background, paced to what
// Temporal takes (saleStarts); a start not made there the worker's sweeper
// makes.
func (o *Operator) startWorkflow(reqCtx context.Context, sale *domain.Sale) {
	if o.starts != nil {
		o.starts.Enqueue(reqCtx, sale.ID)
	}
}

// Sale reads a sale for an operator (404 for an unknown one).
func (o *Operator) Sale(ctx context.Context, id int64) (*domain.Sale, error) {
	sale, err := o.d.Store.GetSale(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, domain.Errorf(domain.ENotFound, "no such sale")
	}
	if err != nil {
		reqid.Logger(ctx, o.d.Logger).Error("admin: get sale", "sale_id", id, "err", err)
		return nil, domain.Unavailable("database unavailable")
	}
	return sale, nil
}

// Warmup loads the sale's stock into Redis and answers it.
func (o *Operator) Warmup(ctx context.Context, id int64) (int64, error) {
	sale, err := o.Sale(ctx, id)
	if err != nil {
		return 0, err
	}
	outcome, redisStock, err := Warmup(ctx, o.d.Store, o.d.Redis, o.d.Temporal, sale.ID)
	if err != nil {
		reqid.Logger(ctx, o.d.Logger).Error("warmup", "sale_id", sale.ID, "err", err)
		return 0, domain.Unavailable("warm-up failed; retry")
	}
	if err := redisgateway.WarmupRefusal(outcome); err != nil {
		return 0, err
	}
	o.d.Cache.Put(sale).Warmed(redisStock)
	reqid.Logger(ctx, o.d.Logger).Info("sale warmed", "sale_id", sale.ID, "redis_stock", redisStock)
	return redisStock, nil
}

// SetControl pauses, resumes or stops a sale. Once the database holds the
// decision this instance enforces it at once from its cache, others
// within a second, and Redis follows.
func (o *Operator) SetControl(ctx context.Context, id int64, to domain.SaleControl) (domain.SaleView, error) {
	sale, err := SetControl(ctx, o.d.Store, o.d.Redis, id, to)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return domain.SaleView{}, domain.Errorf(domain.ENotFound, "no such sale")
	case errors.Is(err, ErrRedisBehind):
		reqid.Logger(ctx, o.d.Logger).Warn("set sale control in redis; following", "sale_id", id, "err", err)
		o.follow(func(ctx context.Context) error { return FollowControl(ctx, o.d.Store, o.d.Redis, id) })
	case err != nil:
		reqid.Logger(ctx, o.d.Logger).Error("set sale control", "sale_id", id, "err", err)
		return domain.SaleView{}, ErrDatabase
	}
	e := o.d.Cache.Put(sale)
	reqid.Logger(ctx, o.d.Logger).Info("sale control", "sale_id", id, "control", to)
	return sale.View(time.Now(), e.StockLeft(), e.Waiting()), nil
}

// AdjustStock adds delta units to a sale (a withdrawal when negative, of
// unsold units only), once per idempotency ref.
func (o *Operator) AdjustStock(ctx context.Context, id, delta int64, ref string) (domain.SaleView, error) {
	before, err := o.Sale(ctx, id)
	if err != nil {
		return domain.SaleView{}, err
	}
	if err := domain.CheckStockTotal(before.StockTotal, delta); err != nil {
		return domain.SaleView{}, err
	}
	if err := o.adjust(ctx, id, delta, ref); err != nil {
		return domain.SaleView{}, err
	}
	if delta > 0 {
		o.d.Cache.DropMark(id)
	}
	sale, err := o.d.Store.GetSale(ctx, id)
	if err != nil {
		// Committed: answer from what was read before, moved by delta.
		reqid.Logger(ctx, o.d.Logger).Warn("get sale after adjust; answering from the earlier read", "sale_id", id, "err", err)
		sale, sale.StockTotal = before, before.StockTotal+delta
	}
	e := o.d.Cache.Put(sale)
	e.SetStock(o.d.Cache.ReadStock(ctx, id))
	reqid.Logger(ctx, o.d.Logger).Info("stock adjusted", "sale_id", id, "delta", delta)
	return sale.View(time.Now(), e.StockLeft(), e.Waiting()), nil
}

// adjust writes the adjustment; a change the database holds but Redis
// does not yet is followed in the background and answered as done.
func (o *Operator) adjust(ctx context.Context, id, delta int64, ref string) error {
	err := AdjustStock(ctx, o.d.Store, o.d.Redis, id, delta, ref)
	if err != nil && err != domain.ErrInsufficient {
		// A bare refusal is an answer; anything else is logged (also a
		// refused withdrawal whose units did not go back to Redis).
		reqid.Logger(ctx, o.d.Logger).Error("adjust stock", "sale_id", id, "delta", delta, "err", err)
	}
	switch {
	case errors.Is(err, domain.ErrInsufficient):
		return domain.ErrInsufficient
	case errors.Is(err, ErrRedisBehind):
		o.follow(func(ctx context.Context) error {
			if _, err := FollowStock(ctx, o.d.Store, o.d.Redis, id); err != nil {
				return fmt.Errorf("follow stock of sale %d: %w", id, err)
			}
			o.d.Cache.DropMark(id)
			return nil
		})
	case errors.Is(err, ErrRedis):
		return ErrRedis
	case err != nil:
		return ErrDatabase
	}
	return nil
}

// Blacklist puts a user on the blacklist or takes them off, applied on
// this instance at once.
func (o *Operator) Blacklist(ctx context.Context, userID int64, on bool) error {
	if err := o.d.Store.SetBlacklisted(ctx, userID, on); err != nil {
		reqid.Logger(ctx, o.d.Logger).Error("blacklist", "user_id", userID, "err", err)
		return domain.Unavailable("database unavailable")
	}
	o.d.Cache.SetBlacklisted(userID, on)
	return nil
}

// follow retries fn in the background until it succeeds (or followFor
// passes, or the server stops: the worker's follower goes on), so a short
// Redis pause heals without an operator.
func (o *Operator) follow(fn func(ctx context.Context) error) {
	o.d.Go(func() {
		deadline := time.Now().Add(followFor)
		for wait := 100 * time.Millisecond; time.Now().Before(deadline); wait = min(2*wait, 5*time.Second) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			err := fn(ctx)
			cancel()
			if err == nil {
				return
			}
			select {
			case <-o.d.Stop:
				return
			case <-time.After(wait):
			}
		}
	})
}
