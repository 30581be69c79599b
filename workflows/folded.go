package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/domain"
)

// stepsFoldedChange versions an order with fewer history events (each a
// billed action on Temporal Cloud; each upsert a visibility write). At
// version 1 (and in OrderWorkflowV2):
//   - each step is one local activity that writes the database and has
//     Redis follow (activities.BeginOrder, MarkPaidAndSync, ReleaseAndSync),
//     where it took up to three;
//   - the payment window and its grace (payGraceChange) are one timer, to
//     pay_by + payGrace, and the validators read the clock for pay_by; a
//     timer left running when the order is paid or released is not
//     cancelled (the workflow's completion drops it);
//   - the workflow upserts no search attribute: the start sets SaleId,
//     UserId and OrderStatus=QUEUED, and the database has the status;
//   - it runs the newest branch of every earlier change without asking
//     GetVersion, so this marker (and the TemporalChangeVersion upsert the
//     SDK makes with it) is the only one an OrderWorkflow records, and an
//     OrderWorkflowV2 records none.
//
// OrderWorkflow records the marker on every order it runs: a worker of an
// earlier release cannot replay one, and fails its workflow task until a
// worker of a later release takes it.
const stepsFoldedChange = "order-steps-folded"

// OrderWorkflowV2 is the order workflow orders start as
// (domain.OrderWorkflowName): OrderWorkflow's stepsFoldedChange branch,
// without the version marker, and so without the TemporalChangeVersion
// upsert the SDK makes with it. A new type, not a new GetVersion, because
// the marker is what it drops. An expired order's history is 12 events, a
// paid one's 13, with no upsert (TestOrderEventsPerOrder). A worker of an
// earlier release does not know the type and fails its workflow task until
// a worker that does takes it.
//
// Its command sequence changes under OrderWorkflow's rule: behind
// workflow.GetVersion (its first call adds a marker to every order that
// takes it, so prefer a new type when the change is on every order), with
// histories recorded under a new tag.
func OrderWorkflowV2(ctx workflow.Context, in domain.OrderInput) (domain.OrderState, error) {
	w := newOrderWorkflow(ctx, in)
	w.folded = true
	if err := w.setup(ctx); err != nil {
		return w.st, err
	}
	return w.runFolded(ctx)
}

// withFolded: a step's attempt may take a database call and then the Redis
// part.
func withFolded(ctx workflow.Context) workflow.Context {
	return localWithin(ctx, activityAttemptTimeout+redisQuickBudget, activityTotalTimeout, retryBetween(200*time.Millisecond, 5*time.Second))
}

// runFolded is run at stepsFoldedChange.
func (w *orderWorkflow) runFolded(ctx workflow.Context) (domain.OrderState, error) {
	req := activities.BeginRequest{Input: w.in, Cancel: w.releaseTo == domain.StatusCancelled, CancelReason: w.releaseReason}
	st, redisErr, err := w.step(ctx, func(ctx workflow.Context, sync bool) workflow.Future {
		req.Sync = sync
		return workflow.ExecuteLocalActivity(ctx, a.BeginOrder, req)
	})
	if err != nil {
		return w.st, fmt.Errorf("begin order: %w", err)
	}
	if redisErr != nil {
		// An ended reservation whose Redis side is not done: the workflow
		// fails, and reconciliation's rerun finishes it.
		return w.st, redisErr
	}
	w.take(st)
	switch {
	case w.st.Status.Terminal():
		return w.finish(ctx)
	case w.st.Status != domain.StatusPendingPayment:
		return w.st, fmt.Errorf("reservation %s is %s where PENDING_PAYMENT was expected", w.in.Token, w.st.Status)
	}
	if err := w.awaitPaymentFolded(ctx); err != nil {
		return w.st, err
	}
	workflow.GetLogger(ctx).Info("order ended", "token", w.in.Token, "status", string(w.st.Status))
	return w.finish(ctx)
}

// take adopts a step's answer, keeping the fail reason the workflow knew
// when the answer has none.
func (w *orderWorkflow) take(got domain.OrderState) {
	reason := w.st.FailReason
	w.st = got
	if w.st.FailReason == "" {
		w.st.FailReason = reason
	}
}

