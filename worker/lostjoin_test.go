package worker

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/store"
	"github.com/seckill/seckill/test/testsale"
)

// A waitlist join answered 200 (in Redis and in the database) that a Redis
// restart loses (an AOF missing its last second) is found at the
// resyncer's look at the new Redis even when a join made on the restarted
// Redis already carries a higher number than the lost one (join numbers
// are Redis's clock, so the highest number hides the loss): the lost join
// is back with its own number, and the hand-over serves it first.
func TestResyncerRestoresAJoinLostBehindALaterOne(t *testing.T) {
	_, st := MustIsolatedStore(t)
	rdb := testenv.MustRedis(t)
	rc := redisgateway.NewClient(rdb)
	sale := testenv.MustSale(t, st, 1)
	testsale.MustWarm(t, st, rdb, sale)
	k := redisgateway.SaleKeys(sale.ID)

	// Sold out (as reserve.lua marks a sale that ran out), the early user
	// joins, as the API does.
	require.NoError(t, rdb.Set(testCtx(t), k.Stock, 0, 0).Err())
	require.NoError(t, rdb.HSet(testCtx(t), k.Meta, "drained", "1").Err())
	early, late := testenv.UniqueUser(), testenv.UniqueUser()
	_, earlyJoined, err := rc.JoinWaitlist(testCtx(t), sale.ID, early)
	require.NoError(t, err)
	require.NoError(t, testsale.ErrOf(st.RecordWaitlistJoin(testCtx(t), sale.ID, store.WaitJoin{UserID: early, Joined: earlyJoined})))

	r := &Resyncer{Store: st, Redis: rc, Comeback: comeback(st, time.Hour, time.Minute), Logger: slog.Default()}
	r.Once(testCtx(t)) // the first look: nothing lost yet

	// Redis restarts without the join and nothing else; then the late
	// user joins on the restarted Redis.
	require.NoError(t, rdb.ZRem(testCtx(t), k.Waitlist, early).Err())
	_, lateJoined, err := rc.JoinWaitlist(testCtx(t), sale.ID, late)
	require.NoError(t, err)
	require.Greater(t, lateJoined, earlyJoined)
	require.NoError(t, testsale.ErrOf(st.RecordWaitlistJoin(testCtx(t), sale.ID, store.WaitJoin{UserID: late, Joined: lateJoined})))
	r.identity = "the Redis before the restart"

	r.Once(testCtx(t))
	joined, err := rc.WaitlistJoined(testCtx(t), sale.ID, early)
	require.NoError(t, err)
	require.Equal(t, earlyJoined, joined, "the lost join is back with its own number")
	pos, err := rc.WaitlistPosition(testCtx(t), sale.ID, early)
	require.NoError(t, err)
	require.EqualValues(t, 1, pos, "ahead of the later join")

	// A unit comes free: the hand-over serves the early user first.
	require.NoError(t, rdb.Set(testCtx(t), k.Stock, 1, 0).Err())
	got, err := st.GetSale(testCtx(t), sale.ID)
	require.NoError(t, err)
	require.Equal(t, domain.ModeRedis, got.Mode)
	head, err := rc.WaitlistHead(testCtx(t), sale.ID, 10)
	require.NoError(t, err)
	cands := make([]redisgateway.HandOverCandidate, len(head))
	for i, w := range head {
		req := domain.WaitlistRequestID(w.Joined)
		cands[i] = redisgateway.HandOverCandidate{UserID: w.UserID, RequestID: req, Token: domain.DeriveToken([]byte("k"), sale.ID, w.UserID, req)}
	}
	handed, _, err := rc.HandOver(testCtx(t), sale.ID, got.ModeEpoch, cands)
	require.NoError(t, err)
	require.Len(t, handed, 1)
	require.Equal(t, early, handed[0].UserID, "the earliest join is served first")
	require.Equal(t, domain.WaitlistRequestID(earlyJoined), handed[0].RequestID)
}

// A sale that is being rebuilt when the resyncer sees a new Redis (here:
// in resync mode) is checked for lost joins once it is back on Redis, not
// passed over for good.
func TestResyncerChecksASaleBackFromARebuildForLostJoins(t *testing.T) {
	_, st := MustIsolatedStore(t)
	rdb := testenv.MustRedis(t)
	rc := redisgateway.NewClient(rdb)
	sale := testenv.MustSale(t, st, 1)
	testsale.MustWarm(t, st, rdb, sale)
	k := redisgateway.SaleKeys(sale.ID)
	early, late := testenv.UniqueUser(), testenv.UniqueUser()
	_, earlyJoined, err := rc.JoinWaitlist(testCtx(t), sale.ID, early)
	require.NoError(t, err)
	require.NoError(t, testsale.ErrOf(st.RecordWaitlistJoin(testCtx(t), sale.ID, store.WaitJoin{UserID: early, Joined: earlyJoined})))
	r := &Resyncer{Store: st, Redis: rc, Comeback: comeback(st, time.Hour, time.Minute), Logger: slog.Default()}
	r.Once(testCtx(t))

	_, err = st.SwitchToDatabase(testCtx(t), sale.ID, 0)
	require.NoError(t, err)
	epoch, err := st.BeginResync(testCtx(t), sale.ID)
	require.NoError(t, err)
	require.NoError(t, rdb.ZRem(testCtx(t), k.Waitlist, early).Err())
	_, lateJoined, err := rc.JoinWaitlist(testCtx(t), sale.ID, late)
	require.NoError(t, err)
	require.NoError(t, testsale.ErrOf(st.RecordWaitlistJoin(testCtx(t), sale.ID, store.WaitJoin{UserID: late, Joined: lateJoined})))
	r.identity = "the Redis before the restart"
	r.Once(testCtx(t)) // the sale is mid-resync: not checked yet
	require.Zero(t, mustPosition(t, rc, sale.ID, early))

	require.NoError(t, st.FinishResync(testCtx(t), sale.ID, epoch))
	r.Once(testCtx(t))
	require.EqualValues(t, 1, mustPosition(t, rc, sale.ID, early), "the lost join is back ahead of the later one")
	require.EqualValues(t, 2, mustPosition(t, rc, sale.ID, late))
}

func mustPosition(t *testing.T, rc *redisgateway.Client, saleID, user int64) int64 {
	t.Helper()
	pos, err := rc.WaitlistPosition(testCtx(t), saleID, user)
	require.NoError(t, err)
	return pos
}
