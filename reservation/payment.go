package reservation

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
	"github.com/seckill/seckill/status"
	"github.com/seckill/seckill/store"
	"github.com/seckill/seckill/temporalgateway"
)

// Bounds of the order use cases' calls.
const (
	updateTimeout = 10 * time.Second
	dbTimeout     = 5 * time.Second
	adoptWait     = 5 * time.Second
	// settleWait bounds how long a provider's payment waits for a
	// reservation whose release (or another payment) is being recorded.
	settleWait = 5 * time.Second
)

// OrdersDeps are what the order use cases need. Temporal may be nil (then
// pay and cancel answer 503). Repair starts a new run for a live
// reservation whose workflow closed (reconcile's closed-workflow policy);
// Settle waits until a change may be acknowledged (status.Reader.Settle);
// Returned tells the sale cache a unit is back on sale; PriceOf is a
// sale's price (for a payment that arrives before the order exists).
type OrdersDeps struct {
	Temporal     client.Client
	Store        *store.Store
	Redis        *redisgateway.Client
	RedisTimeout time.Duration
	Reservations *Service
	Repair       func(ctx context.Context, token string) (bool, error)
	Settle       func(ctx context.Context, changed time.Time)
	Returned     func(saleID int64)
	PriceOf      func(ctx context.Context, saleID int64) (int64, error)
	Logger       *slog.Logger
}

// Orders are the use cases on a reservation past its 202: the user's
// payment and cancel, and the provider's payment confirmation, each
// through the reservation's workflow, answered from the database once the
// workflow has closed. Refusals are *domain.Error.
type Orders struct{ d OrdersDeps }

// NewOrders is the order use cases of d.
func NewOrders(d OrdersDeps) *Orders { return &Orders{d: d} }

// Own checks userID owns the token (database row or Redis hold) and
// returns it; a token the database does not know yet is a HeldReservation
// with the token's Redis state.
func (o *Orders) Own(ctx context.Context, userID int64, token string, saleID int64) (*domain.Reservation, error) {
	r, err := status.Stored(ctx, o.d.Store, token)
	if err != nil {
		reqid.Logger(ctx, o.d.Logger).Warn("read reservation", "token", token, "err", err)
		return nil, domain.Unavailable("reservation store unavailable")
	}
	if r != nil {
		if r.UserID != userID {
			return nil, domain.ErrNoReservation
		}
		return r, nil
	}
	if state, owner, ok := o.redisHold(ctx, saleID, token); ok && owner == userID {
		r := domain.HeldReservation(token, saleID, owner)
		r.TokenState = state
		return r, nil
	}
	return nil, domain.ErrNoReservation
}

// redisHold reads a token's Redis state; ok is false when Redis does not
// know it or cannot answer now.
func (o *Orders) redisHold(ctx context.Context, saleID int64, token string) (state string, userID int64, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, o.d.RedisTimeout)
	defer cancel()
	state, userID, found, err := o.d.Redis.TokenHold(ctx, saleID, token)
	if err != nil {
		reqid.Logger(ctx, o.d.Logger).Warn("read token state", "sale_id", saleID, "err", err)
		return "", 0, false
	}
	return state, userID, found
}

// Pay records the owner's payment on the reservation.
func (o *Orders) Pay(ctx context.Context, userID int64, token string, saleID int64, req domain.PayRequest) (domain.ReservationView, error) {
	if _, err := o.Own(ctx, userID, token, saleID); err != nil {
		return domain.ReservationView{}, err
	}
	return o.pay(ctx, token, req)
}

// pay records a payment through the workflow's pay update (its
// ReceivedAt lets the workflow take it a little after pay_by); once the
// workflow has closed, the database answers (the same ref on a PAID row is
// a replay).
func (o *Orders) pay(ctx context.Context, token string, req domain.PayRequest) (domain.ReservationView, error) {
	ref := req.PaymentRef
	st, err := o.update(ctx, token, "pay-"+ref, domain.UpdatePay, req)
	if domain.ErrorCode(err) == domain.ENotPayable && o.awaitAdopted(ctx, token) == domain.StatusPendingPayment {
		// A database-path order is PENDING_PAYMENT (and shown so) from its
		// transaction on, before its workflow has read it; the workflow
		// refuses while it still says QUEUED. Ask again now that it knows
		// (a refusal for another reason is given again).
		st, err = o.update(ctx, token, "pay-"+ref, domain.UpdatePay, req)
	}
	if errors.Is(err, temporalgateway.ErrClosed) && o.repairClosed(ctx, token) {
		// A new run took the reservation over, or it was released: ask
		// again, so the payment settles now (paid, or refused and then
		// recorded for a refund by the provider's confirmation).
		st, err = o.update(ctx, token, "pay-"+ref, domain.UpdatePay, req)
	}
	switch {
	case err == nil:
		o.d.Settle(ctx, time.Now())
		return st.View(), nil
	case errors.Is(err, temporalgateway.ErrClosed):
		r, err := o.stored(ctx, token)
		if err != nil {
			return domain.ReservationView{}, err
		}
		if r != nil && r.Status == domain.StatusPaid && r.PaymentRef == ref {
			return r.View(), nil
		}
		return domain.ReservationView{}, domain.ErrNotPayable
	}
	return domain.ReservationView{}, err
}

