package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/temporalgateway"
)

// Register registers the order workflow's types under their contract names
// and the order activities. The workflow calls the activities as local
// activities by method reference; registering them also lets them run as
// regular activities.
func Register(r worker.Registry, a *activities.Activities) {
	RegisterOrderTypes(r)
	r.RegisterActivity(a)
}

// RegisterOrderTypes registers OrderWorkflowV2 under the type orders start
// under, and OrderWorkflow under the type of earlier releases.
func RegisterOrderTypes(r worker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(OrderWorkflowV2, workflow.RegisterOptions{Name: domain.OrderWorkflowName})
	r.RegisterWorkflowWithOptions(OrderWorkflow, workflow.RegisterOptions{Name: domain.OrderWorkflowV1Name})
}

// Activity options. Every call is a local activity (but for a Redis step's
// retries while Redis is away: redisStepYieldsChange): the writes are short,
// and a local activity costs no server round trip, so a drain of many
// thousand reservations is bound by MySQL, not by Temporal. Retries back
// off to 5 s and go on for a day, long enough to ride out an outage of
// Redis or MySQL; after that the workflow fails and reconciliation reruns
// it (the id reuse policy allows a new run after a failed one).
const (
	activityAttemptTimeout = 10 * time.Second
	activityTotalTimeout   = 24 * time.Hour
)

// withLocal retries at most 5 s apart: after a database outage a hold is
// recorded within seconds of the database's return (at 30 s it took up to
// a minute, and a database-path reservation of the same user, which sees
// only recorded holds, got in first).
func withLocal(ctx workflow.Context) workflow.Context {
	return localWithin(ctx, activityAttemptTimeout, activityTotalTimeout, retryBetween(200*time.Millisecond, 5*time.Second))
}

// localWithin sets the local activity options: each attempt bounded by
// attempt, all of them by total.
func localWithin(ctx workflow.Context, attempt, total time.Duration, retry *temporal.RetryPolicy) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout:    attempt,
		ScheduleToCloseTimeout: total,
		RetryPolicy:            retry,
	})
}

// retryBetween is the activities' retry policy: backoff doubling from
// first to at most max, business refusals never retried.
func retryBetween(first, max time.Duration) *temporal.RetryPolicy {
	return &temporal.RetryPolicy{
		InitialInterval:        first,
		BackoffCoefficient:     2,
		MaximumInterval:        max,
		NonRetryableErrorTypes: activities.NonRetryableErrorTypes,
	}
}

// a is only a source of method values: the SDK looks the method up by name
// among the registered activities and runs the worker's instance.
var a *activities.Activities

// OrderWorkflow carries one reservation (one token) from QUEUED to its end:
// it places the order, waits for payment until pay_by, and releases the
// unit on expiry or cancellation, in the database and in Redis.
//
// Any change to the sequence of commands (activities, local activities,
// timers, search attribute upserts, child workflows) must be guarded by
// workflow.GetVersion(ctx, "<change-id>", workflow.DefaultVersion, N), so
// that workflows running across a deploy replay their history unchanged;
// TestReplay proves it against every history in testdata/ (append-only:
// record the new branch under a new tag), TestDeployOfChangedWorkflowCodeMidFlight
// shows the drill.
//
// Retirement rule: a patch's old branch may be removed only when no
// workflow that could take it can still run or be replayed: (1) every
// OrderWorkflow started before the release that added the patch has closed
// (visibility: WorkflowType = 'OrderWorkflow' AND ExecutionStatus =
// 'Running' AND StartTime < <deploy time> counts 0; an order lives at most
// its payment window plus a day of activity retries), (2) the namespace's
// retention has passed since then (queries and resets replay closed
// histories), and (3) the same commit retires the histories in testdata/
// that take the old branch by appending them to testdata/retired.txt (the
// files stay, unchanged; TestReplay no longer replays them). Until then
// keep the branch; after, keep the GetVersion call with the new minimum
// version so later patches can still tell the branches apart. No rollback to a release without the
// patch once a workflow has taken its new branch. See docs/runbook.md,
// "Deploying workflow code".
//
// OrderWorkflow is the type of earlier releases (domain.OrderWorkflowV1Name):
// orders start as OrderWorkflowV2, but workflows an earlier release started
// (or a process of one starts during a deploy) run here, so its branches
// stay under the same rule, and the type itself goes only by it: once no
// process of a release that starts it runs, and no workflow of it can run
// or be replayed.
func OrderWorkflow(ctx workflow.Context, in domain.OrderInput) (domain.OrderState, error) {
	w := newOrderWorkflow(ctx, in)
	// First, so that the validators know the branch from the first update.
	w.folded = workflow.GetVersion(ctx, stepsFoldedChange, workflow.DefaultVersion, 1) == 1
	if err := w.setup(ctx); err != nil {
		return w.st, err
	}
	if w.folded {
		return w.runFolded(ctx)
	}
	return w.run(ctx)
}

