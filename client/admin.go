package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/gate"
	"github.com/seckill/seckill/wire"
)

// NewSale is the body of POST /admin/v1/sales.
type NewSale struct {
	GoodsID              int64     `json:"goods_id"`
	Title                string    `json:"title"`
	PriceCents           int64     `json:"price_cents"`
	Stock                int64     `json:"stock"`
	Buckets              int       `json:"buckets,omitempty"`
	StartsAt             time.Time `json:"starts_at"`
	EndsAt               time.Time `json:"ends_at"`
	PaymentWindowSeconds int       `json:"payment_window_seconds,omitempty"`
	ChallengeDifficulty  int64     `json:"challenge_difficulty,omitempty"`
}

// CreateSale creates a sale under the Idempotency-Key key ("" draws a
// fresh one); every retry resends the same key, so a lost answer never
// creates a second sale.
func (c *Client) CreateSale(ctx context.Context, s NewSale, key string) (domain.SaleView, error) {
	var v domain.SaleView
	return v, c.do(ctx, call{method: http.MethodPost, path: AdminSalesPath, body: s, header: keyed(key), idempotent: true}, &v)
}

// Warmup loads a sale into Redis; a sale already taking reservations
// answers domain.EAlreadyLive.
func (c *Client) Warmup(ctx context.Context, saleID int64) (wire.Warmed, error) {
	var w wire.Warmed
	return w, c.do(ctx, call{method: http.MethodPost, path: AdminSalePath(saleID, "warmup"), idempotent: true}, &w)
}

// Pause stops a sale's new reservations.
func (c *Client) Pause(ctx context.Context, saleID int64) (domain.SaleView, error) {
	return c.control(ctx, saleID, "pause")
}

// Resume undoes a pause.
func (c *Client) Resume(ctx context.Context, saleID int64) (domain.SaleView, error) {
	return c.control(ctx, saleID, "resume")
}

// Stop ends a sale early.
func (c *Client) Stop(ctx context.Context, saleID int64) (domain.SaleView, error) {
	return c.control(ctx, saleID, "stop")
}

func (c *Client) control(ctx context.Context, saleID int64, action string) (domain.SaleView, error) {
	var v domain.SaleView
	return v, c.do(ctx, call{method: http.MethodPost, path: AdminSalePath(saleID, action), idempotent: true}, &v)
}

// AddStock adds delta units (a negative delta withdraws unsold ones) under
// the Idempotency-Key key ("" draws a fresh one), resent on every retry.
func (c *Client) AddStock(ctx context.Context, saleID, delta int64, key string) (domain.SaleView, error) {
	var v domain.SaleView
	return v, c.do(ctx, call{method: http.MethodPost, path: AdminSalePath(saleID, "stock"), header: keyed(key),
		body: map[string]int64{"delta": delta}, idempotent: true}, &v)
}

// Reconcile runs a two-pass reconciliation of a sale; repair also repairs
// what is safe to.
func (c *Client) Reconcile(ctx context.Context, saleID int64, repair bool) (domain.ReconciliationReport, error) {
	path := AdminSalePath(saleID, "reconciliation")
	if repair {
		path += "?repair=true"
	}
	var r domain.ReconciliationReport
	return r, c.do(ctx, call{method: http.MethodGet, path: path, idempotent: true}, &r)
}

// Blacklist refuses a user's reservations.
func (c *Client) Blacklist(ctx context.Context, userID int64) error {
	return c.do(ctx, call{method: http.MethodPut, path: BlacklistPath(userID), idempotent: true}, nil)
}

// Unblacklist takes a user off the blacklist.
func (c *Client) Unblacklist(ctx context.Context, userID int64) error {
	return c.do(ctx, call{method: http.MethodDelete, path: BlacklistPath(userID), idempotent: true}, nil)
}

// Exempt lets a user reserve without a challenge pass.
func (c *Client) Exempt(ctx context.Context, userID int64) error {
	return c.do(ctx, call{method: http.MethodPut, path: ExemptionPath(userID), idempotent: true}, nil)
}

