package chaos

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/test/finalstate"
)

// SaleState is one sale's final state, read after the quiet period and
// before the probes, with the API's reconciliation report.
type SaleState struct {
	finalstate.Sale
	// Reconciliation is the API's report after the checker's own checks.
	ReconConsistent    bool     `json:"recon_consistent"`
	ReconDiscrepancies []string `json:"recon_discrepancies"`
	ReconErr           string   `json:"recon_err,omitempty"`
	// Waiting is the sale's waitlist (user -> join number) as read at
	// Final.WaitlistsAt, before the run's waiters left it.
	Waiting map[int64]int64 `json:"waiting,omitempty"`
}

// Final is the state the checker judges.
type Final struct {
	// At is when the state was read (after the quiet period).
	At    time.Time   `json:"at"`
	Sales []SaleState `json:"sales"`
	// WaitlistsAt is when the waitlists were read (SaleState.Waiting).
	WaitlistsAt time.Time `json:"waitlists_at,omitzero"`
}

// Violation is one broken invariant.
type Violation struct {
	Invariant string `json:"invariant"`
	Sale      int64  `json:"sale,omitempty"`
	Token     string `json:"token,omitempty"`
	User      int64  `json:"user,omitempty"`
	At        time.Time
	Detail    string `json:"detail"`
}

func (v Violation) String() string {
	s := fmt.Sprintf("%s: sale %d", v.Invariant, v.Sale)
	if v.User != 0 {
		s += fmt.Sprintf(" user %d", v.User)
	}
	if v.Token != "" {
		s += " token " + v.Token
	}
	return s + ": " + v.Detail
}

// Invariants, in the order the report lists them.
const (
	IOversold       = "no_unit_oversold"
	IAcceptedEnded  = "every_202_ended"           // PAID, CANCELLED, EXPIRED; never FAILED, whatever the fault
	IOneHold        = "no_second_202_to_a_holder" // a user whose 202's reservation is live gets no 202 for another request
	IPaymentSettled = "confirmed_payment_is_paid_or_refund"
	IFreshStock     = "fresh_users_buy_exactly_what_is_free"
	IUserFree       = "ended_users_can_reserve_again"
	IOneWorkflow    = "one_workflow_per_reservation"
	IReconciliation = "reconciliation_agrees"
	IPayInWindow    = "payment_in_window_accepted" // a user paying a PENDING_PAYMENT reservation before pay_by is not refused
	IWaitlistFIFO   = "waitlist_served_in_order"   // no unit handed to a waiter while one who joined earlier still waited
)

// Invariants lists every invariant the checker proves.
var Invariants = []string{IOversold, IAcceptedEnded, IOneHold, IPaymentSettled, IPayInWindow, IFreshStock, IUserFree, IOneWorkflow, IReconciliation,
	IWaitlistFIFO, IHealthyServe, IModeStable}

// Probe operations (the runner's final requests, KindProbe).
const (
	OpProbeFresh   = "probe_fresh"   // a fresh user reserves until sold out
	OpProbeAgain   = "probe_again"   // a user whose reservations ended reserves again
	OpProbeWebhook = "probe_webhook" // the provider repeats an unsettled webhook
)

// Check returns every invariant the history and final state break, and how
// many cases each invariant examined.
func Check(h []Event, f Final) ([]Violation, map[string]int) {
	c := &checker{h: h, f: f, spans: Spans(h), checked: map[string]int{}}
	for _, s := range f.Sales {
		c.sale(s)
		c.waitlist(s)
	}
	c.accepted()
	c.oneHold()
	c.payments()
	c.payInWindow()
	c.healthyServe()
	c.modeStable()
	return c.out, c.checked
}

type checker struct {
	h       []Event
	f       Final
	spans   []FaultSpan
	out     []Violation
	checked map[string]int
}

func (c *checker) add(inv string, sale int64, user int64, token, format string, args ...any) {
	c.out = append(c.out, Violation{Invariant: inv, Sale: sale, User: user, Token: token, Detail: fmt.Sprintf(format, args...)})
}

func (c *checker) saleState(id int64) *SaleState {
	for i := range c.f.Sales {
		if c.f.Sales[i].SaleID == id {
			return &c.f.Sales[i]
		}
	}
	return nil
}

