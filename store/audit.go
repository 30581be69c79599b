package store

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/uptrace/bun"
)

// AdminWrite is one admin write that succeeded and who made it.
type AdminWrite struct {
	bun.BaseModel `bun:"table:admin_audit"`

	ID int64 `bun:"id,pk,autoincrement" json:"audit_id"`
	// Operator is the token's subject: the identity provider's sub, or
	// secret:<user id> for the shared admin secret.
	Operator string `bun:"operator" json:"operator"`
	Action   string `bun:"action" json:"action"`
	SaleID   *int64 `bun:"sale_id" json:"sale_id"`
	// Summary is the request: its method, path and the start of its body.
	Summary   string    `bun:"summary" json:"summary"`
	Status    int       `bun:"status" json:"status"`
	RequestID string    `bun:"request_id" json:"request_id"`
	At        time.Time `bun:"at" json:"at"`
}

// The columns' widths, in characters.
const (
	auditOperatorMax = 255
	auditActionMax   = 64
	auditSummaryMax  = 512
	auditRequestMax  = 64
)

// RecordAdminWrite appends w to the admin audit, its text cut to the
// columns' widths and its time now.
func (s *Store) RecordAdminWrite(ctx context.Context, w AdminWrite) error {
	w.ID = 0
	w.Operator, w.Action = truncate(w.Operator, auditOperatorMax), truncate(w.Action, auditActionMax)
	w.Summary, w.RequestID = truncate(w.Summary, auditSummaryMax), truncate(w.RequestID, auditRequestMax)
	w.At = time.Now().UTC().Truncate(time.Millisecond)
	if _, err := s.DB.NewInsert().Model(&w).Exec(ctx); err != nil {
		return fmt.Errorf("record admin write %s by %q: %w", w.Action, w.Operator, err)
	}
	return nil
}

// AdminAudit lists up to limit admin writes, newest first, of one sale
// when saleID > 0.
func (s *Store) AdminAudit(ctx context.Context, saleID int64, limit int) ([]AdminWrite, error) {
	out := []AdminWrite{}
	err := s.listMayLag(ctx, "admin audit", func(db querier) error {
		out = out[:0]
		q := db.NewSelect().Model(&out).Order("id DESC").Limit(int64(limit))
		if saleID > 0 {
			q = q.Where("sale_id = ?", saleID)
		}
		return q.Scan(ctx)
	})
	if err != nil {
		return nil, fmt.Errorf("list admin audit of sale %d: %w", saleID, err)
	}
	for i := range out {
		out[i].At = out[i].At.UTC()
	}
	return out, nil
}

// truncate cuts s to at most n characters, on a rune boundary, bytes
// that are not UTF-8 replaced.
func truncate(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}