// Cancel cancels the owner's reservation: one without an order at once
// (Service.CancelQueued), one with an order through its workflow.
func (o *Orders) Cancel(ctx context.Context, userID int64, token string, saleID int64) (domain.ReservationView, error) {
	r, err := o.Own(ctx, userID, token, saleID)
	if err != nil {
		return domain.ReservationView{}, err
	}
	if r.Status == domain.StatusQueued || r.Status == domain.StatusCancelled {
		ended, err := o.d.Reservations.CancelQueued(ctx, userID, saleID, token)
		if err != nil {
			return domain.ReservationView{}, err
		}
		if ended != nil && ended.Status == domain.StatusCancelled {
			o.d.Returned(saleID)
			o.d.Settle(ctx, time.Now())
			return ended.View(), nil
		}
		// The order was placed meanwhile: its workflow cancels it.
	}
	cancelReq := domain.CancelRequest{Reason: "user"}
	st, err := o.update(ctx, token, "cancel", domain.UpdateCancel, cancelReq)
	if errors.Is(err, temporalgateway.ErrClosed) && o.repairClosed(ctx, token) {
		// A live reservation whose workflow had closed (or not started
		// yet) has one now: ask it.
		st, err = o.update(ctx, token, "cancel", domain.UpdateCancel, cancelReq)
	}
	switch {
	case err == nil:
		if st.Status == domain.StatusCancelled {
			o.d.Returned(saleID)
		}
		o.d.Settle(ctx, time.Now())
		return st.View(), nil
	case errors.Is(err, temporalgateway.ErrClosed):
		r, err := o.stored(ctx, token)
		if err != nil {
			return domain.ReservationView{}, err
		}
		if r != nil && r.Status == domain.StatusCancelled {
			return r.View(), nil
		}
		return domain.ReservationView{}, domain.ErrNotCancellable
	}
	return domain.ReservationView{}, err
}

// stored reads the token's row; a failure is a 503.
func (o *Orders) stored(ctx context.Context, token string) (*domain.Reservation, error) {
	r, err := status.Stored(ctx, o.d.Store, token)
	if err != nil {
		reqid.Logger(ctx, o.d.Logger).Warn("read reservation", "token", token, "err", err)
		return nil, domain.Unavailable("reservation store unavailable")
	}
	return r, nil
}

// repairClosed repairs a live reservation whose workflow has closed; it
// reports whether it did.
func (o *Orders) repairClosed(ctx context.Context, token string) bool {
	repaired, err := o.d.Repair(ctx, token)
	if err != nil {
		reqid.Logger(ctx, o.d.Logger).Warn("repair of a closed workflow failed", "token", token, "err", err)
		return false
	}
	if repaired {
		o.awaitAdopted(ctx, token)
	}
	return repaired
}