func newOrderWorkflow(ctx workflow.Context, in domain.OrderInput) *orderWorkflow {
	return &orderWorkflow{
		in: in,
		// Database-path reservations have no Redis hold: their order was
		// placed in the reserving transaction (the one decision, in
		// domain: inputs carry it in two encodings).
		skipRedis: in.NoRedisHold(),
		st: domain.OrderState{
			Token:  in.Token,
			SaleID: in.SaleID,
			UserID: in.UserID,
			Status: domain.StatusQueued,
		},
		upserted: domain.StatusQueued, // the start options set QUEUED
		root:     ctx,
	}
}

type orderWorkflow struct {
	in        domain.OrderInput
	skipRedis bool
	st        domain.OrderState
	upserted  domain.ReservationStatus

	// paying is true from the moment an accepted pay handler starts until
	// it has recorded the payment (or failed to).
	paying    bool
	payingRef string
	// timerFired is true once the payment window has closed.
	timerFired bool
	// inGrace is true for payGrace after the window closed (payGraceChange):
	// a payment the API received before pay_by is still accepted then.
	inGrace bool
	// releaseTo is the end (CANCELLED or EXPIRED) a release was asked for;
	// empty while none was.
	releaseTo     domain.ReservationStatus
	releaseReason string
	// redisBusy is true while a Redis step runs.
	redisBusy bool
	// folded: the run takes stepsFoldedChange's branch.
	folded bool
	// root is the workflow's context, for the validators' clock.
	root workflow.Context
}

func (w *orderWorkflow) setup(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, domain.QueryStatus, func() (domain.OrderState, error) {
		return w.st, nil
	}); err != nil {
		return fmt.Errorf("set query handler: %w", err)
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, domain.UpdatePay, w.pay,
		workflow.UpdateHandlerOptions{Validator: w.validatePay}); err != nil {
		return fmt.Errorf("set pay handler: %w", err)
	}
	for _, u := range []struct {
		name string
		to   domain.ReservationStatus
	}{
		{domain.UpdateCancel, domain.StatusCancelled},
		{domain.UpdateExpire, domain.StatusExpired},
	} {
		name, to := u.name, u.to
		if err := workflow.SetUpdateHandlerWithOptions(ctx, name,
			func(ctx workflow.Context, req domain.CancelRequest) (domain.OrderState, error) {
				return w.cancel(ctx, to, req)
			},
			workflow.UpdateHandlerOptions{Validator: func(req domain.CancelRequest) error {
				return w.validateCancel(to)
			}}); err != nil {
			return fmt.Errorf("set %s handler: %w", name, err)
		}
	}
	return nil
}

