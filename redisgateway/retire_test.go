package redisgateway_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/redisgateway"
)

// TestRetireMovesEndedRecordsOut: a user cycling reserve → release leaves a
// token state, two replay fields and a status record per hold; once the
// database has ended them they retire: the keys hold the live holds only,
// the user is retired and read from the database, a replay of an ended
// request is referred to the database, and a request the database does not
// have reserves. A repeated release of a retired token, which finds no
// token state, keeps the buyer mark of the user's new hold (the user index
// still lists it). A retire again changes nothing.
func TestRetireMovesEndedRecordsOut(t *testing.T) {
	const cycles = redisgateway.MineCap - 4 // the user index lists each hold (a user past the cap is '*')
	f := mustWarmSale(t, 2)
	c := ctx(t)
	rc := redisgateway.NewClient(f.rdb)
	var ended []redisgateway.RetiredRecord
	for i := range cycles {
		req := fmt.Sprintf("churn-%04d", i)
		r := f.reserve(t, 7, req)
		require.Equal(t, redisgateway.OutcomeOK, r.Outcome)
		_, err := f.scripts.WriteStatus(c, f.rdb, f.saleID, r.Token, redisgateway.StatusRecord{Seq: 4, UserID: 7, Status: "CANCELLED"})
		require.NoError(t, err)
		released, err := f.scripts.Release(c, f.rdb, f.saleID, 7, r.Token, true, false)
		require.NoError(t, err)
		require.True(t, released)
		ended = append(ended, redisgateway.RetiredRecord{Token: r.Token, UserID: 7, RequestID: req})
	}
	live := f.reserve(t, 8, "live-0001")
	require.Equal(t, redisgateway.OutcomeOK, live.Outcome)
	require.EqualValues(t, cycles+1, f.rdb.HLen(c, f.keys.Tokens).Val())

	before := time.Now().Add(time.Second)
	toks, err := rc.EndedTokens(c, f.saleID, before, 1000)
	require.NoError(t, err)
	require.Len(t, toks, cycles, "every released token is listed, the live one not")
	n, err := rc.Retire(c, f.saleID, time.Now().Add(-time.Hour), ended, nil)
	require.NoError(t, err)
	require.Zero(t, n, "none was released before the cutoff")
	n, err = rc.Retire(c, f.saleID, before, ended, nil)
	require.NoError(t, err)
	require.Equal(t, cycles, n)

	require.Equal(t, map[string]string{live.Token: "held:8"}, f.rdb.HGetAll(c, f.keys.Tokens).Val())
	require.EqualValues(t, 2, f.rdb.HLen(c, f.keys.Requests).Val(), "the live hold's two replay fields")
	require.Zero(t, f.rdb.HLen(c, f.keys.Status).Val())
	require.Zero(t, f.rdb.ZCard(c, f.keys.Ended).Val())
	require.Equal(t, []string{"7"}, f.rdb.SMembers(c, f.keys.Retired).Val())
	require.False(t, f.rdb.HExists(c, f.keys.Mine, "7").Val(), "the user index lists none of the retired tokens")
	seven, err := f.scripts.ReadUserReservations(c, f.rdb, f.saleID, 7)
	require.NoError(t, err)
	require.False(t, seven.Complete, "the database lists a retired user's reservations")

	require.Equal(t, redisgateway.OutcomeAsk, f.reserve(t, 7, "churn-0003").Outcome, "an ended request: the database answers its replay")
	require.Equal(t, redisgateway.OutcomeAsk, f.reserve(t, 7, "fresh-0001").Outcome)
	require.Equal(t, redisgateway.OutcomeReplay, f.reserve(t, 8, "live-0001").Outcome, "a live hold replays from Redis")
	fresh, err := f.scripts.Reserve(c, f.rdb, redisgateway.ReserveArgs{
		SaleID: f.saleID, UserID: 7, RequestID: "fresh-0001", Epoch: 1, NotInDatabase: true,
		Token: domain.DeriveToken([]byte("k"), f.saleID, 7, "fresh-0001"),
	})
	require.NoError(t, err)
	require.Equal(t, redisgateway.OutcomeOK, fresh.Outcome, "told the database has none, the request reserves")
	require.Equal(t, redisgateway.OutcomeReplay, f.reserve(t, 7, "fresh-0001").Outcome, "and replays from Redis again")

	again, err := f.scripts.Release(c, f.rdb, f.saleID, 7, ended[0].Token, true, false)
	require.NoError(t, err)
	require.False(t, again)
	require.True(t, f.rdb.SIsMember(c, f.keys.Buyers, "7").Val(), "a repeated release keeps the mark of the user's unrecorded hold")

	n, err = rc.Retire(c, f.saleID, before, ended, nil)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the repeated release put its token in the ended set again (it may write a status record again), the others are gone")
	require.EqualValues(t, 2, f.rdb.HLen(c, f.keys.Tokens).Val())
	require.Zero(t, f.rdb.ZCard(c, f.keys.Ended).Val())
	n, err = rc.Retire(c, f.saleID, before, ended, nil)
	require.NoError(t, err)
	require.Zero(t, n, "retiring again changes nothing")
}

// TestRetireLeavesLiveTokens: a token the caller says ended but Redis
// holds live keeps its records (a repair's business) and leaves the ended
// set, as does one the caller found live or unknown in the database.
func TestRetireLeavesLiveTokens(t *testing.T) {
	f := mustWarmSale(t, 3)
	c := ctx(t)
	rc := redisgateway.NewClient(f.rdb)
	a := f.reserve(t, 1, "first-0001")
	b := f.reserve(t, 2, "second-001")
	for _, tok := range []string{a.Token, b.Token} {
		require.NoError(t, f.rdb.ZAdd(c, f.keys.Ended, redisZ(tok)).Err())
	}
	before := time.Now().Add(time.Second)
	n, err := rc.Retire(c, f.saleID, before, []redisgateway.RetiredRecord{{Token: a.Token, UserID: 1, RequestID: "first-0001"}}, []string{b.Token})
	require.NoError(t, err)
	require.Zero(t, n)
	require.EqualValues(t, 2, f.rdb.HLen(c, f.keys.Tokens).Val())
	require.EqualValues(t, 4, f.rdb.HLen(c, f.keys.Requests).Val())
	require.Zero(t, f.rdb.ZCard(c, f.keys.Ended).Val())
	require.Zero(t, f.rdb.SCard(c, f.keys.Retired).Val())
}

// TestSoldOutPictureKnowsRetiredUsers: the sold-out mark cannot answer a
// retired user's request it does not know (it may be an old one).
func TestSoldOutPictureKnowsRetiredUsers(t *testing.T) {
	f := mustWarmSale(t, 1)
	c := ctx(t)
	require.Equal(t, redisgateway.OutcomeOK, f.reserve(t, 1, "first-0001").Outcome)
	require.NoError(t, f.rdb.SAdd(c, f.keys.Retired, "5").Err())
	m, err := redisgateway.NewClient(f.rdb).ReadSoldOut(c, f.saleID)
	require.NoError(t, err)
	require.NotNil(t, m)
	require.Contains(t, m.Retired, int64(5))
	require.NotContains(t, m.Retired, int64(1))
	require.Contains(t, m.Buyers, int64(1))
}

func redisZ(member string) redis.Z {
	return redis.Z{Score: float64(time.Now().UnixMilli() - 1000), Member: member}
}
