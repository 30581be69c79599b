package chaos

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/test/finalstate"
)

// collect reads every sale's final state from MySQL, Redis and Temporal
// directly (not through the project's code), then asks the API for its
// reconciliation report.
func collect(ctx context.Context, d *Deployment, c *caller, sales []SaleSpec) (Final, error) {
	f := Final{At: time.Now()}
	for _, sp := range sales {
		sale, err := finalstate.Read(ctx, finalstate.Sources{DB: d.DB, Redis: d.RDB, Temporal: d.TC}, sp.ID)
		if err != nil {
			return f, fmt.Errorf("sale %d: %w", sp.ID, err)
		}
		s := SaleState{Sale: sale}
		s.ReconConsistent, s.ReconDiscrepancies, s.ReconErr = reconciliation(ctx, c, sp.ID)
		f.Sales = append(f.Sales, s)
	}
	return f, nil
}

// reconciliation is the API's reconciliation report of a sale (the first
// API's, the second's when the first does not answer 200): whether it is
// consistent and its discrepancies, or why there is none.
func reconciliation(ctx context.Context, c *caller, saleID int64) (bool, []string, string) {
	rep, err := c.admins[0].Reconcile(ctx, saleID, false)
	if err != nil {
		rep, err = c.admins[1%len(c.admins)].Reconcile(ctx, saleID, false)
	}
	if err != nil {
		if st := client.Status(err); st != 0 {
			return false, nil, fmt.Sprintf("%d %s", st, domain.ErrorCode(err))
		}
		return false, nil, err.Error()
	}
	var ds []string
	for _, d := range rep.Discrepancies {
		ds = append(ds, fmt.Sprintf("%v user %d token %v: %v", d.Kind, d.UserID, d.Token, d.Detail))
	}
	return rep.Consistent, ds, ""
}

// probe runs the final probes: fresh users reserve each sale until it is
// sold out; every user whose reservations all ended reserves again.
func probe(ctx context.Context, c *caller, f Final) {
	user := int64(900_000_000)
	for _, s := range f.Sales {
		var live int64
		for _, r := range s.Reservations {
			if r.Status.Live() {
				live++
			}
		}
		limit := s.StockTotal - live + 20 // stop well past what should be free
		for n := int64(0); n <= limit && ctx.Err() == nil; n++ {
			user++
			a := reserveProbe(ctx, c, OpProbeFresh, s.SaleID, user, fmt.Sprintf("fresh-%d", user), 6)
			if a.HTTP != http.StatusAccepted {
				break
			}
		}
	}
	for _, s := range f.Sales {
		ended := map[int64]bool{}
		for _, r := range s.Reservations {
			if _, seen := ended[r.UserID]; !seen {
				ended[r.UserID] = true
			}
			if !r.Status.Terminal() || r.Status == domain.StatusPaid {
				ended[r.UserID] = false
			}
		}
		// A sale that answers nothing but 503 would take minutes of
		// replays per user: after three users in a row without an answer,
		// one attempt each (the checker reports them either way).
		silent := 0
		for _, u := range slices.Sorted(maps.Keys(ended)) {
			if ended[u] && ctx.Err() == nil {
				attempts := 6
				if silent >= 3 {
					attempts = 1
				}
				if a := reserveProbe(ctx, c, OpProbeAgain, s.SaleID, u, fmt.Sprintf("again-%d", u), attempts); unknown(a) {
					silent++
				} else {
					silent = 0
				}
			}
		}
	}
}

// probeWebhooks sends again, as a provider would, every webhook not yet
// answered 200 (before the final state is read: its refunds count).
func probeWebhooks(ctx context.Context, c *caller, h *Recorder, sales []SaleSpec) {
	price := map[int64]int64{}
	for _, s := range sales {
		price[s.ID] = s.PriceCents
	}
	type key struct{ tok, ref string }
	last := map[key]Event{}
	var order []key
	for _, e := range h.Events() {
		if e.Op == OpWebhook {
			k := key{e.Token, e.PayRef}
			if _, ok := last[k]; !ok {
				order = append(order, k)
			}
			last[k] = e
		}
	}
	for _, k := range order {
		e := last[k]
		if e.HTTP == http.StatusOK {
			continue
		}
		for attempt := 0; attempt < 5; attempt++ {
			a, _ := c.webhook(ctx, attempt, k.tok, k.ref, price[e.Sale], Event{Kind: KindProbe, Op: OpProbeWebhook, Sale: e.Sale, User: e.User})
			if !unknown(a) {
				break
			}
			sleep(ctx, time.Second)
		}
	}
}

// reserveProbe reserves once for a probe, replaying while the outcome is
// unknown.
func reserveProbe(ctx context.Context, c *caller, op string, sale, user int64, reqID string, attempts int) answer {
	var a answer
	for attempt := 0; attempt < attempts && ctx.Err() == nil; attempt++ {
		a, _ = c.do(ctx, attempt, http.MethodPost, client.ReservationsPath(sale), user, map[string]any{"request_id": reqID},
			Event{Kind: KindProbe, Op: op, Sale: sale, User: user, RequestID: reqID})
		if !unknown(a) {
			return a
		}
		sleep(ctx, time.Duration(attempt+1)*500*time.Millisecond)
	}
	return a
}

// readWaitlists reads every sale's waitlist (user -> join number) and when;
// a sale whose waitlist cannot be read is left out (the FIFO check then
// has nothing to compare for it) and named in the error.
func readWaitlists(ctx context.Context, d *Deployment, sales []SaleSpec) (map[int64]map[int64]int64, time.Time, error) {
	at := time.Now()
	out := map[int64]map[int64]int64{}
	var errs []error
	for _, s := range sales {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		zs, err := d.RDB.ZRangeWithScores(rctx, redisgateway.SaleKeys(s.ID).Waitlist, 0, -1).Result()
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("waitlist of sale %d: %w", s.ID, err))
			continue
		}
		m := map[int64]int64{}
		for _, z := range zs {
			m2, _ := z.Member.(string)
			if u, err := strconv.ParseInt(m2, 10, 64); err == nil {
				m[u] = int64(z.Score)
			}
		}
		out[s.ID] = m
	}
	return out, at, errors.Join(errs...)
}