// sale checks what one sale's final state alone must show.
func (c *checker) sale(s SaleState) {
	for _, f := range s.Check() {
		inv := IOversold
		if f.Kind == finalstate.NoWorkflow || f.Kind == finalstate.StrayWorkflow {
			inv = IOneWorkflow
		}
		c.add(inv, s.SaleID, f.User, f.Token, "%s", f.Detail)
	}
	paid, pending := c.saleOversold(s)
	c.saleFreshStock(s, paid, pending)
	c.saleUsersFree(s)
	c.saleWorkflows(s)
	c.saleReconciliation(s)
}

// saleOversold: no unit oversold (live reservations and orders within
// stock, buckets + live = stock; finalstate.Check adds one live unit per
// user, one order and one deduction per token); returns the PAID and
// PENDING_PAYMENT reservations.
func (c *checker) saleOversold(s SaleState) (paid, pending int64) {
	var liveOrders int64
	for _, r := range s.Reservations {
		switch r.Status {
		case domain.StatusPaid:
			paid++
		case domain.StatusPendingPayment:
			pending++
		}
		if r.OrderStatus.Live() {
			liveOrders++
		}
	}
	c.checked[IOversold]++
	if paid+pending > s.StockTotal {
		c.add(IOversold, s.SaleID, 0, "", "%d PAID + %d PENDING_PAYMENT reservations for %d units", paid, pending, s.StockTotal)
	}
	if s.BucketStock+liveOrders > s.StockTotal {
		c.add(IOversold, s.SaleID, 0, "", "buckets %d + live orders %d > stock_total %d", s.BucketStock, liveOrders, s.StockTotal)
	}
	// Redis offering more than is free is not yet a sale: the fresh-user
	// probe below finds it (more 202s than free units).
	return paid, pending
}

// saleFreshStock: fresh users buy exactly stock_total - PAID -
// PENDING_PAYMENT.
func (c *checker) saleFreshStock(s SaleState, paid, pending int64) {
	c.checked[IFreshStock]++
	want := s.StockTotal - paid - pending
	var got int64
	var last *Event
	for i := range c.h {
		e := &c.h[i]
		if e.Kind == KindProbe && e.Op == OpProbeFresh && e.Sale == s.SaleID {
			if e.HTTP == http.StatusAccepted {
				got++
			}
			last = e
		}
	}
	switch {
	case last == nil:
		c.add(IFreshStock, s.SaleID, 0, "", "no fresh-user probe ran (%d units should be free)", want)
	case last.HTTP != http.StatusGone:
		c.add(IFreshStock, s.SaleID, 0, "", "the probe ended on %d %s%s, not 410 sold_out, after %d of %d free units", last.HTTP, last.Code, last.Err, got, want)
	case got != want:
		c.add(IFreshStock, s.SaleID, 0, "", "fresh users bought %d units; stock_total %d - PAID %d - PENDING_PAYMENT %d = %d (buckets %d, redis %d)",
			got, s.StockTotal, paid, pending, want, s.BucketStock, s.RedisStock)
	}
}

// saleUsersFree: users whose reservations all ended can reserve again.
func (c *checker) saleUsersFree(s SaleState) {
	ended := map[int64]bool{}
	for _, r := range s.Reservations {
		if _, seen := ended[r.UserID]; !seen {
			ended[r.UserID] = true
		}
		if !r.Status.Terminal() || r.Status == domain.StatusPaid {
			ended[r.UserID] = false
		}
	}
	again := map[int64]*Event{}
	for i := range c.h {
		e := &c.h[i]
		if e.Kind == KindProbe && e.Op == OpProbeAgain && e.Sale == s.SaleID {
			again[e.User] = e
		}
	}
	// Users the sale would not answer at all are one finding of the sale
	// (it never sells again), not one per user.
	var unprobed, silent []string
	for _, u := range slices.Sorted(maps.Keys(ended)) {
		if !ended[u] {
			continue
		}
		c.checked[IUserFree]++
		e, ok := again[u]
		switch {
		case !ok:
			unprobed = append(unprobed, fmt.Sprint(u))
		case e.HTTP == http.StatusConflict && e.Code == "already_purchased":
			c.add(IUserFree, s.SaleID, u, "", "every reservation ended, yet a new one answers 409 already_purchased")
		case e.HTTP == 0 || e.HTTP == http.StatusServiceUnavailable:
			silent = append(silent, fmt.Sprint(u))
		}
	}
	if len(unprobed) > 0 {
		c.add(IUserFree, s.SaleID, 0, "", "%d users whose reservations ended were never probed: %s", len(unprobed), strings.Join(first(unprobed, 5), ", "))
	}
	if len(silent) > 0 {
		c.add(IUserFree, s.SaleID, 0, "", "%d users whose reservations ended got no answer reserving again (503 or none): %s", len(silent), strings.Join(first(silent, 5), ", "))
	}
}

