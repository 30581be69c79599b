package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// KeyKeep is how long Idempotency-Key answers are kept: the contract's
// 24 hours and a margin for the sweep's period.
const KeyKeep = 25 * time.Hour

// KeyClaim is what ClaimKey found for an Idempotency-Key.
type KeyClaim struct {
	// Owned: this request runs the write and then calls FinishKey or
	// ReleaseKey.
	Owned bool
	// Reused: the key was first used with another body.
	Reused bool
	// Status and Response: the first request's answer; Status 0 while it
	// is still in flight.
	Status   int
	Response []byte
}

// ClaimKey claims an idempotency scope (admin, route and key, hashed) for
// a request whose body hashes to bodyHash. A claim still in flight after
// staleAfter (its instance died) may be taken over: the writes behind keys
// are themselves safe to repeat under the key's ref.
//
// A claim whose answer was lost is sent again; the duplicate it then meets
// is its own when the row carries this claim's body and mark (its
// created_at, to the millisecond) and no answer: the claim is owned.
func (s *Store) ClaimKey(ctx context.Context, scope, bodyHash []byte, staleAfter time.Duration) (KeyClaim, error) {
	now := time.Now().UTC()
	mark := now.Truncate(time.Millisecond)
	lost := false
	err := againIdempotent(ctx, func(ctx context.Context) error {
		_, err := s.DB.ExecContext(ctx, "INSERT INTO idempotency_keys (scope, body_hash, created_at) VALUES (?, ?, ?)", scope, bodyHash, mark)
		lost = lost || Classify(err) == FaultUnknown
		return err
	})
	if err == nil {
		return KeyClaim{Owned: true}, nil
	}
	if !IsDuplicate(err) {
		return KeyClaim{}, fmt.Errorf("claim idempotency key: %w", err)
	}
	var (
		hash     []byte
		status   sql.NullInt64
		response []byte
		created  time.Time
	)
	err = s.DB.QueryRowContext(ctx, "SELECT body_hash, status, response, created_at FROM idempotency_keys WHERE scope = ?", scope).
		Scan(&hash, &status, &response, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return s.ClaimKey(ctx, scope, bodyHash, staleAfter) // swept meanwhile
	}
	if err != nil {
		return KeyClaim{}, fmt.Errorf("read idempotency key: %w", err)
	}
	switch {
	case !bytes.Equal(hash, bodyHash):
		return KeyClaim{Reused: true}, nil
	case lost && !status.Valid && created.Equal(mark):
		return KeyClaim{Owned: true}, nil
	case status.Valid:
		return KeyClaim{Status: int(status.Int64), Response: response}, nil
	case created.Before(now.Add(-staleAfter)):
		// The new mark must differ from the old one in the column's
		// milliseconds: MariaDB counts an UPDATE that changes nothing as
		// no row, which would read as another claimer's takeover.
		mark := now.Truncate(time.Millisecond)
		if !mark.After(created) {
			mark = created.Add(time.Millisecond)
		}
		res, err := s.DB.ExecContext(ctx, "UPDATE idempotency_keys SET created_at = ? WHERE scope = ? AND status IS NULL AND created_at = ?", mark, scope, created)
		if err != nil {
			return KeyClaim{}, fmt.Errorf("take over idempotency key: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return KeyClaim{}, fmt.Errorf("take over idempotency key: %w", err)
		}
		return KeyClaim{Owned: n == 1}, nil
	}
	return KeyClaim{}, nil
}

// FinishKey stores the answer of a claimed key; sent again when refused or
// its answer was lost (it writes the same answer).
func (s *Store) FinishKey(ctx context.Context, scope []byte, status int, response []byte) error {
	err := againIdempotent(ctx, func(ctx context.Context) error {
		_, err := s.DB.ExecContext(ctx, "UPDATE idempotency_keys SET status = ?, response = ? WHERE scope = ?", status, response, scope)
		return err
	})
	if err != nil {
		return fmt.Errorf("finish idempotency key: %w", err)
	}
	return nil
}

// ReleaseKey drops a claimed key whose write did not happen, so a retry
// runs it again; sent again when refused or its answer was lost.
func (s *Store) ReleaseKey(ctx context.Context, scope []byte) error {
	err := againIdempotent(ctx, func(ctx context.Context) error {
		_, err := s.DB.ExecContext(ctx, "DELETE FROM idempotency_keys WHERE scope = ? AND status IS NULL", scope)
		return err
	})
	if err != nil {
		return fmt.Errorf("release idempotency key: %w", err)
	}
	return nil
}

// SweepKeys deletes up to limit keys claimed before before, and answers how
// many it deleted.
func (s *Store) SweepKeys(ctx context.Context, before time.Time, limit int) (int64, error) {
	res, err := s.DB.ExecContext(ctx, "DELETE FROM idempotency_keys WHERE created_at < ? LIMIT ?", before.UTC(), limit)
	if err != nil {
		return 0, fmt.Errorf("sweep idempotency keys: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("sweep idempotency keys: %w", err)
	}
	return n, nil
}

// PendingAddition is a stock addition the database committed and Redis
// has not taken yet.
type PendingAddition struct {
	Ref    string `bun:"ref"`
	SaleID int64  `bun:"sale_id"`
	Delta  int64  `bun:"delta"`
	// CreatedAt: when the database committed it.
	CreatedAt time.Time `bun:"created_at"`
}

// PendingAdditions lists up to limit pending additions, of one sale when
// saleID > 0, oldest first.
func (s *Store) PendingAdditions(ctx context.Context, saleID int64, limit int) ([]PendingAddition, error) {
	var out []PendingAddition
	q := s.DB.NewSelect().Table("stock_redis_pending").Column("ref", "sale_id", "delta", "created_at").OrderExpr("created_at").Limit(int64(limit))
	if saleID > 0 {
		q = q.Where("sale_id = ?", saleID)
	}
	if err := q.Scan(ctx, &out); err != nil {
		return nil, fmt.Errorf("pending stock additions: %w", err)
	}
	return out, nil
}

// AdditionApplied forgets a pending addition Redis has taken.
func (s *Store) AdditionApplied(ctx context.Context, ref string) error {
	if _, err := s.DB.ExecContext(ctx, "DELETE FROM stock_redis_pending WHERE ref = ?", ref); err != nil {
		return fmt.Errorf("forget pending stock addition %s: %w", ref, err)
	}
	return nil
}

// Adjusted reports whether the stock change under ref is committed.
func (s *Store) Adjusted(ctx context.Context, ref string) (bool, error) {
	var n int
	if err := s.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM stock_ledger WHERE token = ? AND operation = 'adjust'", ref).Scan(&n); err != nil {
		return false, fmt.Errorf("stock change %s: %w", ref, err)
	}
	return n > 0, nil
}
