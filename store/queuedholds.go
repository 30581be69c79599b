package store

import (
	"context"
	"fmt"
	"time"

	"github.com/seckill/seckill/domain"
)

// queuedHoldsQuery reads a page of a sale's QUEUED Redis holds recorded
// between a time and a number of microseconds before the database's clock
// (created_at is that clock's), after a token. The index is named: by its
// statistics the optimizer may take the live-user key, led by the sale
// too, which reads every reservation of the sale, not only its QUEUED ones.
const queuedHoldsQuery = `SELECT token, user_id, request_id FROM reservations FORCE INDEX (reservations_sale_status)
	WHERE sale_id = ? AND status = ? AND path = ? AND created_at >= ? AND created_at <= NOW(3) - INTERVAL ? MICROSECOND AND token > ?
	ORDER BY token LIMIT ?`

func queuedHoldsArgs(saleID int64, since time.Time, untilAgo time.Duration, after string, limit int) []any {
	return []any{saleID, string(domain.StatusQueued), string(domain.PathRedis), since.UTC(), untilAgo.Microseconds(), after, limit}
}

// QueuedRedisHolds answers, as their workflows' inputs, up to limit of a
// sale's Redis holds recorded since since, and at least untilAgo before
// the database's clock now (a negative untilAgo: up to that far after it),
// that are still QUEUED, in token order after after ("" from the first):
// holds whose workflow has not placed their order, and may never have
// started (an inbox entry that a Redis failover lost). The upper bound is
// on the database's clock, which recorded created_at, so a caller's
// elapsed time bounds it without a clock skew. A QUEUED hold is one in
// flight, so a sale has few beside a burst's backlog; the read is one range
// of the sale's QUEUED rows.
func (s *Store) QueuedRedisHolds(ctx context.Context, saleID int64, since time.Time, untilAgo time.Duration, after string, limit int) ([]domain.OrderInput, error) {
	var rows []struct {
		Token     string `bun:"token"`
		UserID    int64  `bun:"user_id"`
		RequestID string `bun:"request_id"`
	}
	if err := s.DB.NewRaw(queuedHoldsQuery, queuedHoldsArgs(saleID, since, untilAgo, after, limit)...).Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("queued redis holds of sale %d since %s: %w", saleID, since.Format(time.RFC3339), err)
	}
	out := make([]domain.OrderInput, len(rows))
	for i, r := range rows {
		out[i] = domain.RedisHoldInput(r.Token, saleID, r.UserID, r.RequestID)
	}
	return out, nil
}