// saleWorkflows: one workflow per reservation (finalstate.Check finds
// those without one and workflows without a reservation); none running past
// its window.
func (c *checker) saleWorkflows(s SaleState) {
	for _, r := range s.Reservations {
		c.checked[IOneWorkflow]++
		w := s.Workflows[domain.OrderWorkflowID(r.Token)]
		switch {
		case w.Runs == 0:
		case w.Running > 1:
			c.add(IOneWorkflow, s.SaleID, r.UserID, r.Token, "%d runs running at once", w.Running)
		case w.Running == 1 && !r.PayBy.IsZero() && c.f.At.After(r.PayBy.Add(30*time.Second)):
			c.add(IOneWorkflow, s.SaleID, r.UserID, r.Token, "still running %s after pay_by (%s)", c.f.At.Sub(r.PayBy).Round(time.Second), r.Status)
		case w.Running == 0 && !r.Status.Terminal():
			c.add(IOneWorkflow, s.SaleID, r.UserID, r.Token, "%s reservation, but its workflow is closed (%d runs): nothing will end it", r.Status, w.Runs)
		case w.Running == 1 && r.Status.Terminal():
			c.add(IOneWorkflow, s.SaleID, r.UserID, r.Token, "workflow running for a %s reservation", r.Status)
		}
	}
}

// saleReconciliation: reconciliation, asked last, must agree.
func (c *checker) saleReconciliation(s SaleState) {
	c.checked[IReconciliation]++
	switch {
	case s.ReconErr != "":
		c.add(IReconciliation, s.SaleID, 0, "", "no report: %s", s.ReconErr)
	case !s.ReconConsistent || len(s.ReconDiscrepancies) > 0:
		c.add(IReconciliation, s.SaleID, 0, "", "consistent=%v, %d discrepancies: %s", s.ReconConsistent, len(s.ReconDiscrepancies), strings.Join(first(s.ReconDiscrepancies, 5), "; "))
	}
}

// waitlist checks that a sale's waitlist was served first in, first out:
// a unit handed over (recorded) before the waitlists were read went to a
// join number below every one still waiting then. Join numbers only grow
// (even across lost keys) and a hand-over serves the head, so a waiter who
// joined earlier and was still there had to be served (or leave) first. A
// hand-over recorded late (MySQL was down) may read as after; it is then
// not judged. A waiter whose own hand-over is recorded (its removal lost
// with Redis's last second of writes) is not one still waiting.
func (c *checker) waitlist(s SaleState) {
	if c.f.WaitlistsAt.IsZero() {
		return
	}
	type join struct{ user, n int64 }
	served := map[join]bool{}
	for _, r := range s.Reservations {
		if n, ok := domain.WaitlistJoinNumber(r.RequestID); ok {
			served[join{r.UserID, n}] = true
		}
	}
	for _, r := range s.Reservations {
		n, ok := domain.WaitlistJoinNumber(r.RequestID)
		if !ok {
			continue
		}
		c.checked[IWaitlistFIFO]++
		if !r.CreatedAt.Before(c.f.WaitlistsAt) {
			continue
		}
		for _, u := range slices.Sorted(maps.Keys(s.Waiting)) {
			if earlier := s.Waiting[u]; earlier < n && !served[join{u, earlier}] {
				c.add(IWaitlistFIFO, s.SaleID, r.UserID, r.Token, "join #%d was handed a unit at %s while user %d (join #%d) still waited", n, fmtTime(r.CreatedAt), u, earlier)
			}
		}
	}
}

