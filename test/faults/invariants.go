// Package faults is seckill's fault and bad-input suite: scenarios against
// the real processes and services (killed, restarted, fed duplicates and
// hostile requests), each followed by the invariant check of this file.
package faults

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/seckill/seckill/domain"
)

// Reservation is one reservation row with its order, as the checker sees it.
type Reservation struct {
	Token       string
	UserID      int64
	Status      domain.ReservationStatus
	OrderStatus domain.ReservationStatus // "" when no order exists
}

// State is everything the checker needs about one sale, collected once the
// scenario is idle.
type State struct {
	SaleID int64
	// Report is reconciliation's report (reconcile.Reconciler.Run).
	Report *domain.ReconciliationReport
	// Reservations are the sale's database rows, orders joined.
	Reservations []Reservation
	// Orders counts order rows per token (at most one is allowed).
	Orders map[string]int
	// Deducts counts ledger deduct rows per token (at most one).
	Deducts map[string]int
	// Workflows counts order:* executions (all runs but terminated ones)
	// per workflow id, as listed by the search attribute SaleId.
	Workflows map[string]int
	// Terminated counts the terminated runs per workflow id: an operator's
	// action, after which a repair may run the workflow again.
	Terminated map[string]int
	// ClientTokens are the tokens clients were given (202 answers).
	ClientTokens []string
	// WindowsPassed says every payment window has closed, so every
	// reservation must have ended.
	WindowsPassed bool
	// RedisBuyers is the sale's Redis buyer set (nil: not read).
	RedisBuyers map[int64]bool
}

// StrandedUnits counts units that are neither sold, held by a reservation
// in flight, nor on sale in Redis: stock_total - live - in_flight -
// redis_stock (0 when Redis does not hold the sale).
func (s State) StrandedUnits() int64 {
	rep := s.Report
	if rep == nil || !rep.RedisLoaded {
		return 0
	}
	live := domain.LiveCount(rep.Orders)
	return max(rep.StockTotal-live-rep.InFlight-rep.RedisStock, 0)
}

// StrandedUsers lists users Redis still marks as buyers although none of
// their reservations holds a unit: they could never buy again.
func (s State) StrandedUsers() []int64 {
	holding := map[int64]bool{}
	for _, r := range s.Reservations {
		if r.Status.HoldsUnit() {
			holding[r.UserID] = true
		}
	}
	var out []int64
	for _, u := range sortedKeys(s.RedisBuyers) {
		if !holding[u] {
			out = append(out, u)
		}
	}
	return out
}

// Violation is one broken invariant.
type Violation struct {
	Kind   string
	Detail string
}

func (v Violation) String() string { return v.Kind + ": " + v.Detail }

// Violation kinds.
const (
	VNoReport          = "no_report"
	VInconsistent      = "reconciliation_inconsistent"
	VDiscrepancy       = "discrepancy"
	VInFlight          = "in_flight_when_idle"
	VRedisIdentity     = "redis_identity"
	VDBIdentity        = "db_identity"
	VOversold          = "oversold"
	VTwoUnits          = "user_holds_two_units"
	VDoubleOrder       = "order_twice"
	VDoubleDeduct      = "deducted_twice"
	VNoWorkflow        = "reservation_without_workflow"
	VManyWorkflows     = "workflow_runs_twice"
	VStrayWorkflow     = "workflow_without_reservation"
	VLostToken         = "client_token_lost"
	VNotEnded          = "reservation_not_ended"
	VOrderStatusDiffer = "order_status_differs"
	VStrandedUnit      = "unit_stranded"
	VStrandedUser      = "user_stranded"
)

// Check returns every invariant State breaks; none means the sale is sound.
func Check(s State) []Violation {
	var v violations
	v.report(s)
	for _, u := range s.StrandedUsers() {
		v.add(VStrandedUser, "user %d is marked a buyer in Redis without a reservation holding a unit", u)
	}
	byToken := v.reservations(s)
	v.duplicates(s, byToken)
	return v
}

// violations collects what Check finds.
type violations []Violation

func (v *violations) add(kind, format string, args ...any) {
	*v = append(*v, Violation{Kind: kind, Detail: fmt.Sprintf(format, args...)})
}

// report checks the reconciliation report's verdict and the stock
// identities.
func (v *violations) report(s State) {
	rep := s.Report
	if rep == nil {
		v.add(VNoReport, "sale %d: no reconciliation report", s.SaleID)
		return
	}
	live := domain.LiveCount(rep.Orders)
	if !rep.Consistent {
		v.add(VInconsistent, "sale %d: reconciliation says inconsistent", s.SaleID)
	}
	for _, d := range rep.Discrepancies {
		v.add(VDiscrepancy, "%s user %d token %s: %s", d.Kind, d.UserID, d.Token, d.Detail)
	}
	if rep.InFlight != 0 {
		v.add(VInFlight, "%d holds or releases still in flight", rep.InFlight)
	}
	if rep.RedisLoaded && rep.RedisStock+rep.InFlight+live != rep.StockTotal {
		v.add(VRedisIdentity, "redis_stock %d + in_flight %d + live %d != stock_total %d", rep.RedisStock, rep.InFlight, live, rep.StockTotal)
	}
	if rep.DBStock+live != rep.StockTotal {
		v.add(VDBIdentity, "db_stock %d + live %d != stock_total %d", rep.DBStock, live, rep.StockTotal)
	}
	if live > rep.StockTotal {
		v.add(VOversold, "%d live orders for %d units", live, rep.StockTotal)
	}
	if n := s.StrandedUnits(); n > 0 {
		v.add(VStrandedUnit, "%d units neither sold, held nor on sale in Redis", n)
	}
}

