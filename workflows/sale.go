package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/domain"
)

// saleActs names the sale activities for ExecuteActivity; the methods are
// bound to real dependencies by the worker's registration.
var saleActs *activities.SaleActivities

// continueAsNewAfter bounds the sale workflow's history: a long sale
// reconciling every minute continues as new well before it grows large.
const continueAsNewAfter = 2000

// SaleWorkflow owns one sale's life: it warms Redis up ahead of starts_at,
// reconciles while the sale is live whenever it changed (liveWoken),
// waits once ends_at plus the payment window has passed until no order
// workflow of the sale is running, waits the retire margin, stores a final
// reconciliation report, and retires the sale (its Redis keys and streams
// go; sales.Retire).
//
// Command-sequence changes follow OrderWorkflow's rule (GetVersion, the
// retirement rule written there); a sale's workflow lives as long as the
// sale, across continue-as-new, so "closed" means the whole chain.
func SaleWorkflow(ctx workflow.Context, in domain.SaleInput) (domain.SaleResult, error) {
	return newSaleWorkflow(ctx, in, false).start(ctx)
}

// SaleWorkflowV2 is the sale workflow sales start as
// (domain.SaleWorkflowName): SaleWorkflow's newest branch of every change
// (wakeOnChange, firstChange, retireMarginChange) without asking
// GetVersion, so without the version markers and the
// TemporalChangeVersion upserts (visibility writes) the SDK makes with
// them, and with the sale's loads as local activities: a load reads one
// row and one key, and as an activity it cost the server an activity
// task, a workflow task more and a start-to-close timer firing after it
// completed (a sale's first task loads twice). A new type, not a new
// GetVersion, because the markers are what it drops; its chain continues
// as SaleWorkflowV2. A worker of an earlier release does not know the type
// and fails its workflow task until a worker that does takes it.
//
// Its command sequence changes under OrderWorkflow's rule, with histories
// recorded under a new tag.
func SaleWorkflowV2(ctx workflow.Context, in domain.SaleInput) (domain.SaleResult, error) {
	return newSaleWorkflow(ctx, in, true).start(ctx)
}

func newSaleWorkflow(ctx workflow.Context, in domain.SaleInput, v2 bool) *saleWorkflow {
	return &saleWorkflow{in: in, phase: domain.PhaseWaiting, last: in.LastReport, v2: v2,
		changed: workflow.GetSignalChannel(ctx, domain.SignalSaleChanged)}
}

func (w *saleWorkflow) start(ctx workflow.Context) (domain.SaleResult, error) {
	if err := w.setup(ctx); err != nil {
		return domain.SaleResult{}, err
	}
	return w.run(ctx)
}

type saleWorkflow struct {
	in    domain.SaleInput
	phase string
	last  *domain.ReconciliationReport
	quiet quietWatch
	// onFirstChange is set in runs with the firstChange version.
	onFirstChange bool
	// v2 is set in SaleWorkflowV2: the newest branches, no GetVersion.
	v2 bool
	// changed receives domain.SignalSaleChanged.
	changed workflow.ReceiveChannel
}

func (w *saleWorkflow) setup(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, domain.QueryReport, func() (any, error) {
		if w.last == nil {
			return domain.NoReportYet{SaleID: w.in.SaleID, Phase: w.phase,
				Note: "no reconciliation report yet: the sale workflow reconciles when the live sale changes, and at its end"}, nil
		}
		return w.last, nil
	}); err != nil {
		return fmt.Errorf("register report query: %w", err)
	}
	if err := workflow.SetQueryHandler(ctx, domain.QuerySalePhase, func() (string, error) {
		return w.phase, nil
	}); err != nil {
		return fmt.Errorf("register phase query: %w", err)
	}
	return nil
}

// run is the sale's life in its phases: warm-up, live, draining, finished.
func (w *saleWorkflow) run(ctx workflow.Context) (domain.SaleResult, error) {
	ctx = withSaleActivityOptions(ctx)
	result := domain.SaleResult{SaleID: w.in.SaleID}
	sale, err := w.loadSale(ctx)
	if err != nil {
		return result, err
	}
	if sale == nil {
		return result, nil
	}
	if err := w.warmUp(ctx, sale); err != nil {
		return result, err
	}
	w.phase = domain.PhaseLive
	ended, err := w.live(ctx)
	if err != nil || !ended {
		return result, err
	}
	if err := w.drain(ctx); err != nil {
		return result, err
	}
	if err := w.margin(ctx); err != nil {
		return result, err
	}
	if err := w.finish(ctx); err != nil {
		return result, err
	}
	result.FinalReport = w.last
	return result, nil
}