// accepted checks that every 202 (at once or on a replay) ended PAID,
// CANCELLED or EXPIRED, or FAILED where a write-losing fault may explain it.
func (c *checker) accepted() {
	type acc struct {
		e   Event
		at  time.Time // first 202
		sid int64
	}
	tokens := map[string]*acc{}
	var order []string
	for _, e := range c.h {
		if e.Kind != KindRequest || e.Op != OpReserve || e.HTTP != http.StatusAccepted || e.Token == "" {
			continue
		}
		if _, ok := tokens[e.Token]; !ok {
			// The hold may date from the first attempt with this request_id.
			at := c.firstAttempt(e)
			tokens[e.Token] = &acc{e: e, at: at, sid: e.Sale}
			order = append(order, e.Token)
		}
	}
	if len(order) == 0 {
		c.add(IAcceptedEnded, 0, 0, "", "the history holds no 202: the run proves nothing")
	}
	for _, tok := range order {
		a := tokens[tok]
		c.checked[IAcceptedEnded]++
		s := c.saleState(a.sid)
		if s == nil {
			c.add(IAcceptedEnded, a.sid, a.e.User, tok, "202 for a sale the final state does not have")
			continue
		}
		r, ok := findReservation(s, tok)
		switch {
		case !ok:
			c.add(IAcceptedEnded, a.sid, a.e.User, tok, "202 at %s, but MySQL has no reservation", a.e.End.Format(timeFmt))
		case r.Status == domain.StatusPaid || r.Status == domain.StatusCancelled || r.Status == domain.StatusExpired:
		case r.Status == domain.StatusFailed:
			// The database decides each 202 before it is sent: no fault,
			// write-losing ones included, excuses a FAILED one.
			c.add(IAcceptedEnded, a.sid, a.e.User, tok, "202 at %s ended FAILED (%s)", a.e.End.Format(timeFmt), r.FailReason)
		default:
			c.add(IAcceptedEnded, a.sid, a.e.User, tok, "202 at %s is still %s after the quiet period (pay_by %s)", a.e.End.Format(timeFmt), r.Status, fmtTime(r.PayBy))
		}
	}
}

// oneHold checks that no user got a 202 for a new request while a
// reservation of an earlier 202 of theirs in the sale was live: the
// earlier one must have ended (its last change) before the later 202 was
// answered. A Redis that lost the user's mark (a failover, an AOF missing
// its tail, keys deleted) must not break it: the database decides.
func (c *checker) oneHold() {
	type grant struct {
		token string
		at    time.Time
	}
	byUser := map[[2]int64][]grant{}
	seen := map[string]bool{}
	for _, e := range c.h {
		if e.Kind != KindRequest || e.Op != OpReserve || e.HTTP != http.StatusAccepted || e.Token == "" || seen[e.Token] {
			continue
		}
		seen[e.Token] = true
		k := [2]int64{e.Sale, e.User}
		byUser[k] = append(byUser[k], grant{e.Token, e.End})
	}
	for k, grants := range byUser {
		s := c.saleState(k[0])
		if s == nil {
			continue
		}
		sort.Slice(grants, func(i, j int) bool { return grants[i].at.Before(grants[j].at) })
		for i := 1; i < len(grants); i++ {
			c.checked[IOneHold]++
			prev, ok := findReservation(s, grants[i-1].token)
			if !ok {
				continue // every_202_ended reports it
			}
			if !prev.Status.Terminal() || prev.UpdatedAt.After(grants[i].at) {
				c.add(IOneHold, k[0], k[1], grants[i].token, "202 at %s while the user's reservation %s was %s (last change %s)",
					grants[i].at.Format(timeFmt), grants[i-1].token, prev.Status, prev.UpdatedAt.Format(timeFmt))
			}
		}
	}
}

// firstAttempt is when the first request with e's user and request_id was sent.
func (c *checker) firstAttempt(e Event) time.Time {
	at := e.T
	for _, x := range c.h {
		if x.Kind == KindRequest && x.Op == OpReserve && x.Sale == e.Sale && x.User == e.User && x.RequestID == e.RequestID && x.T.Before(at) {
			at = x.T
		}
	}
	return at
}

// payments checks every payment the provider confirmed (an API payment
// answered 200 PAID, or a webhook answered 200) is the reservation's PAID
// order with that payment_ref, or a recorded refund; and every webhook sent
// was answered 200 in the end (a provider retries until it is).
func (c *checker) payments() {
	type key struct{ token, ref string }
	confirmed := map[key]Event{}
	webhooks := map[key]Event{} // last answer per webhook
	var order []key
	for _, e := range c.h {
		if e.Token == "" || e.PayRef == "" {
			continue
		}
		k := key{e.Token, e.PayRef}
		isHook := e.Op == OpWebhook || e.Op == OpProbeWebhook
		if isHook {
			if _, ok := webhooks[k]; !ok {
				order = append(order, k)
			}
			webhooks[k] = e
		}
		if e.HTTP == http.StatusOK && (isHook || (e.Op == OpPay && e.Status == string(domain.StatusPaid))) {
			if _, ok := confirmed[k]; !ok && !isHook {
				order = append(order, k)
			}
			confirmed[k] = e
		}
	}
	seen := map[key]bool{}
	for _, k := range order {
		if seen[k] {
			continue
		}
		seen[k] = true
		c.checked[IPaymentSettled]++
		if w, ok := webhooks[k]; ok && w.HTTP != http.StatusOK {
			c.add(IPaymentSettled, w.Sale, w.User, k.token, "the provider's payment %s never got a 200 (last %d %s%s)", k.ref, w.HTTP, w.Code, w.Err)
			continue
		}
		e, ok := confirmed[k]
		if !ok {
			continue
		}
		s := c.saleState(e.Sale)
		if s == nil {
			continue
		}
		r, found := findReservation(s, k.token)
		if found && r.Status == domain.StatusPaid && r.PaymentRef == k.ref {
			continue
		}
		if hasRefund(s, k.token, k.ref) {
			continue
		}
		st := "no reservation"
		if found {
			st = fmt.Sprintf("%s (payment_ref %q)", r.Status, r.PaymentRef)
		}
		c.add(IPaymentSettled, e.Sale, e.User, k.token, "payment %s confirmed (%s %d %s) at %s, but the reservation is %s and no refund is recorded",
			k.ref, e.Op, e.HTTP, e.Status, e.End.Format(timeFmt), st)
	}
}