func (w *orderWorkflow) run(ctx workflow.Context) (domain.OrderState, error) {
	logger := workflow.GetLogger(ctx)
	var rec domain.OrderState
	if err := workflow.ExecuteLocalActivity(withLocal(ctx), a.RecordReservation, w.in).Get(ctx, &rec); err != nil {
		return w.st, fmt.Errorf("record reservation: %w", err)
	}
	w.adopt(ctx, rec)

	switch {
	case w.st.Status.Terminal():
		// Only a rerun (after a terminate or a failed run) finds its
		// reservation ended. The run before may have stopped between the
		// database write and the Redis one, so finish the Redis side; both
		// scripts act only from the states they expect, so this is safe
		// when nothing is left to do.
		if err := w.finishRedis(ctx); err != nil {
			return w.st, err
		}
		return w.finish(ctx)

	case w.st.Status == domain.StatusQueued:
		// A cancel accepted before the order exists ends the reservation
		// without an order, and the hold goes back on sale. (An operator's
		// expire of a QUEUED reservation lets the order be placed and then
		// expires it, so the status moves only along the contract's arrows.)
		if w.releaseTo == domain.StatusCancelled {
			if err := w.cancelQueued(ctx); err != nil {
				return w.st, err
			}
			if w.st.Status.Terminal() {
				return w.finish(ctx)
			}
		} else {
			if err := w.placeOrder(ctx); err != nil {
				return w.st, err
			}
			if w.st.Status.Terminal() {
				return w.finish(ctx)
			}
		}

	case w.st.Status == domain.StatusPendingPayment:
		// A rerun: the order exists, so wait with the pay_by decided when
		// it was placed. Redis may still say held if the run before
		// stopped right after placing the order.
		if err := w.advanceRedisBeside(ctx); err != nil {
			return w.st, err
		}
	}

	if w.st.Status != domain.StatusPendingPayment {
		return w.st, fmt.Errorf("reservation %s is %s where PENDING_PAYMENT was expected", w.in.Token, w.st.Status)
	}
	if err := w.awaitPayment(ctx); err != nil {
		return w.st, err
	}
	logger.Info("order ended", "token", w.in.Token, "status", string(w.st.Status))
	return w.finish(ctx)
}

// finish waits for every update handler and Redis step, so that none is
// cut off by the workflow's completion, and returns the final state.
func (w *orderWorkflow) finish(ctx workflow.Context) (domain.OrderState, error) {
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) && !w.redisBusy }); err != nil {
		return w.st, fmt.Errorf("await handlers: %w", err)
	}
	return w.st, nil
}

// adopt takes an activity's answer as the workflow's state and upserts the
// status. It keeps the fail reason the workflow set when the answer has
// none: answers recorded before Reservation.State carried it have none.
func (w *orderWorkflow) adopt(ctx workflow.Context, got domain.OrderState) {
	reason := w.st.FailReason
	w.st = got
	if w.st.FailReason == "" {
		w.st.FailReason = reason
	}
	w.setStatus(ctx, got.Status)
}

// setStatus records a transition and upserts the search attributes, so a
// visibility query (OrderStatus = 'PENDING_PAYMENT') finds the workflow
// by the contract's status name.
func (w *orderWorkflow) setStatus(ctx workflow.Context, s domain.ReservationStatus) {
	w.st.Status = s
	if s == w.upserted {
		return
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx,
		temporalgateway.SaleIDKey.ValueSet(w.in.SaleID),
		temporalgateway.UserIDKey.ValueSet(w.in.UserID),
		temporalgateway.OrderStatusKey.ValueSet(string(s)),
	); err != nil {
		// Visibility only; the order itself is unaffected.
		workflow.GetLogger(ctx).Error("upsert search attributes", "token", w.in.Token, "error", err)
		return
	}
	w.upserted = s
}

// placeOrder creates the order. No stock or a second live order of the
// user ends the reservation FAILED (a business outcome; the workflow still
// completes normally) and releases the Redis hold.
func (w *orderWorkflow) placeOrder(ctx workflow.Context) error {
	var got domain.OrderState
	err := workflow.ExecuteLocalActivity(withLocal(ctx), a.PlaceOrder, w.in.Token).Get(ctx, &got)
	switch {
	case err == nil:
	case refusal(err, domain.ESoldOut): // "NoStock" in older histories
		// The database had no unit for this hold (Redis ran ahead of it,
		// e.g. after losing writes), so Redis must not get one back:
		// restoring it would sell a unit that does not exist.
		return w.failQueued(ctx, domain.FailReasonNoStock, false)
	case refusal(err, domain.EAlreadyPurchased): // "AlreadyPurchased" in older histories
		// The user's unit is taken by another order; this hold's unit was
		// never sold, so it goes back on sale.
		return w.failQueued(ctx, domain.FailReasonAlreadyPurchased, true)
	default:
		return fmt.Errorf("place order: %w", err)
	}
	w.adopt(ctx, got)
	if got.Status == domain.StatusPendingPayment {
		return w.advanceRedisBeside(ctx)
	}
	return nil
}

