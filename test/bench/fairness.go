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

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/redisgateway"
)

// Scenario 10, fairness: two groups of buyers through a sale's opening,
// one asking ten times as often as the other (every 100 ms against every
// second, each from a random moment of the second before the opening),
// on a sale with a tenth as many units as buyers. Five runs with the
// opening lottery (the default) and one without. The figures: the fast
// group's success rate per user over the slow group's, per run and over
// the five runs, and whether each run's buyers were exactly the lowest
// tickets of the pool (read from Redis), which is what the lottery
// promises; a run's split between the groups is then the draw's luck (a
// hypergeometric spread: about ±10% of the units at one sigma).
const (
	fairBuyers      = 1000
	fairRuns        = 5
	fairFastEvery   = 100 * time.Millisecond
	fairSlowEvery   = time.Second
	fairOpensIn     = 2 * time.Second
	fairAfterOpen   = 10 * time.Second
	fairPerUserRate = "20" // above the fast group's 10/s: the per-user bucket stays out of it
)

type fairRun struct {
	fast, slow int64
	byTicket   bool  // the buyers were exactly the pool's lowest tickets
	entered    int64 // the pool's size
}

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
		var fastAll, slowAll, byTicket int64
		for run := range runs {
			res, err := r.fairRun(ctx, api, lottery)
			if err != nil {
				api.Stop()
				return err
			}
			fastAll, slowAll = fastAll+res.fast, slowAll+res.slow
			if res.byTicket {
				byTicket++
			}
			ratio := float64(res.fast) / math.Max(float64(res.slow), 1)
			ratios = append(ratios, ratio)
			notes = append(notes, fmt.Sprintf("%s, run %d: fast group %d of %d bought, slow group %d of %d, ratio %.2f; %d entered the pool; buyers = its lowest tickets: %v",
				label, run+1, res.fast, fairBuyers/2, res.slow, fairBuyers/2, ratio, res.entered, res.byTicket))
		}
		api.Stop()
		total := float64(fastAll) / math.Max(float64(slowAll), 1)
		lo, hi := ratios[0], ratios[0]
		for _, x := range ratios {
			lo, hi = math.Min(lo, x), math.Max(hi, x)
		}
		target, ticketTarget := "", ""
		if lottery {
			target, ticketTarget = "0.8 to 1.2", fmt.Sprintf("%d of %d", runs, runs)
			if total < 0.8 || total > 1.2 || byTicket != int64(runs) {
				notes = append(notes, fmt.Sprintf("NOT MET: over the runs %.2f, by ticket in %d of %d runs", total, byTicket, runs))
			}
		}
		figures = append(figures,
			Figure{Name: label + ": fast/slow success per user, over the runs", Value: total, Unit: "×", Target: target},
			Figure{Name: label + ": fast/slow, lowest run", Value: lo, Unit: "×"},
			Figure{Name: label + ": fast/slow, highest run", Value: hi, Unit: "×"})
		if lottery {
			figures = append(figures, Figure{Name: label + ": runs whose buyers were the lowest tickets", Value: float64(byTicket), Unit: "runs", Target: ticketTarget})
		}
	}
	r.add(Scenario{ID: "10 fairness", Title: fmt.Sprintf("Opening fairness: %d buyers, half asking every %s, half every %s, %d units",
		fairBuyers, fairFastEvery, fairSlowEvery, fairBuyers/10), Figures: figures, Notes: notes})
	return nil
}

// fairRun runs one opening on a fresh sale and counts each group's 202s.
func (r *runner) fairRun(ctx context.Context, api *Proc, lottery bool) (fairRun, error) {
	s, err := r.saleOpening(ctx, api, "fairness", fairBuyers/10, time.Now().Add(fairOpensIn))
	if err != nil {
		return fairRun{}, err
	}
	toks, first, err := r.users(fairBuyers)
	if err != nil {
		return fairRun{}, err
	}
	url := api.URL + client.ReservationsPath(s.ID)
	doer := newDoer(256)
	deadline := s.StartsAt.Add(fairAfterOpen)
	var fast, slow atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	buyers := map[int64]bool{}
	for i, tok := range toks {
		every, won := fairSlowEvery, &slow
		if i < fairBuyers/2 {
			every, won = fairFastEvery, &fast
		}
		user := first + int64(i)
		start := s.StartsAt.Add(-time.Duration(rand.Int64N(int64(time.Second))))
		wg.Go(func() {
			time.Sleep(time.Until(start))
			body := []byte(fmt.Sprintf(`{"request_id":"fair-%06d"}`, i))
			for time.Now().Before(deadline) && ctx.Err() == nil {
				code, err := doer.do(ctx, "POST", url, tok, body)
				if err == nil && code == http.StatusAccepted {
					won.Add(1)
					mu.Lock()
					buyers[user] = true
					mu.Unlock()
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
	res := fairRun{fast: fast.Load(), slow: slow.Load()}
	if lottery {
		lowest, err := r.rdb.ZRange(ctx, redisgateway.SaleKeys(s.ID).Pool, 0, s.StockTotal-1).Result()
		if err == nil {
			res.entered, err = r.rdb.ZCard(ctx, redisgateway.SaleKeys(s.ID).Pool).Result()
		}
		if err != nil {
			return res, fmt.Errorf("read the pool of sale %d: %w", s.ID, err)
		}
		res.byTicket = len(lowest) == len(buyers)
		for _, m := range lowest {
			id, err := strconv.ParseInt(m, 10, 64)
			res.byTicket = res.byTicket && err == nil && buyers[id]
		}
	}
	return res, nil
}

// saleOpening creates and warms a sale that opens at opens through api.
func (r *runner) saleOpening(ctx context.Context, api *Proc, title string, stock int64, opens time.Time) (*domain.Sale, error) {
	return r.createSale(ctx, api, client.NewSale{GoodsID: 1, Title: r.saleTitle(title), PriceCents: 999, Stock: stock,
		Buckets: 4, StartsAt: opens.UTC(), EndsAt: opens.Add(time.Hour).UTC(), PaymentWindowSeconds: 900}, true)
}
