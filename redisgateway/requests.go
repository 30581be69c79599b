package redisgateway

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed replay_restore.lua
	replayRestoreSrc    string
	replayRestoreScript = redis.NewScript(replayRestoreSrc)
)

// RestoreReplay puts back the replay key of a user's live reservation
// that Redis forgot (replay_restore.lua): a repeat of its request then gets
// its token. It reports whether a field was missing.
func (c *Client) RestoreReplay(ctx context.Context, saleID, userID int64, requestID, token string) (bool, error) {
	k := SaleKeys(saleID)
	n, err := replayRestoreScript.Run(ctx, c.rdb, []string{k.Meta, k.Requests}, RequestField(userID, requestID), token, requestID).Int64()
	if err != nil {
		return false, fmt.Errorf("restore the replay key of %s: %w", token, err)
	}
	return n == 1, nil
}

// RequestField is the replay map's field of a user's request,
// "user:request_id" (its value is the token reserved).
func RequestField(userID int64, requestID string) string {
	return string(AppendRequestField(nil, userID, requestID))
}

// AppendRequestField appends RequestField(userID, requestID) to dst.
func AppendRequestField(dst []byte, userID int64, requestID string) []byte {
	dst = strconv.AppendInt(dst, userID, 10)
	dst = append(dst, ':')
	return append(dst, requestID...)
}

// TokenValue is the tokens hash's value of a token, "state:user" (parsed
// by TokenState).
func TokenValue(state string, userID int64) string {
	return state + ":" + strconv.FormatInt(userID, 10)
}

// AddReservation adds a reservation to a rebuild: its token's state and
// owner, and its replay-map field.
func (d *RebuildData) AddReservation(token, state string, userID int64, requestID string) {
	if d.Tokens == nil {
		d.Tokens = map[string]string{}
	}
	if d.Requests == nil {
		d.Requests = map[string]string{}
	}
	d.Tokens[token] = TokenValue(state, userID)
	d.Requests[RequestField(userID, requestID)] = token
}

// AddRetired adds to a rebuild a user of an ended reservation whose records
// are not written back: the reserve script asks the database about that
// user's requests it does not know.
func (d *RebuildData) AddRetired(userID int64) {
	if d.Retired == nil {
		d.Retired = map[string]bool{}
	}
	d.Retired[strconv.FormatInt(userID, 10)] = true
}

// RequestID finds the request_id a token was reserved with, from the sale's
// replay map; ok is false when the map has no such token for the user.
// The map's field "t:token" answers it at once (checked against the
// user's field "user:request_id"); a hold written without that field (by
// an older reserve script) is found by scanning the user's fields.
func (c *Client) RequestID(ctx context.Context, saleID, userID int64, token string) (string, bool, error) {
	k := SaleKeys(saleID).Requests
	req, err := c.rdb.HGet(ctx, k, "t:"+token).Result()
	if err == nil {
		owner, err := c.rdb.HGet(ctx, k, RequestField(userID, req)).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return "", false, fmt.Errorf("requests of sale %d for %s: %w", saleID, token, err)
		}
		return req, owner == token, nil
	}
	if !errors.Is(err, redis.Nil) {
		return "", false, fmt.Errorf("requests of sale %d for %s: %w", saleID, token, err)
	}
	return c.scanRequestID(ctx, saleID, userID, token)
}

// scanRequestID is RequestID by HSCAN MATCH of the user's fields.
func (c *Client) scanRequestID(ctx context.Context, saleID, userID int64, token string) (string, bool, error) {
	prefix := strconv.FormatInt(userID, 10) + ":"
	iter := c.rdb.HScan(ctx, SaleKeys(saleID).Requests, 0, prefix+"*", 100).Iterator()
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
