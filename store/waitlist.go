package store

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/seckill/seckill/domain"
)

// WaitJoin is a waitlist join the database keeps: the user and their join
// number (Redis's, strictly increasing per sale).
type WaitJoin struct {
	UserID int64 `bun:"user_id"`
	Joined int64 `bun:"joined"`
}

// RecordWaitlistJoin keeps a join before its 200 is answered, so a Redis
// that loses it gets it back at the rebuild (WaitingJoins), and answers the
// join number the user keeps. A join recorded again keeps the number
// Redis holds now, unless the database keeps an earlier join of the user
// that still waits (no leave and no hand-over ended it): Redis then lost
// that join before the user joined again, and the user keeps their
// earlier place (the caller moves them back on Redis).
//
// The transaction is idempotent: sent again when refused or its answer
// was lost, it finds what it wrote.
func (s *Store) RecordWaitlistJoin(ctx context.Context, saleID int64, j WaitJoin) (kept int64, err error) {
	now := time.Now().UTC().Truncate(time.Millisecond)
	err = againIdempotent(ctx, func(ctx context.Context) error {
		return s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			var earlier []int64
			err := tx.NewRaw(`SELECT w.joined FROM waitlist_joins w WHERE w.sale_id = ? AND w.user_id = ? AND w.joined < ?
				AND NOT EXISTS (SELECT 1 FROM reservations r WHERE r.sale_id = w.sale_id AND r.user_id = w.user_id
					AND r.request_id = CONCAT(?, w.joined))
				FOR UPDATE`, saleID, j.UserID, j.Joined, domain.WaitlistRequestPrefix).Scan(ctx, &earlier)
			if err != nil {
				return err
			}
			if len(earlier) > 0 {
				kept = earlier[0]
				return nil
			}
			kept = j.Joined
			_, err = tx.ExecContext(ctx, `INSERT INTO waitlist_joins (sale_id, user_id, joined, created_at) VALUES (?, ?, ?, ?)
				ON DUPLICATE KEY UPDATE joined = ?`, saleID, j.UserID, j.Joined, now, j.Joined)
			return err
		})
	})
	if err != nil {
		return 0, fmt.Errorf("record waitlist join of user %d in sale %d: %w", j.UserID, saleID, err)
	}
	return kept, nil
}

// ForgetWaitlistJoin deletes a user's join: they left (joined 0: whatever
// its number) or a hand-over served that join (joined: its number).
func (s *Store) ForgetWaitlistJoin(ctx context.Context, saleID, userID, joined int64) error {
	q, args := "DELETE FROM waitlist_joins WHERE sale_id = ? AND user_id = ?", []any{saleID, userID}
	if joined != 0 {
		q, args = q+" AND joined = ?", append(args, joined)
	}
	if _, err := s.DB.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("forget waitlist join of user %d in sale %d: %w", userID, saleID, err)
	}
	return nil
}

// WaitingJoins lists the joins of a sale that still wait, in join order:
// not served by a hand-over (no reservation names the join's number), and
// of users who hold no live or paid reservation of the sale.
func (s *Store) WaitingJoins(ctx context.Context, saleID int64) ([]WaitJoin, error) {
	return s.WaitingJoinsSince(ctx, saleID, 0)
}

// WaitingJoinsSince lists the waiting joins of a sale (WaitingJoins) whose
// join number is at least since: the joins made since a moment by Redis's
// clock (join numbers are its microseconds).
func (s *Store) WaitingJoinsSince(ctx context.Context, saleID, since int64) ([]WaitJoin, error) {
	var out []WaitJoin
	err := s.DB.NewRaw(`SELECT w.user_id, w.joined FROM waitlist_joins w
		WHERE w.sale_id = ? AND w.joined >= ?
		AND NOT EXISTS (SELECT 1 FROM reservations r WHERE r.sale_id = w.sale_id AND r.user_id = w.user_id
			AND (r.request_id = CONCAT(?, w.joined) OR r.live_user IS NOT NULL))
		ORDER BY w.joined`, saleID, since, domain.WaitlistRequestPrefix).Scan(ctx, &out)
	if err != nil {
		return nil, fmt.Errorf("waiting joins of sale %d since %d: %w", saleID, since, err)
	}
	return out, nil
}
