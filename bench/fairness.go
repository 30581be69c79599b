package bench

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/sales"
)

// Scenario 10, fairness: two groups of buyers through a sale's opening,
// one asking ten times as often as the other (every 100 ms against every
// second, each from a random moment of the second before the opening),
// on a sale with a tenth as many units as buyers. Five runs with the
// opening lottery (the default) and one without; the figures are each
// group's success rate per user.
const (
	fairBuyers      = 200
	fairRuns        = 5
	fairFastEvery   = 100 * time.Millisecond
	fairSlowEvery   = time.Second
	fairOpensIn     = 2 * time.Second
	fairAfterOpen   = 10 * time.Second
	fairPerUserRate = "20" // above the fast group's 10/s: the per-user bucket stays out of it
)

type fairRun struct{ fast, slow int64 }

func (r *runner) fairness(ctx context.Context) error {
	var figures []Figure
	var notes []string
	for _, lottery := range []bool{false, true} {
		env := r.env("bench-fair-" + r.stamp)
		env["SECKILL_PER_USER_RPS"], env["SECKILL_PER_USER_BURST"] = fairPerUserRate, fairPerUserRate
		label, runs := "lottery", fairRuns
		if !lottery {
			env["SECKILL_OPENING_POOL"] = "0"
			label, runs = "no lottery", 1
		}
		api, err := r.startAPIEnv(ctx, "api-fair", env)
		if err != nil {
			return err
		}
		var ratios []float64
		for run := range runs {
			res, err := r.fairRun(ctx, api)
			if err != nil {
				api.Stop()
				return err
			}
			half := float64(fairBuyers / 2)
			fastRate, slowRate := float64(res.fast)/half, float64(res.slow)/half
			ratio := fastRate / math.Max(slowRate, 1/half)
			ratios = append(ratios, ratio)
			notes = append(notes, fmt.Sprintf("%s, run %d: fast group %d of %d bought (%.0f%%), slow group %d of %d (%.0f%%), ratio %.2f",
				label, run+1, res.fast, fairBuyers/2, 100*fastRate, res.slow, fairBuyers/2, 100*slowRate, ratio))
		}
		api.Stop()
		lo, hi := ratios[0], ratios[0]
		for _, x := range ratios {
			lo, hi = math.Min(lo, x), math.Max(hi, x)
		}
		target := ""
		if lottery {
			target = "0.8 to 1.2 in every run"
			if lo < 0.8 || hi > 1.2 {
				notes = append(notes, fmt.Sprintf("NOT MET: a ratio outside 0.8..1.2 (%.2f..%.2f)", lo, hi))
			}
		}
		figures = append(figures,
			Figure{Name: label + ": fast/slow success per user, lowest run", Value: lo, Unit: "×", Target: target},
			Figure{Name: label + ": fast/slow success per user, highest run", Value: hi, Unit: "×", Target: target})
	}
	r.add(Scenario{ID: "10 fairness", Title: fmt.Sprintf("Opening fairness: %d buyers, half asking every %s, half every %s, %d units",
		fairBuyers, fairFastEvery, fairSlowEvery, fairBuyers/10), Figures: figures, Notes: notes})
	return nil
}

// fairRun runs one opening on a fresh sale and counts each group's 202s.
func (r *runner) fairRun(ctx context.Context, api *Proc) (fairRun, error) {
	s, err := r.saleOpening(ctx, "fairness", fairBuyers/10, time.Now().Add(fairOpensIn))
	if err != nil {
		return fairRun{}, err
	}
	toks, _, err := r.users(fairBuyers)
	if err != nil {
		return fairRun{}, err
	}
	url := api.URL + "/api/v1/sales/" + strconv.FormatInt(s.ID, 10) + "/reservations"
	doer := newDoer(256)
	deadline := s.StartsAt.Add(fairAfterOpen)
	var fast, slow atomic.Int64
	var wg sync.WaitGroup
	for i, tok := range toks {
		every, won := fairSlowEvery, &slow
		if i < fairBuyers/2 {
			every, won = fairFastEvery, &fast
		}
		start := s.StartsAt.Add(-time.Duration(rand.Int64N(int64(time.Second))))
		wg.Go(func() {
			time.Sleep(time.Until(start))
			body := []byte(`{"request_id":"fair-` + strconv.Itoa(i) + `"}`)
			for time.Now().Before(deadline) && ctx.Err() == nil {
				code, err := doer.do(ctx, "POST", url, tok, body)
				if err == nil && code == http.StatusAccepted {
					won.Add(1)
					return
				}
				if err == nil && code == http.StatusGone {
					return
				}
				time.Sleep(every)
			}
		})
	}
	wg.Wait()
	return fairRun{fast: fast.Load(), slow: slow.Load()}, nil
}

// saleOpening creates and warms a sale that opens at opens.
func (r *runner) saleOpening(ctx context.Context, title string, stock int64, opens time.Time) (*domain.Sale, error) {
	s := &domain.Sale{
		GoodsID: 1, Title: "bench " + r.stamp + " " + title, PriceCents: 999, StockTotal: stock, Buckets: 4,
		StartsAt: opens.UTC(), EndsAt: opens.Add(time.Hour).UTC(), PaymentWindowSeconds: 900, PerUserLimit: 1,
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := r.st.CreateSale(cctx, s); err != nil {
		return nil, fmt.Errorf("create sale %q: %w", title, err)
	}
	r.saleIDs = append(r.saleIDs, s.ID)
	if _, _, err := sales.Warmup(cctx, r.st, lua.NewClient(r.rdb), nil, s.ID); err != nil {
		return nil, fmt.Errorf("warm up sale %d: %w", s.ID, err)
	}
	return s, nil
}

// startAPIEnv starts an API with env (its address added).
func (r *runner) startAPIEnv(ctx context.Context, name string, env map[string]string) (*Proc, error) {
	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	env["API_ADDR"] = addr
	p, err := StartProc(ctx, name, r.o.SeckillBin, []string{"api"}, env, r.o.LogDir, "http://"+addr, "http://"+addr+"/healthz")
	if err != nil {
		return nil, err
	}
	r.procs = append(r.procs, p)
	return p, nil
}
