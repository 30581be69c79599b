package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/store"
)

// StockRecorder copies open sales' Redis stock into the database: when
// Redis goes away the database path caps its sales by the last stock Redis
// was seen to hold, so the two paths together cannot oversell. Each tick
// it samples the sales the change feed names (a sale selling), the sales
// whose sample failed on the last tick, and a share of the others, each
// once per FullEvery: a tick's work follows what changed, not how many
// sales are open. A quiet sale's sample may be older than the database
// path accepts (store.MaxStockSampleAge), and a switch then holds its
// units back until the resync.
type StockRecorder struct {
	Redis     *redisgateway.Client
	Store     *store.Store
	Logger    *slog.Logger
	Every     time.Duration // 1s when zero
	FullEvery time.Duration // stockFullEvery when zero

	watch changeWatch
	// retry names the sales whose sample failed while the others of the
	// tick were recorded: the next tick samples them again.
	retry map[int64]bool
}

// Run records until ctx is cancelled.
func (s *StockRecorder) Run(ctx context.Context) {
	every := orDefault(s.Every, time.Second)
	outage := outageLog{logger: s.Logger, what: "stock recorder"}
	everyTick(ctx, every, false, func() {
		// One tick's work never outlives the next tick.
		tctx, cancel := context.WithTimeout(ctx, every)
		_, err := s.RecordOnce(tctx)
		cancel()
		outage.note(ctx, err)
	})
}

// outageLog logs a loop's failure once per outage, not every tick, and its
// recovery.
type outageLog struct {
	logger  *slog.Logger
	what    string
	failing bool
}

func (o *outageLog) note(ctx context.Context, err error) {
	switch {
	case err != nil && ctx.Err() == nil && !o.failing:
		o.logger.Warn(o.what+": failing", "err", err)
		o.failing = true
	case err == nil && o.failing:
		o.logger.Info(o.what + ": recovered")
		o.failing = false
	}
}

// RecordOnce records the stock of the open sales due (see StockRecorder)
// whose Redis stock key exists, and answers how many sales it recorded. A
// tick whose Redis read failed as a whole leaves the feed's marks where
// they were, so the next one looks at the same sales; one where some
// sales failed keeps those for the next.
func (s *StockRecorder) RecordOnce(ctx context.Context) (int, error) {
	open, err := s.Store.OpenSales(ctx)
	if err != nil {
		return 0, fmt.Errorf("record redis stock: %w", err)
	}
	began := time.Now()
	s.watch.Redis, s.watch.Every, s.watch.FullEvery = s.Redis, orDefault(s.Every, time.Second), orDefault(s.FullEvery, stockFullEvery)
	due, err := s.watch.due(ctx)
	if err != nil {
		s.Logger.Warn("stock recorder: change feed", "err", err)
	}
	// Only a sale on Redis is sampled: a sample counts only at the next
	// switch to the database path (the quota), and once a sale is on that
	// path a write to its row each second would only hold up the path's
	// transactions (they read the row under a shared lock).
	var sales []*domain.Sale
	for _, sale := range due.of(open, s.retry) {
		if sale.Mode == domain.ModeRedis {
			sales = append(sales, sale)
		}
	}
	n, failed, err := s.record(ctx, sales)
	if failed == nil {
		return n, err // Redis unread: the next tick looks at the same sales
	}
	s.retry = failed
	s.watch.done(began)
	return n, err
}

// record samples the stock of sales and answers the sales whose sample
// failed; failed is nil when Redis could not be read at all.
func (s *StockRecorder) record(ctx context.Context, sales []*domain.Sale) (n int, failed map[int64]bool, err error) {
	failed = map[int64]bool{}
	if len(sales) == 0 {
		return 0, failed, nil
	}
	ids := make([]int64, len(sales))
	for i, sale := range sales {
		ids[i] = sale.ID
	}
	// The sample's time is taken before the read: a hold recorded after it
	// may then postdate the read, which the quota must count.
	readAt := time.Now()
	stocks, _, err := s.Redis.ReadCounters(ctx, ids, nil)
	if err != nil {
		return 0, nil, fmt.Errorf("record redis stock: read stock: %w", err)
	}
	var errs []error
	batch := make(map[int64]int64, min(len(sales), stockBatch))
	flush := func() {
		if err := s.Store.RecordRedisStocks(ctx, batch, readAt); err != nil {
			errs = append(errs, err)
			for id := range batch {
				failed[id] = true
			}
		} else {
			n += len(batch)
		}
		clear(batch)
	}
	for _, sale := range sales {
		v, err := stocks[sale.ID].N, stocks[sale.ID].Err
		switch {
		case errors.Is(err, redisgateway.ErrMissing):
			continue // not warmed, or torn down
		case err != nil:
			errs = append(errs, fmt.Errorf("stock of sale %d: %w", sale.ID, err))
			failed[sale.ID] = true
			continue
		}
		if batch[sale.ID] = v; len(batch) == stockBatch {
			flush()
		}
	}
	flush()
	return n, failed, errors.Join(errs...)
}

// stockBatch bounds the samples one statement records.
const stockBatch = 500
