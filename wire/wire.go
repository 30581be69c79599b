// Package wire holds the JSON bodies of the REST contract that have no
// domain type: the API writes them and the client reads them, so the two
// cannot drift apart. Bodies that are a domain type's view (the sale view,
// the reservation view, the reconciliation report) stay in domain.
package wire

import (
	"encoding/json"
	"time"

	"github.com/seckill/seckill/domain"
)

// ErrorBody is every error answer's body: {"error":{"code","message"}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the error body's content: a contract code and a message
// safe to show.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Readiness is GET /readyz's body: "ok", or "unavailable" naming what is
// missing (mysql, redis or shutdown).
type Readiness struct {
	Status  string   `json:"status"`
	Missing []string `json:"missing,omitempty"`
}

// Readiness states and what a 503 names as missing.
const (
	Ready          = "ok"
	NotReady       = "unavailable"
	MissingMySQL   = "mysql"
	MissingRedis   = "redis"
	MissingDrained = "shutdown"
)

// ReservationList is GET /api/v1/me/reservations's body.
type ReservationList struct {
	Reservations []domain.ReservationView `json:"reservations"`
}

// WaitlistPosition is the waitlist's answer: 1 is the next unit returned.
type WaitlistPosition struct {
	SaleID   int64 `json:"sale_id"`
	Position int64 `json:"position"`
}

// AppealFiled is POST /api/v1/appeals's 201 body.
type AppealFiled struct {
	AppealID int64  `json:"appeal_id"`
	State    string `json:"state"`
}

// Warmed is POST /admin/v1/sales/{sale_id}/warmup's body.
type Warmed struct {
	SaleID     int64 `json:"sale_id"`
	RedisStock int64 `json:"redis_stock"`
}

// DevLogin is POST /dev/login's body: a user token for trying the API.
type DevLogin struct {
	Token     string    `json:"token"`
	UserID    int64     `json:"user_id"`
	ExpiresAt time.Time `json:"expires_at"`
}

// OperatorSale is a sale as an operator sees it (GET /admin/v1/sales and
// /admin/v1/sales/{sale_id}): the public view plus what the storefront
// does not show.
type OperatorSale struct {
	domain.SaleView
	Control domain.SaleControl `json:"control"`
	Mode    domain.SaleMode    `json:"mode"`
	Warmed  bool               `json:"warmed"`
	Buckets int                `json:"buckets"`
	Created time.Time          `json:"created_at"`
	// WentBack: Redis was found behind the database; the worker rebuilds.
	WentBack bool `json:"redis_went_back"`
}

// OperatorSales is GET /admin/v1/sales's body: one page, newest first;
// NextCursor names the next one and is absent on the last.
type OperatorSales struct {
	Sales      []OperatorSale `json:"sales"`
	NextCursor string         `json:"next_cursor,omitempty"`
}

// SalePage is GET /api/v1/sales's body: one page of sale views;
// NextCursor names the next one and is absent on the last.
type SalePage struct {
	Sales      []domain.SaleView `json:"sales"`
	NextCursor string            `json:"next_cursor,omitempty"`
}

// FunnelCount is one filter layer's outcome on the answering instance.
type FunnelCount struct {
	Layer   string  `json:"layer"`
	Outcome string  `json:"outcome"`
	Count   float64 `json:"count"`
}

// OperatorSaleDetail is GET /admin/v1/sales/{sale_id}'s body. Report is
// the sale workflow's answer to its report query, nil with ReportError
// saying why when it did not answer.
type OperatorSaleDetail struct {
	Sale        OperatorSale                       `json:"sale"`
	Orders      map[domain.ReservationStatus]int64 `json:"orders"`
	Refunds     int64                              `json:"refunds"`
	Report      json.RawMessage                    `json:"report"`
	ReportError string                             `json:"report_error"`
	Funnel      []FunnelCount                      `json:"funnel"`
}

// Refund is a recorded refund as GET /admin/v1/refunds lists it.
type Refund struct {
	ID          int64     `json:"refund_id"`
	Token       string    `json:"token"`
	SaleID      int64     `json:"sale_id"`
	UserID      int64     `json:"user_id"`
	PaymentRef  string    `json:"payment_ref"`
	AmountCents int64     `json:"amount_cents"`
	Reason      string    `json:"reason"`
	CreatedAt   time.Time `json:"created_at"`
}

// RefundList is GET /admin/v1/refunds's body.
type RefundList struct {
	Refunds []Refund `json:"refunds"`
}

// AdminWrite is an operator's write that succeeded, as the admin audit
// (GET /admin/v1/audit) lists it. Operator is the token's subject: the
// identity provider's sub, or secret:<user id> for the shared admin
// secret; Summary is the request's method, path and start of its body.
type AdminWrite struct {
	ID        int64     `json:"audit_id"`
	Operator  string    `json:"operator"`
	Action    string    `json:"action"`
	SaleID    *int64    `json:"sale_id"`
	Summary   string    `json:"summary"`
	Status    int       `json:"status"`
	RequestID string    `json:"request_id"`
	At        time.Time `json:"at"`
}

// AuditList is GET /admin/v1/audit's body.
type AuditList struct {
	Entries []AdminWrite `json:"entries"`
}