func (w *orderWorkflow) failQueued(ctx workflow.Context, reason string, restore bool) error {
	var got domain.OrderState
	if err := workflow.ExecuteLocalActivity(withLocal(ctx), a.EndQueued, w.in.Token, domain.StatusFailed, reason).Get(ctx, &got); err != nil {
		return fmt.Errorf("end queued as failed: %w", err)
	}
	if got.Status == domain.StatusFailed {
		w.st.FailReason = reason
		if err := w.releaseRedis(ctx, restore); err != nil {
			return err
		}
	}
	w.adopt(ctx, got)
	return nil
}

// cancelQueued ends a reservation cancelled before its order existed. The
// database status is written first, then the hold goes back on sale; the
// workflow status changes last, so the cancel answers only once the unit
// can be reserved again.
func (w *orderWorkflow) cancelQueued(ctx workflow.Context) error {
	var got domain.OrderState
	if err := workflow.ExecuteLocalActivity(withLocal(ctx), a.EndQueued, w.in.Token, domain.StatusCancelled, w.releaseReason).Get(ctx, &got); err != nil {
		return fmt.Errorf("end queued as cancelled: %w", err)
	}
	if got.Status == domain.StatusCancelled {
		if err := w.releaseRedis(ctx, true); err != nil {
			return err
		}
	}
	w.adopt(ctx, got)
	return nil
}

// awaitPayment races the payment window against the updates.
//
// Race rules:
//   - A pay whose validator accepted it before the timer fired wins: the
//     handler sets paying before it awaits anything, and the expiry path,
//     when the timer fires meanwhile, waits for !paying and then sees PAID.
//   - Once the timer has fired, or a release was asked for, the pay
//     validator rejects (not_payable).
//   - Cancel and expire are rejected while a payment is being recorded.
//   - The first accepted of cancel, expire or the timer decides the end;
//     later ones of another kind are rejected (not_cancellable).
func (w *orderWorkflow) awaitPayment(ctx workflow.Context) error {
	if w.st.PayBy == nil {
		return fmt.Errorf("reservation %s is pending payment without pay_by", w.in.Token)
	}
	timerCtx, cancelTimer := workflow.WithCancel(ctx)
	defer cancelTimer()
	// pay_by was decided once, when the order was placed; a rerun waits
	// only for what is left of it.
	if d := w.st.PayBy.Sub(workflow.Now(ctx)); d > 0 {
		timer := workflow.NewTimer(timerCtx, d)
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
	cancelTimer()
	if err := w.awaitLatePayment(ctx); err != nil {
		return err
	}
	if w.st.Status == domain.StatusPaid {
		return nil
	}
	if w.releaseTo == "" {
		w.releaseTo, w.releaseReason = domain.StatusExpired, "payment window passed"
	}
	return w.release(ctx, w.releaseTo)
}

// payGraceChange versions the grace after the payment window: at version
// 1, once the window closed, the workflow waits payGrace for a payment the
// API received before pay_by (domain.PayRequest.ReceivedAt) but could not
// deliver in time (a slow instance, a worker catching up after a fault),
// so a user who paid within the window is never refused. DefaultVersion
// keeps the commands of histories recorded before it.
const payGraceChange = "pay-grace-after-window"

// payGrace is how long a closed window still takes such a payment.
const payGrace = 3 * time.Second

// awaitLatePayment runs the grace after a window that closed unpaid.
func (w *orderWorkflow) awaitLatePayment(ctx workflow.Context) error {
	if w.st.Status == domain.StatusPaid || w.releaseTo != "" {
		return nil
	}
	if workflow.GetVersion(ctx, payGraceChange, workflow.DefaultVersion, 1) != 1 {
		return nil
	}
	w.inGrace = true
	if _, err := workflow.AwaitWithTimeout(ctx, payGrace, func() bool { return w.st.Status == domain.StatusPaid }); err != nil {
		return fmt.Errorf("await a late payment: %w", err)
	}
	w.inGrace = false
	// A payment accepted in the grace finishes either way.
	if err := workflow.Await(ctx, func() bool { return !w.paying }); err != nil {
		return fmt.Errorf("await a late payment: %w", err)
	}
	return nil
}

// receivedInWindow reports whether a payment the grace may take: received
// by the API at or before pay_by.
func (w *orderWorkflow) receivedInWindow(req domain.PayRequest) bool {
	return w.graceOpen() && w.st.PayBy != nil && !req.ReceivedAt.IsZero() && !req.ReceivedAt.After(*w.st.PayBy)
}

// release ends a pending order as EXPIRED or CANCELLED: the database
// first (order status, bucket +1, ledger restore), then Redis (stock +1,
// buyer mark removed), then the workflow status, which wakes the cancel
// handler: by then the unit is back on sale.
func (w *orderWorkflow) release(ctx workflow.Context, to domain.ReservationStatus) error {
	var got domain.OrderState
	if err := workflow.ExecuteLocalActivity(withLocal(ctx), a.ReleaseOrder, w.in.Token, to).Get(ctx, &got); err != nil {
		return fmt.Errorf("release order as %s: %w", to, err)
	}
	if err := w.releaseRedis(ctx, true); err != nil {
		return err
	}
	w.adopt(ctx, got)
	return nil
}

// finishRedis completes the Redis side of an ended reservation on a rerun.
func (w *orderWorkflow) finishRedis(ctx workflow.Context) error {
	switch w.st.Status {
	case domain.StatusPaid:
		return w.advanceRedis(ctx, domain.TokenPaid, domain.TokenHeld, domain.TokenOrdered)
	case domain.StatusExpired, domain.StatusCancelled:
		return w.releaseRedis(ctx, true)
	case domain.StatusFailed:
		// The reason is not known here; not restoring can only leave a
		// unit unsold (reconciliation reports the drift), restoring
		// wrongly would sell a unit the database does not have.
		return w.releaseRedis(ctx, false)
	}
	return nil
}

// redisFromStateChange versions the Redis step of releases and advances:
// at version 1 it is one SyncRedis activity, which reads the token's state
// in the database and in Redis now, so neither skipRedis (decided at the
// start: a database-path order can be in Redis after a resync) nor the
// restore flag (a rerun's FAILED already_purchased kept its unit) decides
// what it undoes. DefaultVersion keeps today's commands for histories
// recorded before it.
const redisFromStateChange = "redis-step-reads-state"

func (w *orderWorkflow) redisFromState(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, redisFromStateChange, workflow.DefaultVersion, 1) == 1
}

