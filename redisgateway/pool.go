package redisgateway

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// PoolTTL bounds a sale's opening pool: it matters while the draw's bands
// are admitted (minutes); the sale's tear-down deletes it sooner.
const PoolTTL = 24 * time.Hour

// JoinPool enters a user in a sale's opening pool with their ticket. A
// user's ticket never changes (ZADD NX), so entering again does nothing.
func (c *Client) JoinPool(ctx context.Context, saleID, userID int64, ticket float64) error {
	k := SaleKeys(saleID).Pool
	pipe := c.rdb.Pipeline()
	pipe.ZAddNX(ctx, k, redis.Z{Score: ticket, Member: strconv.FormatInt(userID, 10)})
	pipe.Expire(ctx, k, PoolTTL)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("join pool of sale %d: %w", saleID, err)
	}
	return nil
}

// PoolRank is a user's place in a sale's opening pool by ticket (0 first)
// and the pool's size; in is false when the user did not enter.
func (c *Client) PoolRank(ctx context.Context, saleID, userID int64) (rank, size int64, in bool, err error) {
	k := SaleKeys(saleID).Pool
	pipe := c.rdb.Pipeline()
	rankCmd := pipe.ZRank(ctx, k, strconv.FormatInt(userID, 10))
	sizeCmd := pipe.ZCard(ctx, k)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return 0, 0, false, fmt.Errorf("pool rank in sale %d: %w", saleID, err)
	}
	size = sizeCmd.Val()
	rank, err = rankCmd.Result()
	if errors.Is(err, redis.Nil) {
		return size, size, false, nil
	}
	if err != nil {
		return 0, 0, false, fmt.Errorf("pool rank in sale %d: %w", saleID, err)
	}
	return rank, size, true, nil
}