// SaleActivityTimeout bounds each attempt of a sale activity but the
// reconciliation. The server fires an activity's start-to-close timer this
// long after the attempt started, whether or not it has completed by then
// (a no-op task then), so a sale workflow's first task (its warm-up; a
// load, a warm-up and a load in SaleWorkflow) leaves the server work this
// long after it.
const SaleActivityTimeout = 2 * time.Minute

func withSaleActivityOptions(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: SaleActivityTimeout,
		RetryPolicy:         saleRetryPolicy(),
	})
}

// saleRetryPolicy retries the sale activities but LoadSale's refusal of a
// missing sale row. (The list is not compared on replay; older histories
// say "SaleMissing", which loadSale still reads as not_found.)
func saleRetryPolicy() *temporal.RetryPolicy {
	return &temporal.RetryPolicy{
		InitialInterval:        time.Second,
		BackoffCoefficient:     2,
		MaximumInterval:        30 * time.Second,
		NonRetryableErrorTypes: []string{domain.ENotFound},
	}
}

// Reconciliation timeouts. A reconciliation first waits for one of its
// worker's slots (activities.ReconcileSlots), as long as a wave of them
// takes, then runs within activities.ReconcileRunTimeout; the deadline
// covers both, and the heartbeats find a dead worker meanwhile.
const (
	reconcileDeadline  = time.Hour
	reconcileHeartbeat = time.Minute
)

// withReconcileOptions are the reconciliation's activity options. Replay
// compares an activity's type and id, not its timeouts, so runs recorded
// with the sale activities' options replay unchanged.
func withReconcileOptions(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: reconcileDeadline,
		HeartbeatTimeout:    reconcileHeartbeat,
		RetryPolicy:         saleRetryPolicy(),
	})
}

// warmUp loads the sale into Redis ahead of its opening, once per chain.
func (w *saleWorkflow) warmUp(ctx workflow.Context, sale *activities.SaleTimes) error {
	if w.in.Warmed {
		return nil
	}
	lead := w.in.WarmLead
	if lead <= 0 {
		lead = domain.DefaultWarmLead
	}
	// Warm up ahead of the opening, never at the moment it opens; a
	// sale created with a past start is warmed at once.
	if wait := sale.StartsAt.Add(-lead).Sub(workflow.Now(ctx)); wait > 0 {
		if err := workflow.Sleep(ctx, wait); err != nil {
			return fmt.Errorf("wait for warm-up: %w", err)
		}
	}
	if err := workflow.ExecuteActivity(ctx, saleActs.WarmupSale, w.in.SaleID).Get(ctx, nil); err != nil {
		return fmt.Errorf("warm up: %w", err)
	}
	w.in.Warmed = true
	return nil
}

// live reconciles while the sale is open, and waits once it has ended
// until its payment window has closed too; ended is true then. It returns
// ended false and no error when the sale row has gone, and the
// continue-as-new error when the history has grown long. Runs with the
// wakeOnChange version sleep until a change is signalled (liveWoken);
// older ones look at the change feed every period (quietWatch).
func (w *saleWorkflow) live(ctx workflow.Context) (ended bool, err error) {
	every := w.in.ReconcileEvery
	if every <= 0 {
		every = domain.DefaultReconcileEvery
	}
	if w.v2 || workflow.GetVersion(ctx, wakeOnChange, workflow.DefaultVersion, 1) == 1 {
		return w.liveWoken(ctx, every)
	}
	onChange := workflow.GetVersion(ctx, reconcileOnChange, workflow.DefaultVersion, 1) == 1
	for {
		sale, err := w.loadSale(ctx)
		if err != nil {
			return false, err
		}
		if sale == nil {
			return false, nil
		}
		closesAt := sale.EndsAt.Add(sale.PaymentWindow)
		now := workflow.Now(ctx)
		if sale.Stopped || !now.Before(sale.EndsAt) {
			if !now.Before(closesAt) {
				return true, nil
			}
			// Ended: no reconciliation needed until the payments close.
			w.phase = domain.PhaseDraining
			if err := workflow.Sleep(ctx, min(closesAt.Sub(now), every)); err != nil {
				return false, fmt.Errorf("wait for the payment window: %w", err)
			}
			continue
		}
		wait := every
		if now.After(sale.StartsAt) {
			if onChange && w.last != nil && w.last.Consistent && w.quiet.unchanged(sale.Changes, now) {
				wait = w.quiet.skipped(now, every, sale.EndsAt)
			} else {
				if err := w.reconcile(ctx, false); err != nil {
					return false, err
				}
				w.quiet.reconciled(now)
			}
		}
		if err := w.continueAsNewIfLong(ctx); err != nil {
			return false, err
		}
		if err := workflow.Sleep(ctx, wait); err != nil {
			return false, fmt.Errorf("wait to reconcile: %w", err)
		}
		// A run begun before wakeOnChange takes it at the first look after
		// a change is signalled (runs before that got no signal, so their
		// histories have no such look).
		if w.takeSignals(); w.in.Changed && workflow.GetVersion(ctx, wakeOnChangeLate, workflow.DefaultVersion, 1) == 1 {
			return w.liveWoken(ctx, every)
		}
	}
}

