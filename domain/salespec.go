package domain

import (
	"fmt"
	"time"
)

// The sale's defaults and bounds, as the contract states them for the
// admin's create and stock bodies. api/openapi.yaml documents the same
// numbers; a test in api holds it to these.
const (
	// DefaultBuckets is how many database rows a sale's stock is spread
	// over when the operator names none: the database path's takes lock
	// one bucket, not the whole stock.
	DefaultBuckets = 16
	MinBuckets     = 1
	MaxBuckets     = 1024

	// DefaultPaymentWindowSeconds is how long a placed order waits for
	// payment when the operator names no window.
	DefaultPaymentWindowSeconds = 900
	MinPaymentWindowSeconds     = 1
	MaxPaymentWindowSeconds     = 86400

	// PerUserLimit is the units one user may hold of a sale: the only
	// limit supported, so a request naming another is refused.
	PerUserLimit = 1

	// MinStock and MaxStock bound a sale's stock at creation and after
	// any adjustment; MaxStock also bounds one adjustment's delta.
	MinStock = 1
	MaxStock = 10_000_000

	// MaxTitleBytes bounds a sale's title, counted in bytes (the column's
	// width), not in characters.
	MaxTitleBytes = 200

	// MaxChallengeDifficulty bounds a sale's ALTCHA maxnumber; 0 (the
	// default) asks no challenge.
	MaxChallengeDifficulty = 10_000_000
)

// SaleSpec is an operator's request for a new sale, in the contract's
// field names; a nil field was left out of the request.
type SaleSpec struct {
	GoodsID              *int64     `json:"goods_id"`
	Title                *string    `json:"title"`
	PriceCents           *int64     `json:"price_cents"`
	Stock                *int64     `json:"stock"`
	Buckets              *int       `json:"buckets"`
	StartsAt             *time.Time `json:"starts_at"`
	EndsAt               *time.Time `json:"ends_at"`
	PaymentWindowSeconds *int       `json:"payment_window_seconds"`
	PerUserLimit         *int       `json:"per_user_limit"`
	ChallengeDifficulty  *int64     `json:"challenge_difficulty"`
}

func invalidField(field, rule string) *Error {
	return Errorf(EInvalid, "%s: %s", field, rule)
}

// Validate checks every field against the contract's rules and answers an
// invalid_request *Error naming the first bad field, or nil.
func (s *SaleSpec) Validate() error {
	switch {
	case s.GoodsID == nil || *s.GoodsID <= 0:
		return invalidField("goods_id", "required, a positive integer")
	case s.Title == nil || len(*s.Title) == 0 || len(*s.Title) > MaxTitleBytes:
		return invalidField("title", fmt.Sprintf("required, 1..%d bytes", MaxTitleBytes))
	case s.PriceCents == nil || *s.PriceCents < 0:
		return invalidField("price_cents", "required, a non-negative integer")
	case s.Stock == nil || *s.Stock < MinStock || *s.Stock > MaxStock:
		return invalidField("stock", fmt.Sprintf("required, %d..%d", MinStock, MaxStock))
	case s.Buckets != nil && (*s.Buckets < MinBuckets || *s.Buckets > MaxBuckets):
		return invalidField("buckets", fmt.Sprintf("%d..%d", MinBuckets, MaxBuckets))
	case s.StartsAt == nil:
		return invalidField("starts_at", "required, RFC 3339")
	case s.EndsAt == nil:
		return invalidField("ends_at", "required, RFC 3339")
	case !s.EndsAt.After(*s.StartsAt):
		return invalidField("ends_at", "must be after starts_at")
	case s.PaymentWindowSeconds != nil &&
		(*s.PaymentWindowSeconds < MinPaymentWindowSeconds || *s.PaymentWindowSeconds > MaxPaymentWindowSeconds):
		return invalidField("payment_window_seconds", fmt.Sprintf("%d..%d", MinPaymentWindowSeconds, MaxPaymentWindowSeconds))
	case s.PerUserLimit != nil && *s.PerUserLimit != PerUserLimit:
		return invalidField("per_user_limit", fmt.Sprintf("only %d is supported", PerUserLimit))
	case s.ChallengeDifficulty != nil && (*s.ChallengeDifficulty < 0 || *s.ChallengeDifficulty > MaxChallengeDifficulty):
		return invalidField("challenge_difficulty", fmt.Sprintf("0..%d", MaxChallengeDifficulty))
	}
	return nil
}

// NewSale validates spec and answers the sale it asks for, the defaults
// filling the fields it leaves out and its times in UTC; the sale has no
// id, control or mode yet (the store sets them).
func NewSale(spec SaleSpec) (*Sale, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	s := &Sale{
		GoodsID:              *spec.GoodsID,
		Title:                *spec.Title,
		PriceCents:           *spec.PriceCents,
		StockTotal:           *spec.Stock,
		Buckets:              DefaultBuckets,
		StartsAt:             spec.StartsAt.UTC(),
		EndsAt:               spec.EndsAt.UTC(),
		PaymentWindowSeconds: DefaultPaymentWindowSeconds,
		PerUserLimit:         PerUserLimit,
	}
	if spec.Buckets != nil {
		s.Buckets = *spec.Buckets
	}
	if spec.PaymentWindowSeconds != nil {
		s.PaymentWindowSeconds = *spec.PaymentWindowSeconds
	}
	if spec.ChallengeDifficulty != nil {
		s.ChallengeDifficulty = *spec.ChallengeDifficulty
	}
	return s, nil
}

// StockChange is an operator's adjustment of a sale's stock: units added,
// or unsold units withdrawn when Delta is negative.
type StockChange struct {
	Delta *int64 `json:"delta"`
}

// Validate checks the delta on its own: present, not zero, and no larger
// than a whole sale's stock either way.
func (c *StockChange) Validate() error {
	if c.Delta == nil || *c.Delta == 0 || *c.Delta < -MaxStock || *c.Delta > MaxStock {
		return Errorf(EInvalid, "delta: required, a non-zero integer within -%d..%d", MaxStock, MaxStock)
	}
	return nil
}

// CheckStockTotal refuses an adjustment that would take a sale's stock
// from total past MaxStock (a withdrawal's floor is the unsold units, which
// only the stores know).
func CheckStockTotal(total, delta int64) error {
	if total+delta > MaxStock {
		return Errorf(EInvalid, "delta: the stock would exceed %d", MaxStock)
	}
	return nil
}
