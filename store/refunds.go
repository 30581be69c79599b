package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// Refund is a confirmed payment that must be given back: it arrived after
// its reservation ended, or paid an already paid reservation again.
type Refund struct {
	bun.BaseModel `bun:"table:refunds"`

	ID          int64     `bun:"id,pk,autoincrement" json:"refund_id"`
	Token       string    `bun:"token" json:"token"`
	SaleID      int64     `bun:"sale_id" json:"sale_id"`
	UserID      int64     `bun:"user_id" json:"user_id"`
	PaymentRef  string    `bun:"payment_ref" json:"payment_ref"`
	AmountCents int64     `bun:"amount_cents" json:"amount_cents"`
	Reason      string    `bun:"reason" json:"reason"`
	CreatedAt   time.Time `bun:"created_at" json:"created_at"`
}

// RecordRefund records r once per (token, payment_ref) and returns the row
// as stored: a provider's retry gets the first record back, unchanged. An
// insert refused or whose answer was lost is sent again (the key makes it
// once) and the row read back, so the answer names the one refund stored.
func (s *Store) RecordRefund(ctx context.Context, r Refund) (*Refund, error) {
	r.ID = 0
	r.CreatedAt = time.Now().UTC().Truncate(time.Millisecond)
	out := new(Refund)
	err := againIdempotent(ctx, func(ctx context.Context) error {
		row := r
		if _, err := s.DB.NewInsert().Model(&row).Ignore().Exec(ctx); err != nil {
			return fmt.Errorf("record refund of %s/%s: %w", r.Token, r.PaymentRef, err)
		}
		if err := s.DB.NewSelect().Model(out).Where("token = ? AND payment_ref = ?", r.Token, r.PaymentRef).Scan(ctx); err != nil {
			return fmt.Errorf("read refund of %s/%s: %w", r.Token, r.PaymentRef, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out.CreatedAt = out.CreatedAt.UTC()
	return out, nil
}

// ListRefunds returns up to limit refunds, newest first, of one sale (or of
// all sales when saleID is 0).
func (s *Store) ListRefunds(ctx context.Context, saleID int64, limit int) ([]Refund, error) {
	var out []Refund
	err := s.listMayLag(ctx, "refunds", func(db querier) error {
		out = nil
		q := db.NewSelect().Model(&out).Order("id DESC").Limit(int64(limit))
		if saleID != 0 {
			q = q.Where("sale_id = ?", saleID)
		}
		if err := q.Scan(ctx); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list refunds of sale %d: %w", saleID, err)
	}
	for i := range out {
		out[i].CreatedAt = out[i].CreatedAt.UTC()
	}
	return out, nil
}

// CountRefunds counts a sale's refunds.
func (s *Store) CountRefunds(ctx context.Context, saleID int64) (int64, error) {
	n, err := s.DB.NewSelect().Model((*Refund)(nil)).Where("sale_id = ?", saleID).Count(ctx)
	if err != nil {
		return 0, fmt.Errorf("count refunds of sale %d: %w", saleID, err)
	}
	return int64(n), nil
}
