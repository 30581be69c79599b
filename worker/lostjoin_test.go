package worker

import (
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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
	f := newWaitlistFixture(t)
	st, rdb, rc, sale, k, r := f.st, f.rdb, f.rc, f.sale, f.k, f.r
	early, late := testenv.UniqueUser(), testenv.UniqueUser()
	earlyJoined := f.join(early, true)
	r.Once(testCtx(t)) // the first look: nothing lost yet

	// Redis restarts without the join and nothing else; then the late
	// user joins on the restarted Redis.
	require.NoError(t, rdb.ZRem(testCtx(t), k.Waitlist, early).Err())
	lateJoined := f.join(late, true)
	require.Greater(t, lateJoined, earlyJoined)
	f.restarted()

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
	f := newWaitlistFixture(t)
	st, rdb, rc, sale, k, r := f.st, f.rdb, f.rc, f.sale, f.k, f.r
	early, late := testenv.UniqueUser(), testenv.UniqueUser()
	f.join(early, true)
	r.Once(testCtx(t))

	_, err := st.SwitchToDatabase(testCtx(t), sale.ID, 0)
	require.NoError(t, err)
	epoch, err := st.BeginResync(testCtx(t), sale.ID)
	require.NoError(t, err)
	require.NoError(t, rdb.ZRem(testCtx(t), k.Waitlist, early).Err())
	f.join(late, true)
	f.restarted()
	r.Once(testCtx(t)) // the sale is mid-resync: not checked yet
	require.Zero(t, mustPosition(t, rc, sale.ID, early))

	require.NoError(t, st.FinishResync(testCtx(t), sale.ID, epoch))
	r.Once(testCtx(t))
	require.EqualValues(t, 1, mustPosition(t, rc, sale.ID, early), "the lost join is back ahead of the later one")
	require.EqualValues(t, 2, mustPosition(t, rc, sale.ID, late))
}

// waitlistFixture is a warmed sale of one unit, sold out as reserve.lua
// marks a sale that ran out, and a resyncer that has had its first look
// at this Redis.
type waitlistFixture struct {
	t    *testing.T
	st   *store.Store
	rdb  redis.UniversalClient
	rc   *redisgateway.Client
	sale *domain.Sale
	k    redisgateway.Keys
	r    *Resyncer
}

func newWaitlistFixture(t *testing.T) *waitlistFixture {
	_, st := MustIsolatedStore(t)
	rdb := testenv.MustRedis(t)
	sale := testenv.MustSale(t, st, 1)
	testsale.MustWarm(t, st, rdb, sale)
	f := &waitlistFixture{t: t, st: st, rdb: rdb, rc: redisgateway.NewClient(rdb), sale: sale, k: redisgateway.SaleKeys(sale.ID)}
	require.NoError(t, rdb.Set(testCtx(t), f.k.Stock, 0, 0).Err())
	require.NoError(t, rdb.HSet(testCtx(t), f.k.Meta, "drained", "1").Err())
	f.r = &Resyncer{Store: st, Redis: f.rc, Comeback: comeback(st, time.Hour, time.Minute), Logger: slog.Default()}
	return f
}

// join puts user on the waitlist as the API does (Redis, then the
// database's record unless record is false: a join on its way) and
// answers the join number.
func (f *waitlistFixture) join(user int64, record bool) int64 {
	_, joined, err := f.rc.JoinWaitlist(testCtx(f.t), f.sale.ID, user)
	require.NoError(f.t, err)
	if record {
		require.NoError(f.t, testsale.ErrOf(f.st.RecordWaitlistJoin(testCtx(f.t), f.sale.ID, store.WaitJoin{UserID: user, Joined: joined})))
	}
	return joined
}

// restarted makes the resyncer's next look see a Redis that restarted.
func (f *waitlistFixture) restarted() { f.r.identity = "the Redis before the restart" }

func mustPosition(t *testing.T, rc *redisgateway.Client, saleID, user int64) int64 {
	t.Helper()
	pos, err := rc.WaitlistPosition(testCtx(t), saleID, user)
	require.NoError(t, err)
	return pos
}
