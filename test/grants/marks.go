package grants

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/redisgateway"
)

// Marks is Redis's copy of a sale's grants on one node: its buyer marks
// (a member per user holding a unit) and its count of holds.
type Marks struct {
	Buyers   map[string]struct{}
	Reserved int64
}

// ReadMarks reads a sale's marks on one node.
func ReadMarks(ctx context.Context, rdb redis.Cmdable, saleID int64) (Marks, error) {
	k := redisgateway.SaleKeys(saleID)
	buyers, err := rdb.SMembersMap(ctx, k.Buyers).Result()
	if err != nil {
		return Marks{}, err
	}
	reserved, err := rdb.Get(ctx, k.Reserved).Int64()
	if err != nil {
		return Marks{}, err
	}
	return Marks{Buyers: buyers, Reserved: reserved}, nil
}

// Lost are the users whose buyer marks m has and kept lacks (the holds a
// failover to kept loses), sorted.
func (m Marks) Lost(kept Marks) ([]int64, error) {
	var out []int64
	for member := range m.Buyers {
		if _, ok := kept.Buyers[member]; ok {
			continue
		}
		u, err := strconv.ParseInt(member, 10, 64)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	slices.Sort(out)
	return out, nil
}

// WaitMarked waits until a node (a replica) has the sale's buyer mark of
// each of the users.
func WaitMarked(t require.TestingT, rdb redis.Cmdable, saleID int64, users []int64) {
	key := redisgateway.SaleKeys(saleID).Buyers
	members := make([]any, len(users))
	for i, u := range users {
		members[i] = u
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		in, err := rdb.SMIsMember(ctx, key, members...).Result()
		if assert.NoError(c, err) {
			assert.NotContains(c, in, false, "the replica has every buyer mark")
		}
	}, 30*time.Second, 50*time.Millisecond)
}