// reservations checks each reservation and each user's held units, and
// returns the reservations by token.
func (v *violations) reservations(s State) map[string]Reservation {
	byToken := map[string]Reservation{}
	perUser := map[int64][]string{}
	for _, r := range s.Reservations {
		byToken[r.Token] = r
		if r.Status.HoldsUnit() || (r.OrderStatus != "" && r.OrderStatus.HoldsUnit()) {
			perUser[r.UserID] = append(perUser[r.UserID], r.Token)
		}
		if r.OrderStatus != "" && r.OrderStatus != r.Status {
			v.add(VOrderStatusDiffer, "token %s: reservation %s, order %s", r.Token, r.Status, r.OrderStatus)
		}
		if s.WindowsPassed && !r.Status.Terminal() {
			v.add(VNotEnded, "token %s is %s after its payment window", r.Token, r.Status)
		}
		if id := domain.OrderWorkflowID(r.Token); s.Workflows[id]+s.Terminated[id] == 0 {
			v.add(VNoWorkflow, "token %s has no workflow", r.Token)
		}
	}
	for _, user := range sortedKeys(perUser) {
		if toks := perUser[user]; len(toks) > 1 {
			v.add(VTwoUnits, "user %d holds %d units: %s", user, len(toks), strings.Join(toks, ", "))
		}
	}
	return byToken
}

// duplicates checks that each token has at most one order, deduction and
// workflow, that every workflow has a reservation and that every token a
// client was given has one.
func (v *violations) duplicates(s State, byToken map[string]Reservation) {
	for _, tok := range sortedKeys(s.Orders) {
		if n := s.Orders[tok]; n > 1 {
			v.add(VDoubleOrder, "token %s has %d orders", tok, n)
		}
	}
	for _, tok := range sortedKeys(s.Deducts) {
		if n := s.Deducts[tok]; n > 1 {
			v.add(VDoubleDeduct, "token %s deducted %d times", tok, n)
		}
	}
	for _, id := range sortedKeys(s.Workflows) {
		if n := s.Workflows[id]; n > 1 {
			v.add(VManyWorkflows, "%s has %d executions", id, n)
		}
		if _, ok := byToken[strings.TrimPrefix(id, "order:")]; !ok {
			v.add(VStrayWorkflow, "%s has no reservation", id)
		}
	}
	for _, tok := range s.ClientTokens {
		if _, ok := byToken[tok]; !ok {
			v.add(VLostToken, "token %s was given to a client but has no reservation", tok)
		}
	}
}

func sortedKeys[K int64 | string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}

// Row is one line of the suite's summary table.
type Row struct {
	Scenario string
	Requests int // reservation requests sent
	Reserved int // distinct tokens clients got
	Sold     int64
	Released int64
	Oversold int64
	Lost     int
	// Redis recovery scenarios (Kept202 < 0: not measured): 202s that
	// reached PENDING_PAYMENT or PAID, units and users stranded, and the
	// time from the fault until a 202 again.
	Kept202, Given202 int
	StrandedUnits     int64
	StrandedUsers     int
	SellingAgain      time.Duration
	Result            string
}

// Summarize fills a row's counts from a checked state.
func Summarize(scenario string, requests int, s State, violations []Violation) Row {
	r := Row{Scenario: scenario, Requests: requests, Reserved: len(uniq(s.ClientTokens)), Result: "ok", Kept202: -1,
		StrandedUnits: s.StrandedUnits(), StrandedUsers: len(s.StrandedUsers())}
	if s.Report != nil {
		o := s.Report.Orders
		r.Sold = domain.LiveCount(o)
		r.Released = o[string(domain.StatusExpired)] + o[string(domain.StatusCancelled)] + o[string(domain.StatusFailed)]
		r.Oversold = max(r.Sold-s.Report.StockTotal, 0)
	}
	for _, v := range violations {
		if v.Kind == VLostToken {
			r.Lost++
		}
	}
	if len(violations) > 0 {
		r.Result = fmt.Sprintf("FAIL (%d)", len(violations))
	}
	return r
}

func uniq(xs []string) map[string]bool {
	m := make(map[string]bool, len(xs))
	for _, x := range xs {
		m[x] = true
	}
	return m
}

// Table renders rows as a fixed-width table.
func Table(rows []Row) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-34s %8s %8s %6s %8s %8s %5s %9s %8s %8s %8s  %s\n", "scenario", "requests", "reserved", "sold", "released", "oversold", "lost",
		"202 kept", "units", "users", "selling", "result")
	fmt.Fprintf(&b, "%-34s %8s %8s %6s %8s %8s %5s %9s %8s %8s %8s\n", "", "", "", "", "", "", "", "", "stranded", "stranded", "again")
	for _, r := range rows {
		kept, again := "-", "-"
		if r.Kept202 >= 0 {
			kept = fmt.Sprintf("%d/%d", r.Kept202, r.Given202)
		}
		if r.SellingAgain > 0 {
			again = r.SellingAgain.Round(100 * time.Millisecond).String()
		}
		fmt.Fprintf(&b, "%-34s %8d %8d %6d %8d %8d %5d %9s %8d %8d %8s  %s\n", r.Scenario, r.Requests, r.Reserved, r.Sold, r.Released, r.Oversold, r.Lost,
			kept, r.StrandedUnits, r.StrandedUsers, again, r.Result)
	}
	return b.String()
}
