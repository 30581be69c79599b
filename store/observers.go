package store

import (
	"context"
	"fmt"
	"time"

	"github.com/seckill/seckill/domain"
)

// PublishRedisView records an observer's own view of Redis now, on MySQL's
// clock, with the hold record its release understands (redis_observers).
func (s *Store) PublishRedisView(ctx context.Context, observer, role string, up bool) error {
	_, err := s.DB.ExecContext(ctx, `INSERT INTO redis_observers (observer, role, redis_up, seen_at, hold_version) VALUES (?, ?, ?, NOW(3), ?)
		ON DUPLICATE KEY UPDATE role = VALUES(role), redis_up = VALUES(redis_up), seen_at = VALUES(seen_at), hold_version = VALUES(hold_version)`,
		observer, role, up, domain.HoldRecordVersion)
	if err != nil {
		return fmt.Errorf("publish %s's view of redis: %w", observer, err)
	}
	return nil
}

// RedisFleetView counts the observers seen within fresh by their view of
// Redis.
func (s *Store) RedisFleetView(ctx context.Context, fresh time.Duration) (domain.RedisFleetView, error) {
	var v domain.RedisFleetView
	err := s.DB.QueryRowContext(ctx, `SELECT COALESCE(SUM(redis_up), 0), COALESCE(SUM(NOT redis_up), 0),
		COALESCE(SUM(role = 'worker' AND hold_version < ?), 0)
		FROM redis_observers WHERE seen_at >= NOW(3) - INTERVAL ? MICROSECOND`, domain.HoldRecordVersion, fresh.Microseconds()).Scan(&v.Up, &v.Down, &v.OldWorkers)
	if err != nil {
		return v, fmt.Errorf("read the fleet's view of redis: %w", err)
	}
	return v, nil
}

// SweepRedisObservers deletes the rows of observers not seen for olderThan.
func (s *Store) SweepRedisObservers(ctx context.Context, olderThan time.Duration) error {
	if _, err := s.DB.ExecContext(ctx, "DELETE FROM redis_observers WHERE seen_at < NOW(3) - INTERVAL ? MICROSECOND",
		olderThan.Microseconds()); err != nil {
		return fmt.Errorf("sweep redis observers: %w", err)
	}
	return nil
}