// step runs one folded step. Redis steps still run one at a time, in the
// order asked for: while another runs, the step writes only the database
// and its Redis part waits for that one (redisStep). A Redis part that
// failed is retried as an activity (redisStepYieldsChange's), beside the
// payment wait when the reservation is pending, else before the step
// answers, so a release answers only once the unit is back on sale.
// redisErr is that retry's failure (after a day): the database write is
// done, and the caller decides what it means.
func (w *orderWorkflow) step(ctx workflow.Context, call func(ctx workflow.Context, sync bool) workflow.Future) (_ domain.OrderState, redisErr, err error) {
	sync := !w.redisBusy
	if sync {
		w.redisBusy = true
	}
	var got activities.Step
	err = call(withFolded(ctx), sync).Get(ctx, &got)
	if sync && (err != nil || got.Synced) {
		w.redisBusy = false
	}
	if err != nil {
		return w.st, nil, err
	}
	beside := got.State.Status == domain.StatusPendingPayment
	switch {
	case got.Synced:
	case sync:
		workflow.GetLogger(ctx).Warn("redis step: quick try failed, retrying as an activity", "token", w.in.Token, "error", got.RedisError)
		redisErr = w.retryRedis(ctx, beside)
	default:
		redisErr = w.redisStep(ctx, beside)
	}
	return got.State, redisErr, nil
}

// awaitPaymentFolded is awaitPayment at stepsFoldedChange: one timer, to the
// end of the grace; the race rules are awaitPayment's, with the window's
// close read from the clock (windowClosed).
func (w *orderWorkflow) awaitPaymentFolded(ctx workflow.Context) error {
	if w.st.PayBy == nil {
		return fmt.Errorf("reservation %s is pending payment without pay_by", w.in.Token)
	}
	if d := w.st.PayBy.Add(payGrace).Sub(workflow.Now(ctx)); d > 0 {
		timer := workflow.NewTimer(ctx, d)
		workflow.Go(ctx, func(gctx workflow.Context) {
			if err := timer.Get(gctx, nil); err == nil {
				w.timerFired = true
			}
		})
	} else {
		w.timerFired = true
	}
	if err := workflow.Await(ctx, func() bool {
		return w.st.Status == domain.StatusPaid || w.releaseTo != "" || (w.timerFired && !w.paying)
	}); err != nil {
		return fmt.Errorf("await payment: %w", err)
	}
	if w.st.Status == domain.StatusPaid {
		return nil
	}
	if w.releaseTo == "" {
		w.releaseTo, w.releaseReason = domain.StatusExpired, "payment window passed"
	}
	to := w.releaseTo
	st, redisErr, err := w.step(ctx, func(ctx workflow.Context, sync bool) workflow.Future {
		return workflow.ExecuteLocalActivity(ctx, a.ReleaseAndSync, w.in.Token, to, sync)
	})
	if err != nil {
		return fmt.Errorf("release order as %s: %w", to, err)
	}
	if redisErr != nil {
		// As releaseRedis: the workflow fails, reconciliation reruns it.
		return redisErr
	}
	// Last: the status wakes the cancel handler, and the unit is back.
	w.take(st)
	return nil
}

// payFolded records an accepted payment at stepsFoldedChange; pay has set
// paying.
func (w *orderWorkflow) payFolded(ctx workflow.Context, req domain.PayRequest) (domain.OrderState, error) {
	st, redisErr, err := w.step(ctx, func(ctx workflow.Context, sync bool) workflow.Future {
		return workflow.ExecuteLocalActivity(ctx, a.MarkPaidAndSync, w.in.Token, req.PaymentRef, sync)
	})
	if err != nil {
		if refusal(err, domain.ENotPayable) {
			return w.st, reject(domain.ENotPayable, "reservation is not payable")
		}
		return w.st, fmt.Errorf("mark paid: %w", err)
	}
	if redisErr != nil {
		// The payment is recorded in the database, which decides; a rerun
		// or reconciliation moves the Redis token later.
		workflow.GetLogger(ctx).Error("redis advance to paid", "token", w.in.Token, "error", redisErr)
	}
	w.take(st)
	return w.st, nil
}

// windowClosed reports whether pay_by has passed. At stepsFoldedChange the
// timer fires only at the grace's end, so the clock tells: the workflow's
// time, which validators (never replayed) and handlers (replayed with the
// task's recorded time) read alike.
func (w *orderWorkflow) windowClosed() bool {
	if !w.folded {
		return w.timerFired
	}
	return w.timerFired || (w.st.PayBy != nil && !workflow.Now(w.root).Before(*w.st.PayBy))
}

// graceOpen reports whether the grace after the window is running.
func (w *orderWorkflow) graceOpen() bool {
	if !w.folded {
		return w.inGrace
	}
	return !w.timerFired && w.windowClosed()
}
