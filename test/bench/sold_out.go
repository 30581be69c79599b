package bench

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/seckill/seckill/client"
)

// soldOutRounds is how many times scenario 1 runs its pair: the ratio of
// one pair moved between 0.74 and 1.01 from run to run of the same build,
// and both rates fell from round to round of one run.
const soldOutRounds = 5

// soldOut: scenario 1, the sold-out path against GET /healthz, in rounds
// of one each, back to back, the first run of a round taking turns; the
// figures are the median round's.
func (r *runner) soldOut(ctx context.Context, api *Proc) error {
	const conns = 64
	c, url, toks, err := r.soldOutSale(ctx, api, "sold-out", conns)
	if err != nil {
		return err
	}
	health := func(ctx context.Context, _ int64) (int, error) { return c.do(ctx, "GET", api.URL+"/healthz", "", nil) }
	ClosedLoop(ctx, "warm-up", conns, time.Second, 0, health)
	var runs []Result
	var rounds []abRound
	for k := range soldOutRounds {
		suffix := fmt.Sprintf(", round %d", k+1)
		runHealth := func() Result { return ClosedLoop(ctx, "GET /healthz"+suffix, conns, r.o.Dur, 0, health) }
		runSoldOut := func() Result {
			return ClosedLoop(ctx, "sold-out reserve"+suffix, conns, r.o.Dur, 0, reserveOp(c, url, toks))
		}
		// Turn about (ABA order): the machine's rate drifts over a minute
		// of load, and a fixed order would charge the drift to one side.
		var base, so Result
		if k%2 == 0 {
			base = runHealth()
			so = runSoldOut()
			runs = append(runs, base, so)
		} else {
			so = runSoldOut()
			base = runHealth()
			runs = append(runs, so, base)
		}
		if n := so.Count(http.StatusAccepted); n > 0 {
			r.violation("scenario 1: %d reservations accepted on a sold-out sale of 1 unit", n)
		}
		rounds = append(rounds, abRound{base: base, test: so})
	}
	ratios := make([]string, len(rounds))
	for i, rd := range rounds {
		ratios[i] = num(rd.ratio())
	}
	mid := medianRound(rounds)
	r.add(Scenario{
		ID: "1 sold-out", Title: "Sold-out path vs GET /healthz, 64 connections",
		Runs: runs,
		Figures: []Figure{
			{Name: "sold-out req/s", Value: mid.test.RPS, Unit: "req/s", Published: pubIssue17k},
			{Name: "sold-out / healthz", Value: mid.ratio(), Unit: "×", Target: "≥ 0.9"},
			{Name: "sold-out p99", Value: mid.test.P99MS, Unit: "ms"},
		},
		Notes: []string{fmt.Sprintf("%d rounds of GET /healthz and the sold-out path, back to back, healthz first in the odd rounds and the sold-out path first in the even ones (the machine's rate drifts over a minute of load); the figures are the median round's (by its ratio); the rounds' ratios in order: %s",
			len(rounds), strings.Join(ratios, ", "))},
	})
	return nil
}

// abRound is one pair of runs of an A/B scenario: the baseline and the
// run measured against it (scenario 1: GET /healthz and the sold-out path).
type abRound struct{ base, test Result }

func (rd abRound) ratio() float64 { return ratio(rd.test.RPS, rd.base.RPS) }

// medianRound is the round whose ratio is the median (the lower middle of
// an even number).
func medianRound(rounds []abRound) abRound {
	sorted := slices.Clone(rounds)
	slices.SortFunc(sorted, func(a, b abRound) int { return cmp.Compare(a.ratio(), b.ratio()) })
	return sorted[(len(sorted)-1)/2]
}

// soldOutSale makes a sale of one unit and sells it out through the API
// (the unit sold, then one more try sets the sold-out mark). It returns a
// client of conns connections, the sale's reservation URL and the users'
// tokens left for the measured loop (the two setup users taken out).
func (r *runner) soldOutSale(ctx context.Context, api *Proc, label string, conns int) (httpDoer, string, []string, error) {
	return r.soldOutSaleWindow(ctx, api, label, conns, 900)
}

// soldOutSaleWindow is soldOutSale with a payment window of window
// seconds: the sold unit's order expires after it, and the unit is for
// sale again.
func (r *runner) soldOutSaleWindow(ctx context.Context, api *Proc, label string, conns, window int) (httpDoer, string, []string, error) {
	s, err := r.saleWindow(ctx, api, label, 1, 1, true, window)
	if err != nil {
		return httpDoer{}, "", nil, err
	}
	toks, _, err := r.users(20_000)
	if err != nil {
		return httpDoer{}, "", nil, err
	}
	c := newDoer(conns)
	url := api.URL + client.ReservationsPath(s.ID)
	for i, want := range []int{http.StatusAccepted, http.StatusGone} {
		st, err := reserveOp(c, url, toks)(ctx, int64(len(toks)-1-i))
		if err != nil {
			return httpDoer{}, "", nil, fmt.Errorf("sold-out setup: %w", err)
		}
		if st != want {
			return httpDoer{}, "", nil, fmt.Errorf("sold-out setup: reservation %d answered %d, want %d", i, st, want)
		}
	}
	return c, url, toks[:len(toks)-2], nil
}