// syncRedis runs one Redis step and waits for it.
func (w *orderWorkflow) syncRedis(ctx workflow.Context) error {
	return w.redisStep(ctx, false)
}

// redisStepYieldsChange versions what a Redis step does when its quick try
// fails (Redis slow or away). At version 1 it retries as a regular
// activity, whose backoff the server keeps, so the workflow task completes
// and updates get in meanwhile; and the step after placing the order
// retries beside the payment wait instead of before it. DefaultVersion
// retried the local activity inside the workflow task for up to a day,
// holding every update (a payment sent in its window was refused once
// Redis came back past pay_by). While Redis
// answers, both run the same single local activity, so the marker is
// recorded only by a workflow that found Redis away.
const redisStepYieldsChange = "redis-step-yields"

func (w *orderWorkflow) redisStepYields(ctx workflow.Context) bool {
	if w.folded {
		return true // the folded branch runs the newest Redis step
	}
	return workflow.GetVersion(ctx, redisStepYieldsChange, workflow.DefaultVersion, 1) == 1
}

// Redis step options: a quick local try that costs no server round trip
// while Redis answers, then (redisStepYieldsChange) an activity retried
// every few seconds for as long as the local activities would be.
const (
	redisQuickBudget = 2 * time.Second
	redisRetryMax    = 5 * time.Second
)

func withQuickLocal(ctx workflow.Context) workflow.Context {
	return localWithin(ctx, redisQuickBudget, redisQuickBudget, retryBetween(100*time.Millisecond, 500*time.Millisecond))
}

func withRetried(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    activityAttemptTimeout,
		ScheduleToCloseTimeout: activityTotalTimeout,
		RetryPolicy:            retryBetween(time.Second, redisRetryMax),
	})
}

