package store

import (
	"context"
	"fmt"
	"time"
)

// FinishedSince lists the sales whose Redis keys were removed at or after
// since (sales.Teardown), oldest first.
func (s *Store) FinishedSince(ctx context.Context, since time.Time) ([]int64, error) {
	var ids []int64
	if err := s.DB.NewRaw("SELECT id FROM sales WHERE finished_at >= ? ORDER BY finished_at, id", since.UTC()).Scan(ctx, &ids); err != nil {
		return nil, fmt.Errorf("sales finished since %s: %w", since.Format(time.RFC3339), err)
	}
	return ids, nil
}
