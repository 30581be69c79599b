// Package finalstate reads one sale's final state straight from MySQL,
// Redis and Temporal (not through the project's code) and checks what that
// state alone must show. The fault suite and the chaos run both judge it;
// each adds what only it knows (reconciliation's report, the clients'
// history, the probes).
package finalstate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/redisgateway"
)

// Reservation is one reservation row with its order, as MySQL holds it.
type Reservation struct {
	Token       string                   `json:"token"`
	UserID      int64                    `json:"user_id"`
	RequestID   string                   `json:"request_id"`
	Status      domain.ReservationStatus `json:"status"`
	OrderStatus domain.ReservationStatus `json:"order_status,omitempty"` // "" without an order
	PaymentRef  string                   `json:"payment_ref,omitempty"`
	PayBy       time.Time                `json:"pay_by,omitzero"`
	CreatedAt   time.Time                `json:"created_at,omitzero"`
	// UpdatedAt is the reservation's last change: its end, once ended.
	UpdatedAt  time.Time `json:"updated_at,omitzero"`
	FailReason string    `json:"fail_reason,omitempty"`
}

// HoldsUnit reports whether the reservation or its order holds a unit.
func (r Reservation) HoldsUnit() bool {
	return r.Status.HoldsUnit() || (r.OrderStatus != "" && r.OrderStatus.HoldsUnit())
}

// Workflow is what Temporal lists for one order workflow id.
type Workflow struct {
	Runs       int `json:"runs"`
	Running    int `json:"running"`
	Terminated int `json:"terminated,omitempty"` // an operator's action
}

// Refund is one recorded refund.
type Refund struct {
	Token      string `json:"token"`
	PaymentRef string `json:"payment_ref"`
}

// Sale is one sale's final state.
type Sale struct {
	SaleID        int64 `json:"sale_id"`
	StockTotal    int64 `json:"stock_total"`
	WindowSeconds int   `json:"payment_window_seconds"`
	// BucketStock is the sum of the sale's MySQL stock buckets.
	BucketStock int64 `json:"bucket_stock"`
	// RedisStock is the sale's Redis stock key (-1: missing); RedisBuyers
	// its buyer marks.
	RedisStock   int64         `json:"redis_stock"`
	RedisBuyers  []int64       `json:"redis_buyers"`
	Reservations []Reservation `json:"reservations"`
	// Orders and Deducts count order rows and ledger deduct rows per token.
	Orders  map[string]int `json:"orders"`
	Deducts map[string]int `json:"deducts"`
	Refunds []Refund       `json:"refunds"`
	// Workflows are the order:* executions listed by SaleId.
	Workflows map[string]Workflow `json:"workflows"`
}

// Sources are the direct clients the state is read with.
type Sources struct {
	DB       *sql.DB
	Redis    redis.UniversalClient
	Temporal client.Client
}

// Read reads sale saleID's final state.
func Read(ctx context.Context, src Sources, saleID int64) (Sale, error) {
	s := Sale{SaleID: saleID, Orders: map[string]int{}, Deducts: map[string]int{}, Workflows: map[string]Workflow{}, RedisStock: -1}
	if err := src.DB.QueryRowContext(ctx, "SELECT stock_total, payment_window_seconds FROM sales WHERE id = ?", saleID).Scan(&s.StockTotal, &s.WindowSeconds); err != nil {
		return s, fmt.Errorf("sale row: %w", err)
	}
	if err := src.DB.QueryRowContext(ctx, "SELECT COALESCE(SUM(stock), 0) FROM stock_buckets WHERE sale_id = ?", saleID).Scan(&s.BucketStock); err != nil {
		return s, fmt.Errorf("buckets: %w", err)
	}
	if err := s.readReservations(ctx, src.DB); err != nil {
		return s, err
	}
	for q, m := range map[string]map[string]int{
		"SELECT token, COUNT(*) FROM orders WHERE sale_id = ? GROUP BY token":                                s.Orders,
		"SELECT token, COUNT(*) FROM stock_ledger WHERE sale_id = ? AND operation = 'deduct' GROUP BY token": s.Deducts,
	} {
		if err := countRows(ctx, src.DB, q, saleID, m); err != nil {
			return s, err
		}
	}
	if err := s.readRefunds(ctx, src.DB); err != nil {
		return s, err
	}
	if err := s.readRedis(ctx, src.Redis); err != nil {
		return s, err
	}
	return s, s.readWorkflows(ctx, src.Temporal)
}

