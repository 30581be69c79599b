package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/histories"
)

// Scenario 3 ends with the Temporal histories of orders of each end: a
// sale of its own with a short payment window, historyOrders orders
// reserved through the API, half of them paid, the rest left to expire.
// Their events, markers and upserts are what Temporal stores and bills
// for an order (workflows.TestOrderEventsPerOrder holds the same counts
// on the test stack).
const (
	historyOrders = 10
	historyWindow = 10 // seconds to pay
)

// orderHistories are the counts of each end's orders.
type orderHistories struct {
	paid, expired []histories.Count
}

// most is the largest of each field over every group's counts.
func most(groups ...[]histories.Count) histories.Count {
	var m histories.Count
	for _, counts := range groups {
		for _, c := range counts {
			m.Total, m.Markers, m.Upserts = max(m.Total, c.Total), max(m.Markers, c.Markers), max(m.Upserts, c.Upserts)
			m.TimersStarted, m.WorkflowTasks = max(m.TimersStarted, c.TimersStarted), max(m.WorkflowTasks, c.WorkflowTasks)
		}
	}
	return m
}

// totals is each history's event count, for the report's note.
func totals(counts []histories.Count) []int {
	out := make([]int, len(counts))
	for i, c := range counts {
		out[i] = c.Total
	}
	slices.Sort(out)
	return out
}

// orderHistories reserves, pays and lets expire historyOrders orders on
// api, waits for their workflows to close and counts their histories.
func (r *runner) orderHistories(ctx context.Context, api *Proc) (orderHistories, error) {
	var h orderHistories
	s, err := r.saleWindow(ctx, api, "histories", historyOrders, 1, true, historyWindow)
	if err != nil {
		return h, err
	}
	toks, _, err := r.users(historyOrders)
	if err != nil {
		return h, err
	}
	// Concurrently: an expiring order takes its window and the grace.
	counts := make([]histories.Count, historyOrders)
	ended := make([]domain.ReservationStatus, historyOrders)
	g, gctx := errgroup.WithContext(ctx)
	for i, tok := range toks {
		g.Go(func() error {
			var err error
			counts[i], ended[i], err = r.endOrder(gctx, client.New(api.URL, tok, 10*time.Second), s.ID, i, paidOrder(i))
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return h, err
	}
	for i, c := range counts {
		want := domain.StatusExpired
		if paidOrder(i) {
			want = domain.StatusPaid
			h.paid = append(h.paid, c)
		} else {
			h.expired = append(h.expired, c)
		}
		if ended[i] != want {
			r.violation("scenario 3: history order %d ended %s, want %s", i, ended[i], want)
		}
	}
	return h, nil
}

// paidOrder says whether the i-th order is paid (the first half) or left to
// expire.
func paidOrder(i int) bool { return i < historyOrders/2 }

// endOrder reserves for one user, pays when pay, waits for the order's
// workflow to close and counts its history; it says how the order ended.
func (r *runner) endOrder(ctx context.Context, c *client.Client, saleID int64, i int, pay bool) (histories.Count, domain.ReservationStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	acc, err := c.Reserve(ctx, saleID, fmt.Sprintf("history-%03d", i))
	if err != nil {
		return histories.Count{}, "", fmt.Errorf("histories: reserve %d: %w", i, err)
	}
	// PENDING_PAYMENT: its workflow runs (the relay started it).
	if err := waitReservation(ctx, c, acc.Token, domain.StatusPendingPayment); err != nil {
		return histories.Count{}, "", err
	}
	if pay {
		if _, err := c.Pay(ctx, acc.Token, fmt.Sprintf("history-pay-%03d", i)); err != nil {
			return histories.Count{}, "", fmt.Errorf("histories: pay %s: %w", acc.Token, err)
		}
	}
	id := domain.OrderWorkflowID(acc.Token)
	var st domain.OrderState
	if err := r.tc.GetWorkflow(ctx, id, "").Get(ctx, &st); err != nil {
		return histories.Count{}, "", fmt.Errorf("histories: order %s: %w", id, err)
	}
	events, err := histories.Read(ctx, r.tc, id, "")
	if err != nil {
		return histories.Count{}, "", fmt.Errorf("histories: %w", err)
	}
	return histories.CountEvents(events), st.Status, nil
}

// waitReservation polls the reservation until it is want.
func waitReservation(ctx context.Context, c *client.Client, token string, want domain.ReservationStatus) error {
	for {
		v, err := c.Reservation(ctx, token)
		if err == nil && v.Status == want {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("histories: reservation %s not %s (last: %s, %v): %w", token, want, v.Status, err, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// figures are the histories' figures: the most events of an order of
// each end, and the most upserts and workflow tasks of any.
func (h orderHistories) figures() []Figure {
	paid, expired, all := most(h.paid), most(h.expired), most(h.paid, h.expired)
	return []Figure{
		{Name: "Temporal events per expired order (most)", Value: float64(expired.Total), Unit: "events", Target: "≤ 12"},
		{Name: "Temporal events per paid order (most)", Value: float64(paid.Total), Unit: "events", Target: "≤ 14"},
		{Name: "search-attribute upserts per order (most)", Value: float64(all.Upserts), Unit: "upserts", Target: "≤ 1"},
		{Name: "workflow tasks per order (most)", Value: float64(all.WorkflowTasks), Unit: "tasks"},
	}
}

// note says what each history held.
func (h orderHistories) note() string {
	all := most(h.paid, h.expired)
	return fmt.Sprintf("histories of %d orders of a sale of their own (payment window %d s), read from Temporal after their workflows closed: paid %v events, expired %v; markers at most %d, timers started %d",
		len(h.paid)+len(h.expired), historyWindow, totals(h.paid), totals(h.expired), all.Markers, all.TimersStarted)
}
