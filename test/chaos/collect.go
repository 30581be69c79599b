package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/lua"
)

// collect reads every sale's final state from MySQL, Redis and Temporal
// directly (not through the project's code), then asks the API for its
// reconciliation report.
func collect(ctx context.Context, d *Deployment, c *caller, sales []SaleSpec) (Final, error) {
	f := Final{At: time.Now()}
	for _, sp := range sales {
		s, err := collectSale(ctx, d, sp.ID)
		if err != nil {
			return f, fmt.Errorf("sale %d: %w", sp.ID, err)
		}
		a := c.send(ctx, 0, http.MethodGet, fmt.Sprintf("/admin/v1/sales/%d/reconciliation", sp.ID), AdminUser, nil, nil)
		if a.Err != nil || a.HTTP != http.StatusOK {
			a = c.send(ctx, 1, http.MethodGet, fmt.Sprintf("/admin/v1/sales/%d/reconciliation", sp.ID), AdminUser, nil, nil)
		}
		switch {
		case a.Err != nil:
			s.ReconErr = a.Err.Error()
		case a.HTTP != http.StatusOK:
			s.ReconErr = fmt.Sprintf("%d %s", a.HTTP, a.code())
		default:
			s.ReconConsistent, _ = a.Body["consistent"].(bool)
			ds, _ := a.Body["discrepancies"].([]any)
			for _, x := range ds {
				m, _ := x.(map[string]any)
				user, _ := m["user_id"].(float64)
				s.ReconDiscrepancies = append(s.ReconDiscrepancies, fmt.Sprintf("%v user %d token %v: %v", m["kind"], int64(user), m["token"], m["detail"]))
			}
		}
		f.Sales = append(f.Sales, s)
	}
	return f, nil
}

func collectSale(ctx context.Context, d *Deployment, saleID int64) (SaleState, error) {
	s := SaleState{SaleID: saleID, Orders: map[string]int{}, Deducts: map[string]int{}, Workflows: map[string]Workflow{}, RedisStock: -1}
	if err := d.DB.QueryRowContext(ctx, "SELECT stock_total, payment_window_seconds FROM sales WHERE id = ?", saleID).Scan(&s.StockTotal, &s.WindowSeconds); err != nil {
		return s, fmt.Errorf("sale row: %w", err)
	}
	if err := d.DB.QueryRowContext(ctx, "SELECT COALESCE(SUM(stock), 0) FROM stock_buckets WHERE sale_id = ?", saleID).Scan(&s.BucketStock); err != nil {
		return s, fmt.Errorf("buckets: %w", err)
	}
	if err := s.collectReservations(ctx, d); err != nil {
		return s, err
	}
	for q, m := range map[string]map[string]int{
		"SELECT token, COUNT(*) FROM orders WHERE sale_id = ? GROUP BY token":                                s.Orders,
		"SELECT token, COUNT(*) FROM stock_ledger WHERE sale_id = ? AND operation = 'deduct' GROUP BY token": s.Deducts,
	} {
		if err := countRows(ctx, d.DB, q, saleID, m); err != nil {
			return s, err
		}
	}
	if err := s.collectRefunds(ctx, d); err != nil {
		return s, err
	}
	if err := s.collectRedis(ctx, d); err != nil {
		return s, err
	}
	return s, s.collectWorkflows(ctx, d)
}

// collectReservations reads the sale's reservations with their orders'
// statuses.
func (s *SaleState) collectReservations(ctx context.Context, d *Deployment) error {
	saleID := s.SaleID
	rows, err := d.DB.QueryContext(ctx, `SELECT r.token, r.user_id, r.request_id, r.status, COALESCE(o.status, ''),
		COALESCE(r.payment_ref, ''), r.pay_by, r.created_at FROM reservations r LEFT JOIN orders o ON o.token = r.token WHERE r.sale_id = ?`, saleID)
	if err != nil {
		return fmt.Errorf("reservations: %w", err)
	}
	for rows.Next() {
		var r Reservation
		var payBy sql.NullTime
		if err := rows.Scan(&r.Token, &r.UserID, &r.RequestID, &r.Status, &r.OrderStatus, &r.PaymentRef, &payBy, &r.CreatedAt); err != nil {
			rows.Close()
			return fmt.Errorf("scan reservation: %w", err)
		}
		if payBy.Valid {
			r.PayBy = payBy.Time
		}
		s.Reservations = append(s.Reservations, r)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return fmt.Errorf("reservations: %w", err)
	}
	return nil
}