// readReservations reads the sale's reservations with their orders'
// statuses.
func (s *Sale) readReservations(ctx context.Context, db *sql.DB) error {
	rows, err := db.QueryContext(ctx, `SELECT r.token, r.user_id, r.request_id, r.status, COALESCE(o.status, ''),
		COALESCE(r.payment_ref, ''), r.pay_by, r.created_at, r.updated_at, COALESCE(r.fail_reason, '')
		FROM reservations r LEFT JOIN orders o ON o.token = r.token WHERE r.sale_id = ?`, s.SaleID)
	if err != nil {
		return fmt.Errorf("reservations: %w", err)
	}
	for rows.Next() {
		var r Reservation
		var payBy sql.NullTime
		if err := rows.Scan(&r.Token, &r.UserID, &r.RequestID, &r.Status, &r.OrderStatus, &r.PaymentRef, &payBy, &r.CreatedAt, &r.UpdatedAt, &r.FailReason); err != nil {
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

// readRefunds reads the sale's refunds.
func (s *Sale) readRefunds(ctx context.Context, db *sql.DB) error {
	rows, err := db.QueryContext(ctx, "SELECT token, payment_ref FROM refunds WHERE sale_id = ?", s.SaleID)
	if err != nil {
		return fmt.Errorf("refunds: %w", err)
	}
	for rows.Next() {
		var r Refund
		if err := rows.Scan(&r.Token, &r.PaymentRef); err != nil {
			rows.Close()
			return fmt.Errorf("scan refund: %w", err)
		}
		s.Refunds = append(s.Refunds, r)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return fmt.Errorf("refunds: %w", err)
	}
	return nil
}

// readRedis reads the sale's stock and buyer marks in Redis (keys that are
// gone leave RedisStock -1 and no buyers).
func (s *Sale) readRedis(ctx context.Context, rdb redis.UniversalClient) error {
	k := redisgateway.SaleKeys(s.SaleID)
	v, err := rdb.Get(ctx, k.Stock).Result()
	switch {
	case errors.Is(err, redis.Nil):
	case err != nil:
		return fmt.Errorf("redis stock: %w", err)
	default:
		if s.RedisStock, err = strconv.ParseInt(v, 10, 64); err != nil {
			return fmt.Errorf("redis stock %q: %w", v, err)
		}
	}
	members, err := rdb.SMembers(ctx, k.Buyers).Result()
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
	slices.Sort(s.RedisBuyers)
	return nil
}

// readWorkflows counts each order workflow's runs, running runs and
// terminated runs.
func (s *Sale) readWorkflows(ctx context.Context, tc client.Client) error {
	var next []byte
	for {
		resp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf("%s = %d", domain.SearchAttrSaleID, s.SaleID), PageSize: 1000, NextPageToken: next,
		})
		if err != nil {
			return fmt.Errorf("list workflows: %w", err)
		}
		for _, e := range resp.GetExecutions() {
			id := e.GetExecution().GetWorkflowId()
			if _, ok := domain.TokenOfOrderWorkflowID(id); !ok {
				continue
			}
			w := s.Workflows[id]
			w.Runs++
			switch e.GetStatus() {
			case enums.WORKFLOW_EXECUTION_STATUS_RUNNING:
				w.Running++
			case enums.WORKFLOW_EXECUTION_STATUS_TERMINATED:
				w.Terminated++
			}
			s.Workflows[id] = w
		}
		if next = resp.GetNextPageToken(); len(next) == 0 {
			return nil
		}
	}
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
