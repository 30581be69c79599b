package lua

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

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

// RequestID finds the request_id a token was reserved with, from the sale's
// replay map (field "user:request_id", value the token); ok is false when
// the map has no such token for the user. It scans the user's fields only,
// with HSCAN MATCH, so it is for repairs and rare paths, not the hot path.
func (c *Client) RequestID(ctx context.Context, saleID, userID int64, token string) (string, bool, error) {
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