// awaitAdopted waits (briefly) until the token's workflow has read its
// reservation: a new run answers QUEUED, and refuses a payment, until then.
// It returns the status the workflow then answers ("" when it did not).
func (o *Orders) awaitAdopted(ctx context.Context, token string) domain.ReservationStatus {
	if o.d.Temporal == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, adoptWait)
	defer cancel()
	for {
		st, err := temporalgateway.Status(ctx, o.d.Temporal, token)
		if err == nil && st.Status != domain.StatusQueued {
			return st.Status
		}
		if errors.Is(err, temporalgateway.ErrClosed) {
			return "" // released and finished already
		}
		select {
		case <-ctx.Done():
			return ""
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// update runs an update on the reservation's workflow and waits for its
// result; Temporal's own failure is a 503.
func (o *Orders) update(ctx context.Context, token, updateID, name string, arg any) (domain.OrderState, error) {
	if o.d.Temporal == nil {
		return domain.OrderState{}, domain.Unavailable("workflow service unavailable")
	}
	ctx, cancel := context.WithTimeout(ctx, updateTimeout)
	defer cancel()
	st, err := temporalgateway.Update(ctx, o.d.Temporal, token, updateID, name, arg)
	var de *domain.Error
	if err != nil && !errors.Is(err, temporalgateway.ErrClosed) && !errors.As(err, &de) {
		reqid.Logger(ctx, o.d.Logger).Warn("order workflow update failed", "token", token, "err", fmt.Errorf("%s: %w", name, err))
		return st, domain.Unavailable("workflow service unavailable, retry")
	}
	return st, err
}

// Confirmation is what a provider's payment came to: the reservation's
// view (paid now, or a replay of its payment), or a refund to give.
type Confirmation struct {
	View   *domain.ReservationView
	Refund *domain.RefundRequired
}

// Confirm records a payment the provider confirmed (signature and body
// checked): paid through the workflow like the user's, or, for a
// reservation that no longer takes it, recorded for a refund.
func (o *Orders) Confirm(ctx context.Context, token string, saleID int64, ref string, amount int64, received time.Time) (Confirmation, error) {
	r, err := o.stored(ctx, token)
	if err != nil {
		return Confirmation{}, err
	}
	if r == nil {
		if state, _, ok := o.redisHold(ctx, saleID, token); ok && state == domain.TokenHeld {
			return Confirmation{}, domain.Errorf(domain.ENotPayable, "the order is not created yet; retry later")
		}
		return Confirmation{}, domain.ErrNoReservation
	}
	due := r.AmountCents
	if due == 0 {
		// Before the order exists the sale's price is due.
		if due, err = o.d.PriceOf(ctx, r.SaleID); err != nil {
			return Confirmation{}, err
		}
	}
	if amount != due {
		reqid.Logger(ctx, o.d.Logger).Warn("webhook: amount mismatch", "token", token, "payment_ref", ref, "amount_cents", amount, "due_cents", due)
		return Confirmation{}, domain.Errorf(domain.EAmountMismatch, "amount_cents does not match the order's amount")
	}
	if c, done, err := o.settled(ctx, r, ref, amount); done {
		return c, err
	}
	v, err := o.pay(ctx, token, domain.PayRequest{PaymentRef: ref, ReceivedAt: received})
	if err == nil {
		return Confirmation{View: &v}, nil
	}
	if domain.ErrorCode(err) != domain.ENotPayable {
		return Confirmation{}, err
	}
	// The workflow refused: the window closed, a release or another
	// payment is being recorded. Decide from the database once it settles.
	if r, err = o.awaitSettled(ctx, token); err != nil {
		return Confirmation{}, err
	}
	if c, done, err := o.settled(ctx, r, ref, amount); done {
		return c, err
	}
	if r.Status == domain.StatusPendingPayment {
		return Confirmation{}, domain.Unavailable("the reservation is changing state; retry")
	}
	return Confirmation{}, domain.ErrNotPayable
}

// settled answers a payment for a reservation that no longer awaits one:
// the same payment again (its view) or one to refund, recorded. done is
// false while r still takes a payment.
func (o *Orders) settled(ctx context.Context, r *domain.Reservation, ref string, amount int64) (Confirmation, bool, error) {
	if r.Status == domain.StatusPaid && r.PaymentRef == ref {
		v := r.View()
		return Confirmation{View: &v}, true, nil
	}
	reason := r.RefundReason(ref)
	if reason == "" {
		return Confirmation{}, false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	rf, err := o.d.Store.RecordRefund(ctx, store.Refund{
		Token: r.Token, SaleID: r.SaleID, UserID: r.UserID, PaymentRef: ref, AmountCents: amount, Reason: reason,
	})
	if err != nil {
		reqid.Logger(ctx, o.d.Logger).Error("webhook: record refund", "token", r.Token, "payment_ref", ref, "err", err)
		return Confirmation{}, true, domain.Unavailable("refund store unavailable; retry")
	}
	reqid.Logger(ctx, o.d.Logger).Info("payment to refund", "token", r.Token, "sale_id", r.SaleID, "payment_ref", ref,
		"amount_cents", rf.AmountCents, "reason", rf.Reason, "refund_id", rf.ID)
	return Confirmation{Refund: &domain.RefundRequired{
		Status: domain.StatusRefundRequired, Token: rf.Token, SaleID: rf.SaleID, PaymentRef: rf.PaymentRef,
		AmountCents: rf.AmountCents, Reason: rf.Reason, ReservationStatus: r.Status,
		RefundID: rf.ID, RecordedAt: rf.CreatedAt,
	}}, true, nil
}

// awaitSettled polls the reservation until it leaves PENDING_PAYMENT or
// settleWait passes; it returns the last row read.
func (o *Orders) awaitSettled(ctx context.Context, token string) (*domain.Reservation, error) {
	deadline := time.Now().Add(settleWait)
	for {
		r, err := o.stored(ctx, token)
		if err != nil {
			return nil, err
		}
		if r == nil {
			return nil, domain.ErrNoReservation
		}
		if r.Status != domain.StatusPendingPayment || time.Now().After(deadline) {
			return r, nil
		}
		select {
		case <-ctx.Done():
			return r, nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}
