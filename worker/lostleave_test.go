package worker

import (
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/store"
	"github.com/seckill/seckill/test/testsale"
)

// A waitlist leave answered 200 (off Redis, then off the database) that a
// Redis restart loses puts the user back on Redis's waitlist, where a
// hand-over would give them a unit they gave up and ahead of those who
// still wait. The resyncer's look at the new Redis finds the waiter the
// database no longer keeps and, once a join on its way to its record
// would have recorded, takes them off; a join whose record was on its
// way at the look stays, and so does a user who joined again.
func TestResyncerTakesOffAWaiterWhoseLeaveRedisLost(t *testing.T) {
	f := newWaitlistFixture(t)
	st, rdb, rc, sale, k, r, join := f.st, f.rdb, f.rc, f.sale, f.k, f.r, f.join
	leaver, rejoiner, inFlight, stayer := testenv.UniqueUser(), testenv.UniqueUser(), testenv.UniqueUser(), testenv.UniqueUser()
	stayerJoined := join(stayer, true)
	leaverJoined := join(leaver, true)
	rejoinerFirst := join(rejoiner, true)
	r.Once(testCtx(t)) // the first look: nothing lost yet

	// Both leave, as the API does: Redis first, then the database. The
	// restarted Redis lost both leaves (back under their old numbers); a
	// join is answered by Redis and not yet recorded when the resyncer
	// looks.
	leave := func(user int64) {
		require.NoError(t, rc.LeaveWaitlist(testCtx(t), sale.ID, user))
		require.NoError(t, st.ForgetWaitlistJoin(testCtx(t), sale.ID, user, 0))
	}
	leave(leaver)
	leave(rejoiner)
	require.NoError(t, rdb.ZAdd(testCtx(t), k.Waitlist,
		redis.Z{Score: float64(leaverJoined), Member: strconv.FormatInt(leaver, 10)},
		redis.Z{Score: float64(rejoinerFirst), Member: strconv.FormatInt(rejoiner, 10)}).Err())
	inFlightJoined := join(inFlight, false)
	f.restarted()

	r.Once(testCtx(t))
	require.NotZero(t, mustPosition(t, rc, sale.ID, leaver), "nothing is taken off before a join on its way could record")
	require.NoError(t, testsale.ErrOf(st.RecordWaitlistJoin(testCtx(t), sale.ID, store.WaitJoin{UserID: inFlight, Joined: inFlightJoined})))
	// Meanwhile the re-joiner, back on the waitlist, leaves and joins again.
	leave(rejoiner)
	rejoinerAgain := join(rejoiner, true)
	require.NotEqual(t, rejoinerFirst, rejoinerAgain)

	r.dropLostLeaves(testCtx(t), time.Now().Add(leaveGrace))
	require.Zero(t, mustPosition(t, rc, sale.ID, leaver), "the lost leave is taken off")
	for user, joined := range map[int64]int64{stayer: stayerJoined, rejoiner: rejoinerAgain, inFlight: inFlightJoined} {
		got, err := rc.WaitlistJoined(testCtx(t), sale.ID, user)
		require.NoError(t, err)
		require.Equal(t, joined, got, "user %d keeps their place", user)
	}
	require.EqualValues(t, 1, mustPosition(t, rc, sale.ID, stayer))
	require.Empty(t, r.leaveSuspects, "the sale's suspects are settled")
}