// redisStep makes Redis follow the token's state in the database (one
// SyncRedis). Steps run one at a time, in the order asked for: a later step
// reads a later state and must not be overtaken. beside: a step that finds
// Redis away goes on retrying while the caller proceeds (the step after
// placing the order: the payment window is open and a payment must get in);
// later steps wait for it, and the workflow does not end before it.
func (w *orderWorkflow) redisStep(ctx workflow.Context, beside bool) error {
	if err := workflow.Await(ctx, func() bool { return !w.redisBusy }); err != nil {
		return fmt.Errorf("await redis step: %w", err)
	}
	w.redisBusy = true
	var changed bool
	err := workflow.ExecuteLocalActivity(withQuickLocal(ctx), a.SyncRedis, w.in.Token).Get(ctx, &changed)
	if err == nil {
		w.redisBusy = false
		return nil
	}
	if !w.redisStepYields(ctx) {
		w.redisBusy = false
		return fmt.Errorf("sync redis: %w", err)
	}
	workflow.GetLogger(ctx).Warn("redis step: quick try failed, retrying as an activity", "token", w.in.Token, "error", err)
	return w.retryRedis(ctx, beside)
}

// retryRedis runs a Redis step, whose quick try failed, as a regular
// activity retried every few seconds; the caller has set redisBusy, which
// it clears when done. beside: as redisStep's.
func (w *orderWorkflow) retryRedis(ctx workflow.Context, beside bool) error {
	var changed bool
	retry := func(ctx workflow.Context) error {
		defer func() { w.redisBusy = false }()
		if err := workflow.ExecuteActivity(withRetried(ctx), a.SyncRedis, w.in.Token).Get(ctx, &changed); err != nil {
			return fmt.Errorf("sync redis: %w", err)
		}
		return nil
	}
	if !beside {
		return retry(ctx)
	}
	workflow.Go(ctx, func(ctx workflow.Context) {
		if err := retry(ctx); err != nil {
			// The next Redis step (payment or release) syncs from the
			// database again, and reconciliation repairs drift.
			workflow.GetLogger(ctx).Error("redis step beside the payment wait", "token", w.in.Token, "error", err)
		}
	})
	return nil
}

// advanceRedisBeside moves the Redis token to ordered once the order is
// placed, retrying beside the payment wait if Redis is away.
func (w *orderWorkflow) advanceRedisBeside(ctx workflow.Context) error {
	if !w.redisFromState(ctx) {
		return w.advanceRedis(ctx, domain.TokenOrdered, domain.TokenHeld)
	}
	return w.redisStep(ctx, true)
}

func (w *orderWorkflow) releaseRedis(ctx workflow.Context, restore bool) error {
	if w.redisFromState(ctx) {
		return w.syncRedis(ctx)
	}
	if w.skipRedis {
		return nil
	}
	var released bool
	if err := workflow.ExecuteLocalActivity(withLocal(ctx), a.RedisRelease, w.in.SaleID, w.in.UserID, w.in.Token, restore).Get(ctx, &released); err != nil {
		return fmt.Errorf("redis release: %w", err)
	}
	return nil
}

func (w *orderWorkflow) advanceRedis(ctx workflow.Context, to string, from ...string) error {
	if w.redisFromState(ctx) {
		return w.syncRedis(ctx)
	}
	if w.skipRedis {
		return nil
	}
	var moved bool
	if err := workflow.ExecuteLocalActivity(withLocal(ctx), a.RedisAdvance, w.in.SaleID, w.in.Token, to, from).Get(ctx, &moved); err != nil {
		return fmt.Errorf("redis advance to %s: %w", to, err)
	}
	return nil
}

// validatePay accepts a payment only while it can still win: the order is
// pending, the window is open and no release has begun. A replay of the
// accepted payment (same ref) is accepted and answered with the same state.
// Validators do not run on replay, so they only read state.
func (w *orderWorkflow) validatePay(req domain.PayRequest) error {
	if !domain.ValidPaymentRef(req.PaymentRef) {
		return reject(domain.EInvalid, "bad payment_ref")
	}
	switch {
	case w.st.Status == domain.StatusPaid:
		if req.PaymentRef == w.st.PaymentRef {
			return nil
		}
		return reject(domain.ENotPayable, "already paid with another payment_ref")
	case w.paying:
		if req.PaymentRef == w.payingRef {
			return nil
		}
		return reject(domain.ENotPayable, "another payment is being recorded")
	case w.st.Status != domain.StatusPendingPayment:
		return reject(domain.ENotPayable, "reservation is %s", w.st.Status)
	case w.windowClosed() && !w.receivedInWindow(req):
		return reject(domain.ENotPayable, "payment window has closed")
	case w.releaseTo != "":
		return reject(domain.ENotPayable, "reservation is being released as %s", w.releaseTo)
	}
	return nil
}

