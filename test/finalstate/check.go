package finalstate

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/seckill/seckill/domain"
)

// Finding is one invariant the state breaks.
type Finding struct {
	Kind   string
	User   int64
	Token  string
	Detail string
}

// What the state alone can break.
const (
	TwoUnits      = "user_holds_two_units"
	OrderTwice    = "order_twice"
	DeductedTwice = "deducted_twice"
	NoWorkflow    = "reservation_without_workflow"
	StrayWorkflow = "workflow_without_reservation"
)

// Check returns what the sale's state breaks: a user holding two units, a
// token ordered or deducted twice, a reservation without a workflow, a
// workflow without a reservation.
func (s Sale) Check() []Finding {
	var out []Finding
	add := func(kind string, user int64, token, format string, args ...any) {
		out = append(out, Finding{Kind: kind, User: user, Token: token, Detail: fmt.Sprintf(format, args...)})
	}
	perUser := map[int64][]string{}
	byToken := map[string]bool{}
	for _, r := range s.Reservations {
		byToken[r.Token] = true
		if r.HoldsUnit() {
			perUser[r.UserID] = append(perUser[r.UserID], r.Token)
		}
		if s.Workflows[domain.OrderWorkflowID(r.Token)].Runs == 0 {
			add(NoWorkflow, r.UserID, r.Token, "%s reservation has no workflow", r.Status)
		}
	}
	for _, u := range slices.Sorted(maps.Keys(perUser)) {
		if toks := perUser[u]; len(toks) > 1 {
			add(TwoUnits, u, "", "user holds %d units: %s", len(toks), strings.Join(toks, ", "))
		}
	}
	for _, tok := range slices.Sorted(maps.Keys(s.Orders)) {
		if n := s.Orders[tok]; n > 1 {
			add(OrderTwice, 0, tok, "%d orders", n)
		}
	}
	for _, tok := range slices.Sorted(maps.Keys(s.Deducts)) {
		if n := s.Deducts[tok]; n > 1 {
			add(DeductedTwice, 0, tok, "stock deducted %d times", n)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(s.Workflows)) {
		if tok, _ := domain.TokenOfOrderWorkflowID(id); !byToken[tok] {
			add(StrayWorkflow, 0, tok, "workflow %s has no reservation", id)
		}
	}
	return out
}