// reconcileOnChange skips a live sale's reconciliation when nothing changed
// since the last one and looks less often while it stays so
// (OrderWorkflow's rule on command-sequence changes).
const reconcileOnChange = "reconcile-on-change"

// Bounds of quietWatch.
const (
	// changeSkew allows for the clocks of the feed's writers and the
	// workflow's, and a note's own delay.
	changeSkew = 5 * time.Second
	// feedKeep is how long the feed keeps a note (redisgateway.ChangesKeep). The
	// workflow's decisions depend on it, so it is a constant of its own,
	// held equal to the feed's by a test, not read from redisgateway: a change
	// must be versioned like any other.
	feedKeep = 10 * time.Minute
	// quietMaxWait is the longest wait between two looks at a quiet sale:
	// a look within half of feedKeep sees every change since the look
	// before.
	quietMaxWait = feedKeep / 2
)

// quietWatch decides from the change feed (activities.ChangeMark) whether
// a live sale changed since its last reconciliation (a report that found
// discrepancies is always followed by another). Every change of a
// sale's Redis state is noted in the feed, and every change the database
// takes on the Redis path writes Redis too (a hold, a payment, a release,
// an adjustment, a control), so a sale whose last note is older than its
// last reconciliation, looked at often enough that no note was pruned
// unseen, has nothing new to reconcile. A lost note delays the
// reconciliation to the sale's next change or its final one; the sale's
// keys are checked by the worker's resyncer meanwhile.
type quietWatch struct {
	reconciledAt time.Time // when the last reconciliation began
	lookedAt     time.Time // when the feed was last looked at
	streak       int       // looks in a row that found nothing new
}

// unchanged reports whether the sale has nothing new since its last
// reconciliation in this run.
func (q *quietWatch) unchanged(m activities.ChangeMark, now time.Time) bool {
	if q.reconciledAt.IsZero() || !m.Known || now.Sub(q.lookedAt) >= feedKeep-changeSkew {
		return false
	}
	return m.At.IsZero() || m.At.Before(q.reconciledAt.Add(-changeSkew))
}

// reconciled records a reconciliation begun at now.
func (q *quietWatch) reconciled(now time.Time) {
	q.reconciledAt, q.lookedAt, q.streak = now, now, 0
}

// skipped records a look at now that found nothing new and answers the
// wait to the next look: twice the last, from every up to quietMaxWait,
// and never past the sale's end.
func (q *quietWatch) skipped(now time.Time, every time.Duration, endsAt time.Time) time.Duration {
	q.lookedAt = now
	q.streak++
	wait := every
	for i := 0; i < q.streak && wait < quietMaxWait; i++ {
		wait *= 2
	}
	wait = min(wait, max(quietMaxWait, every))
	if left := endsAt.Sub(now); left > 0 && left < wait {
		wait = left
	}
	return wait
}

// drain waits until every order workflow of the sale has finished and the
// inbox is empty.
func (w *saleWorkflow) drain(ctx workflow.Context) error {
	w.phase = domain.PhaseDraining
	for {
		var running int64
		if err := workflow.ExecuteActivity(ctx, saleActs.RunningOrders, w.in.SaleID).Get(ctx, &running); err != nil {
			return fmt.Errorf("count running orders: %w", err)
		}
		if running == 0 {
			return nil
		}
		if err := w.continueAsNewIfLong(ctx); err != nil {
			return err
		}
		if err := workflow.Sleep(ctx, 10*time.Second); err != nil {
			return fmt.Errorf("wait for orders: %w", err)
		}
	}
}

// retireMarginChange adds the wait between a settled sale and its
// retirement (OrderWorkflow's rule on command-sequence changes).
const retireMarginChange = "retire-margin"

