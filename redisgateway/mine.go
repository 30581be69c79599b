package redisgateway

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed mine_read.lua
	mineReadSrc    string
	mineReadScript = redis.NewScript(mineReadSrc)
)

// UserReservations is what Redis knows of one user's reservations of a
// sale (the user index reserve.lua keeps, see mine_read.lua).
type UserReservations struct {
	// Complete is false when the index may miss a reservation of the user
	// (not started by warm-up, a new epoch since, database mode, a hold
	// taken by a reserve script that does not index, the user took more
	// than MineCap holds): the database answers then.
	Complete bool
	// Tokens are the user's reservations, oldest first, each with what
	// ReadStatus would read of it.
	Tokens []UserToken
}

// UserToken is one token of a user index with its status read.
type UserToken struct {
	Token string
	StatusRead
}

// ReadUserReservations reads a user's reservations of a sale from the user
// index, with each token's hold state and status record, in one script.
func (s *Scripts) ReadUserReservations(ctx context.Context, rdb redis.Scripter, saleID, userID int64) (UserReservations, error) {
	out, err := s.ReadUsersReservations(ctx, rdb, saleID, []int64{userID})
	if err != nil {
		return UserReservations{}, err
	}
	return out[0], nil
}

// ReadUsersReservations is ReadUserReservations for several users of one
// sale, in one script: the answers in order.
func (s *Scripts) ReadUsersReservations(ctx context.Context, rdb redis.Scripter, saleID int64, userIDs []int64) ([]UserReservations, error) {
	k := SaleKeys(saleID)
	args := make([]any, len(userIDs))
	for i, u := range userIDs {
		args[i] = strconv.FormatInt(u, 10)
	}
	v, err := mineReadScript.Run(ctx, rdb, []string{k.Meta, k.Reserved, k.Mine, k.Tokens, k.Status, k.Retired}, args...).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("user index read script: %w", err)
	}
	if len(v) == 0 {
		return nil, fmt.Errorf("user index read script: empty reply")
	}
	out := make([]UserReservations, len(userIDs))
	if v[0] != "1" {
		return out, nil // incomplete: Complete false for every user
	}
	at := 1
	for u := range out {
		out[u].Complete = true
		if at >= len(v) {
			return nil, fmt.Errorf("user index read script: reply ends before user %d", userIDs[u])
		}
		n, err := strconv.Atoi(v[at])
		if err != nil || n < -1 || at+1+3*n > len(v) {
			return nil, fmt.Errorf("user index read script: bad count %q for user %d", v[at], userIDs[u])
		}
		at++
		if n < 0 {
			out[u].Complete = false // past MineCap: not listed
			continue
		}
		for range n {
			read, err := parseStatusRead(v[at+1], v[at+2])
			if err != nil {
				return nil, fmt.Errorf("user index read script: %w", err)
			}
			out[u].Tokens = append(out[u].Tokens, UserToken{Token: v[at], StatusRead: read})
			at += 3
		}
	}
	if at != len(v) {
		return nil, fmt.Errorf("user index read script: %d values left over", len(v)-at)
	}
	return out, nil
}
