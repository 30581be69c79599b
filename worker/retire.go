package worker

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/lua"
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
// writer put back (sales.SweepRetired).
type Retirer struct {
	Store      *store.Store
	Redis      *lua.Client
	Metrics    *Metrics
	ActMetrics *activities.Metrics
	Every      time.Duration // defaultRetireEvery when zero
	Watch      time.Duration // defaultRetireWatch when zero
	Logger     *slog.Logger
}

// Run retires until ctx ends.
func (r *Retirer) Run(ctx context.Context) {
	everyTick(ctx, orDefault(r.Every, defaultRetireEvery), true, func() {
		if err := r.Once(ctx, time.Now()); err != nil && ctx.Err() == nil {
			r.Logger.Warn("retirer: sweep retired sales", "err", err)
		}
	})
}

// Once sweeps the sales retired since now minus the watch.
func (r *Retirer) Once(ctx context.Context, now time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ids, swept, err := sales.SweepRetired(ctx, r.Store, r.Redis, now.Add(-orDefault(r.Watch, defaultRetireWatch)))
	for _, id := range ids {
		r.Metrics.forgetSale(id)
		r.ActMetrics.Forget(id)
	}
	if swept > 0 {
		r.Logger.Info("retirer: removed keys put back after retirement", "sales", swept)
	}
	return err
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