// collectRefunds reads the sale's refunds.
func (s *SaleState) collectRefunds(ctx context.Context, d *Deployment) error {
	saleID := s.SaleID
	rr, err := d.DB.QueryContext(ctx, "SELECT token, payment_ref FROM refunds WHERE sale_id = ?", saleID)
	if err != nil {
		return fmt.Errorf("refunds: %w", err)
	}
	for rr.Next() {
		var r Refund
		if err := rr.Scan(&r.Token, &r.PaymentRef); err != nil {
			rr.Close()
			return fmt.Errorf("scan refund: %w", err)
		}
		s.Refunds = append(s.Refunds, r)
	}
	if err := errors.Join(rr.Err(), rr.Close()); err != nil {
		return fmt.Errorf("refunds: %w", err)
	}
	return nil
}

// collectRedis reads the sale's stock and buyer marks in Redis (keys that
// are gone leave RedisStock -1 and no buyers).
func (s *SaleState) collectRedis(ctx context.Context, d *Deployment) error {
	k := lua.SaleKeys(s.SaleID)
	v, err := d.RDB.Get(ctx, k.Stock).Result()
	switch {
	case errors.Is(err, redis.Nil):
	case err != nil:
		return fmt.Errorf("redis stock: %w", err)
	default:
		if s.RedisStock, err = strconv.ParseInt(v, 10, 64); err != nil {
			return fmt.Errorf("redis stock %q: %w", v, err)
		}
	}
	members, err := d.RDB.SMembers(ctx, k.Buyers).Result()
	if err != nil {
		return fmt.Errorf("redis buyers: %w", err)
	}
	for _, m := range members {
		u, err := strconv.ParseInt(m, 10, 64)
		if err != nil {
			return fmt.Errorf("redis buyer %q: %w", m, err)
		}
		s.RedisBuyers = append(s.RedisBuyers, u)
	}
	return nil
}

// collectWorkflows counts each order workflow's runs and running runs.
func (s *SaleState) collectWorkflows(ctx context.Context, d *Deployment) error {
	saleID := s.SaleID
	var next []byte
	for {
		resp, err := d.TC.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf("%s = %d", domain.SearchAttrSaleID, saleID), PageSize: 1000, NextPageToken: next,
		})
		if err != nil {
			return fmt.Errorf("list workflows: %w", err)
		}
		for _, e := range resp.GetExecutions() {
			id := e.GetExecution().GetWorkflowId()
			if !strings.HasPrefix(id, "order:") {
				continue
			}
			w := s.Workflows[id]
			w.Runs++
			if e.GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
				w.Running++
			}
			s.Workflows[id] = w
		}
		if next = resp.GetNextPageToken(); len(next) == 0 {
			break
		}
	}
	return nil
}

func countRows(ctx context.Context, db *sql.DB, q string, saleID int64, into map[string]int) error {
	rows, err := db.QueryContext(ctx, q, saleID)
	if err != nil {
		return fmt.Errorf("%s: %w", q, err)
	}
	defer rows.Close()
	for rows.Next() {
		var tok string
		var n int
		if err := rows.Scan(&tok, &n); err != nil {
			return fmt.Errorf("scan: %w", err)
		}
		into[tok] = n
	}
	return rows.Err()
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
		for _, u := range sortedKeys(ended) {
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
		zs, err := d.RDB.ZRangeWithScores(rctx, lua.SaleKeys(s.ID).Waitlist, 0, -1).Result()
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