func (w *orderWorkflow) pay(ctx workflow.Context, req domain.PayRequest) (domain.OrderState, error) {
	if w.st.Status == domain.StatusPaid {
		if req.PaymentRef == w.st.PaymentRef {
			return w.st, nil
		}
		return w.st, reject(domain.ENotPayable, "already paid with another payment_ref")
	}
	if w.paying {
		// The same payment again while it is being recorded: answer with
		// the first one's outcome.
		if err := workflow.Await(ctx, func() bool { return !w.paying }); err != nil {
			return w.st, fmt.Errorf("await payment: %w", err)
		}
		if w.st.Status == domain.StatusPaid && req.PaymentRef == w.st.PaymentRef {
			return w.st, nil
		}
		return w.st, reject(domain.ENotPayable, "reservation is %s", w.st.Status)
	}
	if w.st.Status != domain.StatusPendingPayment || (w.windowClosed() && !w.receivedInWindow(req)) || w.releaseTo != "" {
		// Only reached on a history the validator never saw.
		return w.st, reject(domain.ENotPayable, "reservation is %s", w.st.Status)
	}
	// Set before the first await: from here on the expiry waits for us.
	w.paying, w.payingRef = true, req.PaymentRef
	defer func() { w.paying = false }()
	if w.folded {
		return w.payFolded(ctx, req)
	}

	var got domain.OrderState
	if err := workflow.ExecuteLocalActivity(withLocal(ctx), a.MarkPaid, w.in.Token, req.PaymentRef).Get(ctx, &got); err != nil {
		if refusal(err, domain.ENotPayable) { // "NotPayable" in older histories
			return w.st, reject(domain.ENotPayable, "reservation is not payable")
		}
		return w.st, fmt.Errorf("mark paid: %w", err)
	}
	w.adopt(ctx, got)
	if err := w.advanceRedis(ctx, domain.TokenPaid, domain.TokenOrdered, domain.TokenHeld); err != nil {
		// The payment is recorded in the database, which decides; a
		// rerun or reconciliation moves the Redis token later.
		workflow.GetLogger(ctx).Error("redis advance to paid", "token", w.in.Token, "error", err)
	}
	return w.st, nil
}

// validateCancel accepts a cancel or an expire while the reservation holds
// a unit that is not being paid, and a repeat once it ended that way.
func (w *orderWorkflow) validateCancel(to domain.ReservationStatus) error {
	switch {
	case w.st.Status == to, w.releaseTo == to:
		return nil
	case w.paying:
		return reject(domain.ENotCancellable, "a payment is being recorded")
	case w.releaseTo != "":
		return reject(domain.ENotCancellable, "reservation is being released as %s", w.releaseTo)
	case w.windowClosed():
		return reject(domain.ENotCancellable, "payment window has closed")
	case w.st.Status == domain.StatusQueued, w.st.Status == domain.StatusPendingPayment:
		return nil
	}
	return reject(domain.ENotCancellable, "reservation is %s", w.st.Status)
}

// cancel asks for the release and answers once it is done, so the unit is
// back on sale when the caller hears CANCELLED.
func (w *orderWorkflow) cancel(ctx workflow.Context, to domain.ReservationStatus, req domain.CancelRequest) (domain.OrderState, error) {
	if w.releaseTo == "" && !w.st.Status.Terminal() {
		w.releaseTo, w.releaseReason = to, req.Reason
	}
	if err := workflow.Await(ctx, func() bool { return w.st.Status.Terminal() }); err != nil {
		return w.st, fmt.Errorf("await release: %w", err)
	}
	if w.st.Status != to {
		return w.st, reject(domain.ENotCancellable, "reservation is %s", w.st.Status)
	}
	return w.st, nil
}