// margin waits the input's RetireMargin (DefaultRetireMargin when zero)
// once the sale has settled, so its last reservations' reads and replays
// are still answered from Redis for a while.
func (w *saleWorkflow) margin(ctx workflow.Context) error {
	if !w.v2 && workflow.GetVersion(ctx, retireMarginChange, workflow.DefaultVersion, 1) != 1 {
		return nil
	}
	wait := w.in.RetireMargin
	if wait <= 0 {
		wait = domain.DefaultRetireMargin
	}
	if err := workflow.Sleep(ctx, wait); err != nil {
		return fmt.Errorf("wait the retire margin: %w", err)
	}
	return nil
}

// finish reconciles one last time and retires the sale.
func (w *saleWorkflow) finish(ctx workflow.Context) error {
	if err := w.reconcile(ctx, true); err != nil {
		return err
	}
	if err := workflow.ExecuteActivity(ctx, saleActs.TeardownSale, w.in.SaleID).Get(ctx, nil); err != nil {
		return fmt.Errorf("tear down: %w", err)
	}
	w.phase = domain.PhaseFinished
	w.takeSignals() // the final report covers the changes signalled
	return nil
}

// continueAsNewIfLong returns the continue-as-new error, carrying the
// latest report, once the history has grown past the limit; else nil.
func (w *saleWorkflow) continueAsNewIfLong(ctx workflow.Context) error {
	info := workflow.GetInfo(ctx)
	if info.GetCurrentHistoryLength() <= w.historyLimit() && !info.GetContinueAsNewSuggested() {
		return nil
	}
	// A signal buffered now would be lost with this run: the next one
	// owes its reconciliation.
	w.takeSignals()
	next := w.in
	next.LastReport = w.last
	if w.v2 {
		return workflow.NewContinueAsNewError(ctx, SaleWorkflowV2, next)
	}
	return workflow.NewContinueAsNewError(ctx, SaleWorkflow, next)
}

// historyLimit is the input's HistoryLimit, or continueAsNewAfter. Only
// the moment of the continue-as-new depends on it, not the commands before
// it, so histories recorded without it replay unchanged.
func (w *saleWorkflow) historyLimit() int {
	if w.in.HistoryLimit > 0 {
		return w.in.HistoryLimit
	}
	return continueAsNewAfter
}

// saleLoadTotal bounds a local load's retries: as long as a sale lives
// (the activity SaleWorkflow runs instead retries without bound).
const saleLoadTotal = 30 * 24 * time.Hour

// loadSale returns nil, the workflow then in PhaseSaleMissing, when the
// sale row does not exist.
func (w *saleWorkflow) loadSale(ctx workflow.Context) (*activities.SaleTimes, error) {
	var sale activities.SaleTimes
	var f workflow.Future
	if w.v2 {
		f = workflow.ExecuteLocalActivity(localWithin(ctx, activityAttemptTimeout, saleLoadTotal, saleRetryPolicy()), saleActs.LoadSale, w.in.SaleID)
	} else {
		f = workflow.ExecuteActivity(ctx, saleActs.LoadSale, w.in.SaleID)
	}
	err := f.Get(ctx, &sale)
	if refusal(err, domain.ENotFound) { // "SaleMissing" in older histories
		w.phase = domain.PhaseSaleMissing
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load sale: %w", err)
	}
	return &sale, nil
}

func (w *saleWorkflow) reconcile(ctx workflow.Context, final bool) error {
	var rep domain.ReconciliationReport
	if err := workflow.ExecuteActivity(withReconcileOptions(ctx), saleActs.ReconcileSale, w.in.SaleID, final).Get(ctx, &rep); err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	// Keep the query answer small: the full list is in the stored report.
	if len(rep.Discrepancies) > 50 {
		rep.Discrepancies = rep.Discrepancies[:50]
	}
	w.last = &rep
	return nil
}

// RegisterSale registers the sale workflow and its activities.
func RegisterSale(r worker.Registry, a *activities.SaleActivities) {
	RegisterSaleTypes(r)
	r.RegisterActivity(a)
}

// RegisterSaleTypes registers both sale workflow types under their
// contract names (a worker, a replayer).
func RegisterSaleTypes(r worker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(SaleWorkflowV2, workflow.RegisterOptions{Name: domain.SaleWorkflowName})
	r.RegisterWorkflowWithOptions(SaleWorkflow, workflow.RegisterOptions{Name: domain.SaleWorkflowV1Name})
}