// payInWindow: a user's payment sent after the API showed the reservation
// PENDING_PAYMENT and more than a second before its pay_by (as MySQL
// recorded it) must not be refused as not payable (contract: only a
// reservation that is not PENDING_PAYMENT is).
func (c *checker) payInWindow() {
	pendingSeen := map[string]time.Time{}
	for _, e := range c.h {
		if e.Kind == KindRequest && e.Op == OpGet && e.HTTP == http.StatusOK && e.Status == string(domain.StatusPendingPayment) {
			if _, ok := pendingSeen[e.Token]; !ok {
				pendingSeen[e.Token] = e.End
			}
		}
	}
	for _, e := range c.h {
		if e.Kind != KindRequest || e.Op != OpPay || e.HTTP == 0 || e.HTTP == http.StatusServiceUnavailable {
			continue
		}
		seen, ok := pendingSeen[e.Token]
		if !ok || e.T.Before(seen) {
			continue
		}
		s := c.saleState(e.Sale)
		if s == nil {
			continue
		}
		r, found := findReservation(s, e.Token)
		if !found || r.PayBy.IsZero() || !e.T.Before(r.PayBy.Add(-time.Second)) {
			continue
		}
		c.checked[IPayInWindow]++
		if e.HTTP == http.StatusConflict && e.Code == "not_payable" && r.Status != domain.StatusPaid {
			c.add(IPayInWindow, e.Sale, e.User, e.Token, "payment %s sent at %s, %s before pay_by, refused 409 not_payable; the reservation ended %s",
				e.PayRef, e.T.Format(timeFmt), r.PayBy.Sub(e.T).Round(100*time.Millisecond), r.Status)
		}
	}
}

func findReservation(s *SaleState, tok string) (finalstate.Reservation, bool) {
	for _, r := range s.Reservations {
		if r.Token == tok {
			return r, true
		}
	}
	return finalstate.Reservation{}, false
}

func hasRefund(s *SaleState, tok, ref string) bool {
	for _, r := range s.Refunds {
		if r.Token == tok && r.PaymentRef == ref {
			return true
		}
	}
	return false
}

const timeFmt = "15:04:05.000"

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Format(timeFmt)
}

func first(xs []string, n int) []string {
	if len(xs) > n {
		return append(xs[:n:n], fmt.Sprintf("... %d more", len(xs)-n))
	}
	return xs
}

// Around returns the history events within d of t that touch token or user
// (or any fault), for printing next to a violation.
func Around(h []Event, v Violation, d time.Duration, max int) []Event {
	var anchor time.Time
	for _, e := range h {
		if (v.Token != "" && e.Token == v.Token) || (v.Token == "" && v.User != 0 && e.User == v.User && e.Sale == v.Sale) {
			anchor = e.T
			break
		}
	}
	var out []Event
	for _, e := range h {
		related := (v.Token != "" && e.Token == v.Token) || (v.User != 0 && e.User == v.User && e.Sale == v.Sale)
		near := !anchor.IsZero() && e.T.After(anchor.Add(-d)) && e.T.Before(anchor.Add(d))
		if related || ((e.Kind == KindFault || e.Kind == KindHeal) && near) {
			out = append(out, e)
		}
	}
	if len(out) > max {
		// The beginning (the request, the faults of its time) and the end.
		out = append(out[:max/2:max/2], out[len(out)-(max-max/2):]...)
	}
	return out
}
