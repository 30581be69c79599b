package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/store"
)

// StockRecorder copies open sales' Redis stock into the database: when
// Redis goes away the database path caps its sales by the last stock Redis
// was seen to hold, so the two paths together cannot oversell. Each tick
// it samples the sales the change feed names (a sale selling) and a share
// of the others, each once per FullEvery: a quiet sale's sample may be older than
// the database path accepts (store.MaxStockSampleAge), and a switch then
// holds its units back until the resync.
type StockRecorder struct {
	Redis     *lua.Client
	Store     *store.Store
	Logger    *slog.Logger
	Every     time.Duration // 1s when zero
	FullEvery time.Duration // stockFullEvery when zero

	watch changeWatch
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

// RecordOnce records the stock of the open sales due (the feed's, or all
// on a full pass) whose Redis stock key exists, and answers how many sales
// it recorded.
func (s *StockRecorder) RecordOnce(ctx context.Context) (int, error) {
	open, err := s.Store.ListOpenSales(ctx)
	if err != nil {
		return 0, fmt.Errorf("record redis stock: %w", err)
	}
	// Only a sale on Redis is sampled: a sample counts only at the next
	// switch to the database path (the quota), and once a sale is on that
	// path a write to its row each second would only hold up the path's
	// transactions (they read the row under a shared lock).
	began := time.Now()
	s.watch.Redis, s.watch.Every, s.watch.FullEvery = s.Redis, orDefault(s.Every, time.Second), orDefault(s.FullEvery, stockFullEvery)
	due, err := s.watch.due(ctx)
	if err != nil {
		s.Logger.Warn("stock recorder: change feed", "err", err)
	}
	sales := open[:0]
	for _, sale := range open {
		if sale.Mode == domain.ModeRedis && due.has(sale.ID) {
			sales = append(sales, sale)
		}
	}
	n, err := s.record(ctx, sales)
	if err == nil {
		s.watch.done(began)
	}
	return n, err
}

// record samples the stock of sales.
func (s *StockRecorder) record(ctx context.Context, sales []*domain.Sale) (int, error) {
	if len(sales) == 0 {
		return 0, nil
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
		return 0, fmt.Errorf("record redis stock: read stock: %w", err)
	}
	var errs []error
	n := 0
	for _, sale := range sales {
		v, err := stocks[sale.ID].N, stocks[sale.ID].Err
		if errors.Is(err, lua.ErrMissing) {
			continue // not warmed, or torn down
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("stock of sale %d: %w", sale.ID, err))
			continue
		}
		if err := s.Store.RecordRedisStock(ctx, sale.ID, v, readAt); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}
