package worker

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/sales"
	"github.com/seckill/seckill/store"
)

// Retirer defaults.
const (
	// defaultRetireEvery: how often the retirer looks at retired sales.
	defaultRetireEvery = time.Minute
	// defaultRetireWatch: how long after its retirement a sale is watched
	// for keys put back by a late writer and for series this worker holds.
	defaultRetireWatch = 24 * time.Hour
)

// Retirer clears what this worker and Redis keep of the sales retired
// lately (sales.Retire, the sale workflow's last step): the per-sale
// series of the relay and of the activities (the worker that retired a
// sale dropped its own at once; every other worker that relayed or
// reconciled it drops them here), and any of their Redis keys a late
// writer put back (sales.SweepRetired). Redis is asked about a retired
// sale the first time this retirer sees it and then only when the change
// feed names it (a late writer's write notes its sale), so the day's
// retired sales cost Redis nothing while nobody writes to them.
type Retirer struct {
	Store      *store.Store
	Redis      *redisgateway.Client
	Metrics    *Metrics
	ActMetrics *activities.Metrics
	Every      time.Duration // defaultRetireEvery when zero
	Watch      time.Duration // defaultRetireWatch when zero
	Logger     *slog.Logger

	watch changeWatch
	seen  map[int64]bool // retired sales swept once
}

// Run retires until ctx ends.
func (r *Retirer) Run(ctx context.Context) {
	everyTick(ctx, orDefault(r.Every, defaultRetireEvery), true, func() {
		if err := r.Once(ctx, time.Now()); err != nil && ctx.Err() == nil {
			r.Logger.Warn("retirer: sweep retired sales", "err", err)
		}
	})
}

// Once sweeps the sales retired since now minus the watch: their series,
// and the keys of those new to it or named by the change feed.
func (r *Retirer) Once(ctx context.Context, now time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ids, err := r.Store.FinishedSince(ctx, now.Add(-orDefault(r.Watch, defaultRetireWatch)))
	if err != nil {
		return fmt.Errorf("retirer: retired sales: %w", err)
	}
	// The feed is read only to narrow the sweep: unreadable, every sale
	// is swept.
	r.watch.Redis, r.watch.Every, r.watch.FullEvery = r.Redis, orDefault(r.Every, defaultRetireEvery), defaultRetireWatch
	due, ferr := r.watch.due(ctx)
	seen := make(map[int64]bool, len(ids))
	var sweep []int64
	for _, id := range ids {
		r.Metrics.forgetSale(id)
		r.ActMetrics.Forget(id)
		seen[id] = true
		if !r.seen[id] || due.all || due.named(id) {
			sweep = append(sweep, id)
		}
	}
	swept, err := sales.SweepRetired(ctx, r.Redis, sweep)
	if swept > 0 {
		r.Logger.Info("retirer: removed keys put back after retirement", "sales", swept)
	}
	if err != nil {
		return err
	}
	r.seen = seen
	if ferr == nil {
		r.watch.done(now)
	}
	return ferr
}

// forgetSale drops a retired sale's relay series.
func (m *Metrics) forgetSale(saleID int64) {
	if m == nil {
		return
	}
	label := strconv.FormatInt(saleID, 10)
	m.DeadLetters.DeleteLabelValues(label)
	m.Lag.DeleteLabelValues(label)
	m.Pending.DeleteLabelValues(label)
	m.OldestAge.DeleteLabelValues(label)
}
