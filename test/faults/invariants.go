// Package faults is seckill's fault and bad-input suite: scenarios against
// the real processes and services (killed, restarted, fed duplicates and
// hostile requests), each followed by the invariant check of this file.
package faults

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/test/finalstate"
)

// State is everything the checker needs about one sale, collected once the
// scenario is idle: the sale's final state with reconciliation's report and
// what the clients were given.
type State struct {
	finalstate.Sale
	// Report is reconciliation's report (reconcile.Reconciler.Run).
	Report *domain.ReconciliationReport
	// ClientTokens are the tokens clients were given (202 answers).
	ClientTokens []string
	// WindowsPassed says every payment window has closed, so every
	// reservation must have ended.
	WindowsPassed bool
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
	for _, u := range s.RedisBuyers {
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
	VTwoUnits          = finalstate.TwoUnits
	VDoubleOrder       = finalstate.OrderTwice
	VDoubleDeduct      = finalstate.DeductedTwice
	VNoWorkflow        = finalstate.NoWorkflow
	VManyWorkflows     = "workflow_runs_twice"
	VStrayWorkflow     = finalstate.StrayWorkflow
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
	v.reservations(s)
	for _, f := range s.Sale.Check() {
		v.add(f.Kind, "%s", findingDetail(f))
	}
	for _, id := range slices.Sorted(maps.Keys(s.Workflows)) {
		if w := s.Workflows[id]; w.Runs-w.Terminated > 1 {
			v.add(VManyWorkflows, "%s has %d executions", id, w.Runs-w.Terminated)
		}
	}
	v.clientTokens(s)
	return v
}

// findingDetail names a finding's user and token before its detail.
func findingDetail(f finalstate.Finding) string {
	d := f.Detail
	if f.Token != "" {
		d = "token " + f.Token + ": " + d
	}
	if f.User != 0 {
		d = fmt.Sprintf("user %d: %s", f.User, d)
	}
	return d
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

// reservations checks that each reservation agrees with its order and has
// ended once the windows passed.
func (v *violations) reservations(s State) {
	for _, r := range s.Reservations {
		if r.OrderStatus != "" && r.OrderStatus != r.Status {
			v.add(VOrderStatusDiffer, "token %s: reservation %s, order %s", r.Token, r.Status, r.OrderStatus)
		}
		if s.WindowsPassed && !r.Status.Terminal() {
			v.add(VNotEnded, "token %s is %s after its payment window", r.Token, r.Status)
		}
	}
}

// clientTokens checks that every token a client was given has a
// reservation.
func (v *violations) clientTokens(s State) {
	byToken := map[string]bool{}
	for _, r := range s.Reservations {
		byToken[r.Token] = true
	}
	for _, tok := range s.ClientTokens {
		if !byToken[tok] {
			v.add(VLostToken, "token %s was given to a client but has no reservation", tok)
		}
	}
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

// Table renders rows as a fixed-width table, its first column as wide as
// the longest scenario name (at least 34).
func Table(rows []Row) string {
	w := 34
	for _, r := range rows {
		w = max(w, len(r.Scenario))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-*s %8s %8s %6s %8s %8s %5s %9s %8s %8s %8s  %s\n", w, "scenario", "requests", "reserved", "sold", "released", "oversold", "lost",
		"202 kept", "units", "users", "selling", "result")
	fmt.Fprintf(&b, "%-*s %8s %8s %6s %8s %8s %5s %9s %8s %8s %8s\n", w, "", "", "", "", "", "", "", "", "stranded", "stranded", "again")
	for _, r := range rows {
		kept, again := "-", "-"
		if r.Kept202 >= 0 {
			kept = fmt.Sprintf("%d/%d", r.Kept202, r.Given202)
		}
		if r.SellingAgain > 0 {
			again = r.SellingAgain.Round(100 * time.Millisecond).String()
		}
		fmt.Fprintf(&b, "%-*s %8d %8d %6d %8d %8d %5d %9s %8d %8d %8s  %s\n", w, r.Scenario, r.Requests, r.Reserved, r.Sold, r.Released, r.Oversold, r.Lost,
			kept, r.StrandedUnits, r.StrandedUsers, again, r.Result)
	}
	return b.String()
}
