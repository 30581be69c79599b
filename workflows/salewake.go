package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/domain"
)

// wakeOnChange replaces the live sale's periodic look at the change feed
// (reconcile-on-change) by one timer to the sale's end and a signal when
// the sale changes (OrderWorkflow's rule on command-sequence changes).
const wakeOnChange = "wake-on-change"

// wakeOnChangeLate moves a live sale's run begun before wakeOnChange to it
// once a change is signalled, so runs already live when it is deployed do
// not look at the feed every few minutes until their sale ends.
const wakeOnChangeLate = "wake-on-change-late"

// firstChange has a live sale first reconciled when a change of it is
// signalled, not at a first look after the opening, so sales opened
// together cost no reconciliations together (OrderWorkflow's rule on
// command-sequence changes).
const firstChange = "first-change"

// liveWoken is the live phase of the wakeOnChange version. The sale is
// reconciled whenever a change was signalled (domain.SignalSaleChanged:
// the worker's SaleSignaller, at most once a period per sale), no sooner
// than a period after the opening and after the last reconciliation
// began, and every period while the last report found discrepancies or
// the change feed cannot speak for the sale (unreadable, or the database
// path, which notes nothing). Otherwise it sleeps: a quiet sale's history
// gains no event until its end. Once ended it waits for the payment
// window on one timer; signals then change nothing, the final
// reconciliation covers them. Runs before firstChange also reconcile at
// their first look after the opening (a period after it when warmed
// ahead of it).
func (w *saleWorkflow) liveWoken(ctx workflow.Context, every time.Duration) (ended bool, err error) {
	w.onFirstChange = w.v2 || workflow.GetVersion(ctx, firstChange, workflow.DefaultVersion, 1) == 1
	for {
		sale, err := w.loadSale(ctx)
		if err != nil {
			return false, err
		}
		if sale == nil {
			return false, nil
		}
		now := workflow.Now(ctx)
		if sale.Stopped || !now.Before(sale.EndsAt) {
			closed, err := w.waitForClose(ctx, sale, now)
			if closed || err != nil {
				return closed, err
			}
			continue
		}
		w.phase = domain.PhaseLive
		w.takeSignals()
		wait, wake, err := w.reconcileIfDue(ctx, sale, now, every)
		if err != nil {
			return false, err
		}
		if err := w.continueAsNewIfLong(ctx); err != nil {
			return false, err
		}
		if err := w.await(ctx, wait, wake); err != nil {
			return false, fmt.Errorf("wait to reconcile: %w", err)
		}
	}
}

// waitForClose waits for the payment window of an ended or stopped sale
// to close, reporting closed when it has: one timer from the end. A
// stopped sale waits for its end woken by a change too, as a resume
// makes it live again.
func (w *saleWorkflow) waitForClose(ctx workflow.Context, sale *activities.SaleTimes, now time.Time) (closed bool, err error) {
	closesAt := sale.EndsAt.Add(sale.PaymentWindow)
	if !now.Before(closesAt) {
		return true, nil
	}
	w.phase = domain.PhaseDraining
	if now.Before(sale.EndsAt) {
		w.takeSignals()
		w.in.Changed = false
		if err := w.await(ctx, sale.EndsAt.Sub(now), true); err != nil {
			return false, fmt.Errorf("wait for the stopped sale's end: %w", err)
		}
		return false, nil
	}
	if err := workflow.Sleep(ctx, closesAt.Sub(now)); err != nil {
		return false, fmt.Errorf("wait for the payment window: %w", err)
	}
	return false, nil
}

// reconcileIfDue reconciles the open sale when it is owed one and the
// period since the last has passed, and answers the wait to the next look
// and whether a signal ends that wait.
func (w *saleWorkflow) reconcileIfDue(ctx workflow.Context, sale *activities.SaleTimes, now time.Time, every time.Duration) (time.Duration, bool, error) {
	if !w.onFirstChange && !now.After(sale.StartsAt) {
		// Not in the opening's rush: a period after it.
		return sale.StartsAt.Add(every).Sub(now), false, nil
	}
	if w.owed(sale) {
		if next := w.nextReconcile(sale, every); now.Before(next) {
			return next.Sub(now), false, nil
		}
		if err := w.reconcile(ctx, false); err != nil {
			return 0, false, err
		}
		w.in.ReconciledAt, w.in.Changed = now, false
	}
	if w.polled(sale) {
		return every, false, nil
	}
	return sale.EndsAt.Sub(now), true, nil
}

// owed reports whether the open sale is owed a reconciliation: a change
// was signalled, or it is polled; before firstChange, also its first look.
func (w *saleWorkflow) owed(sale *activities.SaleTimes) bool {
	return w.in.Changed || w.polled(sale) || (!w.onFirstChange && w.in.ReconciledAt.IsZero())
}

// nextReconcile is the earliest time of the next reconciliation: a period
// after the last began, and with firstChange not in the opening's rush
// either (a period after the opening).
func (w *saleWorkflow) nextReconcile(sale *activities.SaleTimes, every time.Duration) time.Time {
	from := w.in.ReconciledAt
	if w.onFirstChange && from.Before(sale.StartsAt) {
		from = sale.StartsAt
	}
	return from.Add(every)
}

// polled reports whether the sale is reconciled every period, signal or
// not: its last report found discrepancies, or no change of it may be
// signalled (sale.Changes.Known false); before firstChange, also while
// it has no report.
func (w *saleWorkflow) polled(sale *activities.SaleTimes) bool {
	if w.last == nil {
		return !w.onFirstChange || !sale.Changes.Known
	}
	return !w.last.Consistent || !sale.Changes.Known
}

// await waits d; when wake is set a change signal ends the wait early. A
// signal is always taken, so the next look knows the sale changed.
func (w *saleWorkflow) await(ctx workflow.Context, d time.Duration, wake bool) error {
	tctx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	var fired bool
	var err error
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(workflow.NewTimer(tctx, d), func(f workflow.Future) {
		fired, err = true, f.Get(tctx, nil)
	})
	sel.AddReceive(w.changed, func(c workflow.ReceiveChannel, _ bool) {
		c.Receive(ctx, nil)
		w.in.Changed = true
	})
	for !fired {
		sel.Select(ctx)
		if wake && w.in.Changed {
			return nil
		}
	}
	return err
}

// takeSignals takes the change signals buffered, without waiting.
func (w *saleWorkflow) takeSignals() {
	for w.changed.ReceiveAsync(nil) {
		w.in.Changed = true
	}
}