// Unexempt ends a user's challenge exemption.
func (c *Client) Unexempt(ctx context.Context, userID int64) error {
	return c.do(ctx, call{method: http.MethodDelete, path: ExemptionPath(userID), idempotent: true}, nil)
}

// AllowlistChange is the body of POST /admin/v1/sales/{sale_id}/allowlist.
type AllowlistChange struct {
	Add        []int64 `json:"add,omitempty"`
	Remove     []int64 `json:"remove,omitempty"`
	Restricted *bool   `json:"restricted,omitempty"`
}

// UpdateAllowlist changes a sale's allowlist (repeating a change changes
// nothing more).
func (c *Client) UpdateAllowlist(ctx context.Context, saleID int64, ch AllowlistChange) (gate.AllowlistResult, error) {
	var r gate.AllowlistResult
	return r, c.do(ctx, call{method: http.MethodPost, path: AdminSalePath(saleID, "allowlist"), body: ch, idempotent: true}, &r)
}

// Appeals is one page of the appeals in state ("" is open), after cursor
// (the previous page's NextCursor; "" for the first).
func (c *Client) Appeals(ctx context.Context, state, cursor string) (gate.AppealPage, error) {
	q := url.Values{}
	if state != "" {
		q.Set("state", state)
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	path := AdminAppealsPath
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var p gate.AppealPage
	return p, c.do(ctx, call{method: http.MethodGet, path: path, idempotent: true}, &p)
}

// ResolveAppeal closes an open appeal with action (unblacklist, exempt or
// reject). A closed appeal is 409 conflict, so a lost answer is not resent.
func (c *Client) ResolveAppeal(ctx context.Context, appealID int64, action string) (domain.Appeal, error) {
	var a domain.Appeal
	return a, c.do(ctx, call{method: http.MethodPost, path: ResolveAppealPath(appealID),
		body: map[string]string{"action": action}}, &a)
}

// Refunds lists recorded refunds, newest first, of one sale (saleID 0: of
// every sale).
func (c *Client) Refunds(ctx context.Context, saleID int64) ([]wire.Refund, error) {
	path := AdminRefundsPath
	if saleID > 0 {
		path += "?sale_id=" + strconv.FormatInt(saleID, 10)
	}
	var l wire.RefundList
	return l.Refunds, c.do(ctx, call{method: http.MethodGet, path: path, idempotent: true}, &l)
}

// Sales is the first page of the sales as operators see them, the newest
// 100; SalesPage and AllOperatorSales page further.
func (c *Client) Sales(ctx context.Context) ([]wire.OperatorSale, error) {
	var l wire.OperatorSales
	return l.Sales, c.do(ctx, call{method: http.MethodGet, path: AdminSalesPath, idempotent: true}, &l)
}

// OperatorSale is one sale's live view for operators: its orders by
// status, refunds, last reconciliation report and the answering
// instance's reservation funnel.
func (c *Client) OperatorSale(ctx context.Context, saleID int64) (wire.OperatorSaleDetail, error) {
	var d wire.OperatorSaleDetail
	return d, c.do(ctx, call{method: http.MethodGet, path: OperatorSalePath(saleID), idempotent: true}, &d)
}

// Audit lists the admin writes that succeeded, newest first, of one sale
// (saleID > 0) or all, at most limit (0: the API's default).
func (c *Client) Audit(ctx context.Context, saleID int64, limit int) ([]wire.AdminWrite, error) {
	q := url.Values{}
	if saleID > 0 {
		q.Set("sale_id", strconv.FormatInt(saleID, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	path := AdminAuditPath
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var l wire.AuditList
	return l.Entries, c.do(ctx, call{method: http.MethodGet, path: path, idempotent: true}, &l)
}

// Console fetches a file of the operator console ("" for its page).
func (c *Client) Console(ctx context.Context, name string) ([]byte, error) {
	path := "/console"
	if name != "" {
		path = ConsoleFilePath(name)
	}
	a, err := c.send(ctx, call{method: http.MethodGet, path: path, noAuth: true, idempotent: true})
	return a.body, err
}
