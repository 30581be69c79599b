package lua

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// RequestID finds the request_id a token was reserved with, from the sale's
// replay map (field "user:request_id", value the token); ok is false when
// the map has no such token for the user. It scans the user's fields only,
// with HSCAN MATCH, so it is for repairs and rare paths, not the hot path.
func RequestID(ctx context.Context, rdb redis.UniversalClient, saleID, userID int64, token string) (string, bool, error) {
	prefix := strconv.FormatInt(userID, 10) + ":"
	iter := rdb.HScan(ctx, SaleKeys(saleID).Requests, 0, prefix+"*", 100).Iterator()
	for {
		if !iter.Next(ctx) {
			break
		}
		field := iter.Val()
		if !iter.Next(ctx) {
			break
		}
		if iter.Val() == token {
			return strings.TrimPrefix(field, prefix), true, nil
		}
	}
	if err := iter.Err(); err != nil {
		return "", false, fmt.Errorf("scan requests of sale %d for %s: %w", saleID, token, err)
	}
	return "", false, nil
}
