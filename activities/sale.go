package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/reconcile"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/sales"
	"github.com/seckill/seckill/store"
	"github.com/seckill/seckill/temporalgateway"
)

// SaleActivities are the sale workflow's activities.
type SaleActivities struct {
	Store      *store.Store
	Redis      *redisgateway.Client
	Temporal   client.Client
	Reconciler *reconcile.Reconciler
	// Slots bounds the reconciliations run at once; nil does not.
	Slots *ReconcileSlots
	// Metrics, when set, export each sale's latest reconciliation.
	Metrics *Metrics
	Logger  *slog.Logger // slog.Default() when nil
}

// SaleTimes is what the sale workflow needs of its sale.
type SaleTimes struct {
	StartsAt      time.Time `json:"starts_at"`
	EndsAt        time.Time `json:"ends_at"`
	PaymentWindow time.Duration
	Stopped       bool `json:"stopped"`
	// Changes is what the change feed said of the sale at the load.
	Changes ChangeMark `json:"changes"`
}

// ChangeMark is the change feed's word on a sale (redisgateway.Client.LastChange):
// Known false when it cannot speak for the sale (the feed unreadable, the
// sale not on Redis, whose database path notes nothing, or an activity
// from before the feed), else At, its last noted change, zero when none
// within redisgateway.ChangesKeep.
type ChangeMark struct {
	Known bool      `json:"known"`
	At    time.Time `json:"at"`
}

// LoadSale reads the sale's times and its last noted change; a sale row
// that does not exist is refused as domain.ENotFound.
func (a *SaleActivities) LoadSale(ctx context.Context, saleID int64) (SaleTimes, error) {
	s, err := a.Store.GetSale(ctx, saleID)
	if errors.Is(err, store.ErrNotFound) {
		return SaleTimes{}, refuse("load sale", domain.ENotFound, err)
	}
	if err != nil {
		return SaleTimes{}, fmt.Errorf("load sale: %w", err)
	}
	return SaleTimes{StartsAt: s.StartsAt, EndsAt: s.EndsAt, PaymentWindow: s.PaymentWindow(), Stopped: s.Control == domain.ControlStopped,
		Changes: a.changeMark(ctx, s)}, nil
}

// changeMark reads the sale's last noted change; an unreadable feed only
// costs a reconciliation, so it is logged, not failed.
func (a *SaleActivities) changeMark(ctx context.Context, s *domain.Sale) ChangeMark {
	if a.Redis == nil || s.Mode != domain.ModeRedis {
		return ChangeMark{}
	}
	at, noted, err := a.Redis.LastChange(ctx, s.ID)
	if err != nil {
		logger := a.Logger
		if logger == nil {
			logger = slog.Default()
		}
		logger.Warn("load sale: change feed unreadable; the sale reconciles", "sale_id", s.ID, "err", err)
		return ChangeMark{}
	}
	if !noted {
		at = time.Time{}
	}
	return ChangeMark{Known: true, At: at}
}

// WarmupSale loads the sale into Redis; a sale that already took a
// reservation is left as it is.
func (a *SaleActivities) WarmupSale(ctx context.Context, saleID int64) (int64, error) {
	_, stock, err := sales.Warmup(ctx, a.Store, a.Redis, a.Temporal, saleID)
	if err != nil {
		return 0, fmt.Errorf("warm up: %w", err)
	}
	return stock, nil
}

// ReconcileSale reconciles the sale, repairing what is safe, and stores the
// report. It waits for one of a.Slots first (heartbeating meanwhile when
// its caller asked for heartbeats), then runs within ReconcileRunTimeout.
func (a *SaleActivities) ReconcileSale(ctx context.Context, saleID int64, final bool) (*domain.ReconciliationReport, error) {
	defer keepAlive(ctx)()
	var rep *domain.ReconciliationReport
	err := a.Slots.Do(ctx, ReconcileRunTimeout, func(ctx context.Context) error {
		var err error
		if rep, err = a.Reconciler.Run(ctx, saleID, true); err != nil {
			return err
		}
		a.Metrics.reconciled(rep)
		a.Metrics.withoutWorkflow(saleID, rep.Discrepancies)
		return a.storeReport(ctx, rep, final)
	})
	if err != nil {
		return nil, fmt.Errorf("reconcile: %w", err)
	}
	return rep, nil
}

// RunningOrders counts what keeps the sale from tearing down: its order
// workflows still running, its inbox entries not yet handed on, and its
// live reservations (QUEUED or PENDING_PAYMENT in the database), so a live
// reservation whose workflow closed holds the sale up too. Such
// reservations are repaired here (reconcile's closed-workflow policy),
// since no regular reconciliation runs once the sale has ended.
func (a *SaleActivities) RunningOrders(ctx context.Context, saleID int64) (int64, error) {
	n, err := temporalgateway.CountRunning(ctx, a.Temporal, saleID)
	if err != nil {
		return 0, fmt.Errorf("count running orders: %w", err)
	}
	counts, err := a.Store.CountReservations(ctx, saleID)
	if err != nil {
		return 0, fmt.Errorf("count running orders: %w", err)
	}
	if live := counts[domain.StatusQueued] + counts[domain.StatusPendingPayment]; live > 0 {
		n += live
		closed, err := a.Reconciler.RepairClosedWorkflows(ctx, saleID)
		if err != nil {
			return 0, fmt.Errorf("count running orders: %w", err)
		}
		a.Metrics.withoutWorkflow(saleID, closed)
	}
	snap, err := a.Redis.ReadSnapshot(ctx, saleID, time.Minute)
	if err != nil {
		return 0, fmt.Errorf("count running orders: %w", err)
	}
	return n + snap.Pending + max(snap.Lag, 0), nil
}

// TeardownSale retires the settled sale (sales.Retire): its Redis keys and
// streams go and it is recorded finished. A sale not settled yet is
// refused, and the activity's retries try again.
func (a *SaleActivities) TeardownSale(ctx context.Context, saleID int64) error {
	if err := sales.Retire(ctx, a.Store, a.Redis, saleID, time.Now()); err != nil {
		return fmt.Errorf("teardown sale %d: %w", saleID, err)
	}
	a.Metrics.Forget(saleID)
	return nil
}

func (a *SaleActivities) storeReport(ctx context.Context, rep *domain.ReconciliationReport, final bool) error {
	body, err := json.Marshal(rep)
	if err != nil {
		return fmt.Errorf("store report: %w", err)
	}
	if err := a.Store.SaveReport(ctx, rep.SaleID, rep.Consistent, final, body); err != nil {
		return fmt.Errorf("store report: %w", err)
	}
	return nil
}
