package lua

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
	// taken by a reserve script that does not index): the database
	// answers then.
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
	k := SaleKeys(saleID)
	v, err := mineReadScript.Run(ctx, rdb, []string{k.Meta, k.Reserved, k.Mine, k.Tokens, k.Status},
		strconv.FormatInt(userID, 10)).StringSlice()
	if err != nil {
		return UserReservations{}, fmt.Errorf("user index read script: %w", err)
	}
	if len(v) == 0 || (len(v)-1)%3 != 0 {
		return UserReservations{}, fmt.Errorf("user index read script: unexpected reply %v", v)
	}
	out := UserReservations{Complete: v[0] == "1"}
	for i := 1; i < len(v); i += 3 {
		read, err := parseStatusRead(v[i+1], v[i+2])
		if err != nil {
			return UserReservations{}, fmt.Errorf("user index read script: %w", err)
		}
		t := UserToken{Token: v[i], StatusRead: read}
		out.Tokens = append(out.Tokens, t)
	}
	return out, nil
}
