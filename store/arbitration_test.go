package store_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/store"
)

// record records a Redis hold numbered seq in the sale's current epoch.
func record(t *testing.T, st *store.Store, sale *domain.Sale, user int64, req string, seq int64) (domain.OrderInput, store.HoldRecord) {
	t.Helper()
	in := redisHold(sale, user, req)
	rec, err := st.RecordRedisHold(ctx(t), in, sale.ModeEpoch, seq, true)
	require.NoError(t, err)
	return in, rec
}

func sumOf(v []int64) (n int64) {
	for _, x := range v {
		n += x
	}
	return n
}

// The database decides every hold Redis granted, as a Redis that lost
// writes would grant them: a user who holds a unit is refused (409), a hold
// past the sale's units is refused (410), each refusal ends the hold's row
// FAILED with its reason and takes no unit, and a replay gets the first
// answer. A hold that ends gives its unit back, and the user may buy again.
func TestTheDatabaseDecidesEveryHold(t *testing.T) {
	st := testenv.MustStore(t)
	sale := testenv.MustSale(t, st, 3, func(s *domain.Sale) { s.Buckets = 2 })
	base := testenv.UniqueUser() * 1000

	a, rec := record(t, st, sale, base, "first-a", 1)
	require.True(t, rec.Promised())
	for i, u := range []int64{base + 1, base + 2} {
		_, rec := record(t, st, sale, u, fmt.Sprintf("first-%d", i), int64(2+i))
		require.True(t, rec.Promised(), "hold %d", i)
	}
	require.Zero(t, sumOf(bucketsOf(t, st, sale.ID)), "each promised hold took its unit")
	require.Equal(t, 3, ledgerCount(t, st, sale.ID, "deduct"))

	d, rec := record(t, st, sale, base+3, "fourth-d", 4)
	require.False(t, rec.Promised())
	require.Equal(t, domain.ErrSoldOut, rec.Refused, "no unit left: 410")
	again, rec := record(t, st, sale, base, "second-a", 5)
	require.Equal(t, domain.ErrAlreadyHolds, rec.Refused, "a holder asks again: 409, not 410")
	require.Equal(t, &store.LiveHold{Token: a.Token, RequestID: a.RequestID}, rec.Holder, "the reservation the holder holds")
	for in, reason := range map[domain.OrderInput]string{d: domain.FailReasonRefusedSoldOut, again: domain.FailReasonRefusedHolder} {
		r, err := st.GetReservation(ctx(t), in.Token)
		require.NoError(t, err)
		assert.Equal(t, domain.StatusFailed, r.Status)
		assert.Equal(t, reason, r.FailReason)
	}
	require.Equal(t, 3, ledgerCount(t, st, sale.ID, "deduct"), "a refused hold takes no unit")

	// Replays answer what the first record decided.
	rec, err := st.RecordRedisHold(ctx(t), a, sale.ModeEpoch, 0, true)
	require.NoError(t, err)
	assert.True(t, rec.Promised(), "a promised hold's replay")
	rec, err = st.RecordRedisHold(ctx(t), d, sale.ModeEpoch, 0, true)
	require.NoError(t, err)
	assert.Equal(t, domain.ErrSoldOut, rec.Refused, "a refused hold's replay")

	// a cancels while queued: the unit goes back, a may buy again and does.
	_, err = st.EndQueued(ctx(t), a.Token, domain.StatusCancelled, "cancelled")
	require.NoError(t, err)
	require.EqualValues(t, 1, sumOf(bucketsOf(t, st, sale.ID)))
	require.Equal(t, 1, ledgerCount(t, st, sale.ID, "restore"))
	_, rec = record(t, st, sale, base, "third-a", 6)
	require.True(t, rec.Promised(), "the user whose hold ended buys again")
}

// A hold whose unit the record took places its order without taking
// another: the order names the hold's bucket, the ledger has one deduct
// row, and the order's release returns the unit there.
func TestAnOrderOfAHeldUnitTakesNoOther(t *testing.T) {
	st := testenv.MustStore(t)
	sale := testenv.MustSale(t, st, 4, func(s *domain.Sale) { s.Buckets = 2 })
	in, rec := record(t, st, sale, testenv.UniqueUser(), "held-unit", 1)
	require.True(t, rec.Promised())
	before := bucketsOf(t, st, sale.ID)
	require.EqualValues(t, 3, sumOf(before))

	r, err := st.PlaceOrder(ctx(t), in.Token)
	require.NoError(t, err)
	require.Equal(t, domain.StatusPendingPayment, r.Status)
	require.Equal(t, before, bucketsOf(t, st, sale.ID), "no second unit")
	require.Equal(t, 1, ledgerCount(t, st, sale.ID, "deduct"))
	o, l := orderBuckets(t, st, in.Token)
	require.Equal(t, o, l, "the order names the bucket the hold's unit came from")

	snap, err := st.ReadSnapshot(ctx(t), sale.ID)
	require.NoError(t, err)
	require.Zero(t, snap.HeldUnits, "placed: the unit is the order's")
	_, err = st.ReleaseOrder(ctx(t), in.Token, domain.StatusExpired)
	require.NoError(t, err)
	require.EqualValues(t, 4, sumOf(bucketsOf(t, st, sale.ID)))
}

// Redis going back in time (a failover to a replica that lagged, an AOF
// missing its tail) hands out a hold number again: the database notices
// at that very hold, decides it all the same, and marks the sale for a
// rebuild, once, until the worker takes the mark.
func TestARedisThatWentBackIsNoticedAtItsNextHold(t *testing.T) {
	st := testenv.MustStore(t)
	sale := testenv.MustSale(t, st, 5)
	base := testenv.UniqueUser() * 1000
	_, rec := record(t, st, sale, base, "before-loss", 7)
	require.True(t, rec.Promised())
	require.False(t, rec.WentBack)

	in, rec := record(t, st, sale, base+1, "after-loss", 7)
	require.True(t, rec.WentBack, "number 7 again")
	require.True(t, rec.Promised(), "decided all the same: a unit is left and the user holds none")
	snap, err := st.ReadSnapshot(ctx(t), sale.ID)
	require.NoError(t, err)
	require.EqualValues(t, 2, snap.HeldUnits)
	state, err := st.ReadRedisState(ctx(t), sale.ID)
	require.NoError(t, err)
	require.EqualValues(t, 7, state.Seq, "a rebuilt Redis counts on past the highest number")
	require.EqualValues(t, 3, state.Stock, "the held units are out of the buckets")
	_, err = st.GetReservation(ctx(t), in.Token)
	require.NoError(t, err)

	require.NoError(t, st.MarkRedisWentBack(ctx(t), sale.ID))
	require.NoError(t, st.MarkRedisWentBack(ctx(t), sale.ID))
	got, err := st.GetSale(ctx(t), sale.ID)
	require.NoError(t, err)
	require.True(t, got.RedisWentBack)
	took, err := st.TakeRedisWentBack(ctx(t), sale.ID)
	require.NoError(t, err)
	require.True(t, took)
	took, err = st.TakeRedisWentBack(ctx(t), sale.ID)
	require.NoError(t, err)
	require.False(t, took, "taken once")
}

// A Redis back in time hands a number out again to whatever hold comes
// first, and after a failover that is often a holder whose hold it lost,
// asking again or re-sending the first request: the duplicate the
// database names then is the holder's or the replay's, not the number's.
// The database notices all the same, while it refuses the holder and
// answers the replay, so Redis's counter cannot catch up unnoticed.
func TestARedisThatWentBackIsNoticedAtARefusedHoldOrAReplay(t *testing.T) {
	st := testenv.MustStore(t)
	sale := testenv.MustSale(t, st, 5)
	base := testenv.UniqueUser() * 1000
	_, rec := record(t, st, sale, base, "first", 1)
	require.True(t, rec.Promised())
	second, rec := record(t, st, sale, base+1, "second", 2)
	require.True(t, rec.Promised())

	// Redis lost both holds and counts from 0 again.
	_, rec = record(t, st, sale, base, "again", 1)
	require.Equal(t, domain.ErrAlreadyHolds, rec.Refused, "the holder is refused")
	require.True(t, rec.WentBack, "number 1 again, met by a refused holder")
	replay, rec := record(t, st, sale, base+1, "second", 2)
	require.Equal(t, second.Token, replay.Token)
	require.True(t, rec.Promised(), "the replay is answered")
	require.True(t, rec.WentBack, "number 2 again, met by a replay")

	// A refused holder or a replay whose number is new is no sign of it.
	_, rec = record(t, st, sale, base, "again-later", 3)
	require.Equal(t, domain.ErrAlreadyHolds, rec.Refused)
	require.False(t, rec.WentBack)
	_, rec = record(t, st, sale, base+1, "second", 4)
	require.True(t, rec.Promised())
	require.False(t, rec.WentBack)
}

// However a Redis that lost its writes grants units (each user twice, five
// times the stock), the database promises exactly the units, at most one
// per user, and no bucket goes below zero.
func TestTheDatabasePromisesExactlyTheUnitsUnderConcurrency(t *testing.T) {
	st := testenv.MustStore(t)
	const stock, users = 16, 40
	sale := testenv.MustSale(t, st, stock, func(s *domain.Sale) { s.Buckets = 4 })
	base := testenv.UniqueUser() * 1000
	var mu sync.Mutex
	promised := map[int64]int{}
	var wg sync.WaitGroup
	for i := range 2 * users {
		wg.Go(func() {
			user := base + int64(i%users)
			in := redisHold(sale, user, fmt.Sprintf("crowd-%04d", i))
			for {
				rec, err := st.RecordRedisHold(ctx(t), in, sale.ModeEpoch, int64(i+1), true)
				if err != nil && store.IsRetryable(err) {
					continue
				}
				if !assert.NoError(t, err) {
					return
				}
				if rec.Promised() {
					mu.Lock()
					promised[user]++
					mu.Unlock()
				} else {
					assert.NotNil(t, rec.Refused, "decided, not left unknown")
				}
				return
			}
		})
	}
	wg.Wait()
	total := 0
	for user, n := range promised {
		assert.Equal(t, 1, n, "user %d", user)
		total += n
	}
	require.Equal(t, stock, total)
	require.Zero(t, sumOf(bucketsOf(t, st, sale.ID)))
	require.Equal(t, stock, ledgerCount(t, st, sale.ID, "deduct"))
}

// While a worker of a release that cannot place such holds' orders runs
// (a rolling deploy), a hold is recorded without its unit, as that release
// did: the user's rule holds all the same, and its order takes the unit.
// The fleet's view counts such workers from the hold record each process
// publishes.
func TestAHoldRecordedForAnOlderWorkerTakesItsUnitAtItsOrder(t *testing.T) {
	st := testenv.MustStore(t)
	sale := testenv.MustSale(t, st, 3)
	user := testenv.UniqueUser()
	in := redisHold(sale, user, "old-worker-1")
	rec, err := st.RecordRedisHold(ctx(t), in, sale.ModeEpoch, 0, false)
	require.NoError(t, err)
	require.True(t, rec.Promised())
	require.EqualValues(t, 3, sumOf(bucketsOf(t, st, sale.ID)), "no unit taken yet")
	rec, err = st.RecordRedisHold(ctx(t), redisHold(sale, user, "old-worker-2"), sale.ModeEpoch, 0, false)
	require.NoError(t, err)
	require.Equal(t, domain.ErrAlreadyHolds, rec.Refused, "one live hold per user, whatever the record's form")
	_, err = st.PlaceOrder(ctx(t), in.Token)
	require.NoError(t, err)
	require.EqualValues(t, 2, sumOf(bucketsOf(t, st, sale.ID)), "the order took it")

	name := fmt.Sprintf("worker/old-release-%d", user)
	_, err = st.DB.ExecContext(ctx(t), "INSERT INTO redis_observers (observer, role, redis_up, seen_at, hold_version) VALUES (?, 'worker', TRUE, NOW(3), 0)", name)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = st.DB.ExecContext(ctx(t), "DELETE FROM redis_observers WHERE observer = ?", name) })
	v, err := st.RedisFleetView(ctx(t), time.Minute)
	require.NoError(t, err)
	require.Positive(t, v.OldWorkers)
	require.NoError(t, st.PublishRedisView(ctx(t), name, "worker", true))
	v, err = st.RedisFleetView(ctx(t), time.Minute)
	require.NoError(t, err)
	require.Zero(t, v.OldWorkers, "the worker of this release publishes its hold record")
}

// New holds that arrive together are recorded in groups (one transaction
// of one round trip for many), each decided as it would be alone: holders
// asking twice are refused, a number Redis handed out before is Redis back
// in time, holds past the units are refused, and exactly the units are
// promised.
func TestNewHoldsAreRecordedInGroupsEachDecidedOnItsOwn(t *testing.T) {
	st := testenv.MustStore(t)
	const stock, users = 40, 60
	sale := testenv.MustSale(t, st, stock, func(s *domain.Sale) { s.Buckets = 4 })
	base := testenv.UniqueUser() * 1000
	groups0, grouped0 := st.HoldGroupsSent()
	type result struct {
		user int64
		rec  store.HoldRecord
	}
	results := make(chan result, users+10)
	start := make(chan struct{})
	var wg sync.WaitGroup
	hold := func(user int64, req string, seq int64) {
		wg.Go(func() {
			<-start
			in := redisHold(sale, user, req)
			rec, err := st.RecordRedisHold(ctx(t), in, sale.ModeEpoch, seq, true)
			if assert.NoError(t, err) {
				results <- result{user, rec}
			}
		})
	}
	for i := range users {
		hold(base+int64(i), fmt.Sprintf("new-%03d", i), int64(i+1))
	}
	for i := range 5 { // holders again, with a number Redis also handed out before
		hold(base+int64(i), fmt.Sprintf("again-%03d", i), int64(i+1))
	}
	close(start)
	wg.Wait()
	close(results)

	promised := map[int64]int{}
	var refusedHolder, refusedSoldOut, wentBack int
	for r := range results {
		switch {
		case r.rec.Promised():
			promised[r.user]++
		case r.rec.Refused == domain.ErrAlreadyHolds:
			refusedHolder++
		case r.rec.Refused == domain.ErrSoldOut:
			refusedSoldOut++
		default:
			t.Errorf("user %d: undecided %+v", r.user, r.rec)
		}
		if r.rec.WentBack {
			wentBack++
		}
	}
	require.Len(t, promised, stock, "exactly the units promised")
	for user, n := range promised {
		require.Equal(t, 1, n, "user %d promised twice", user)
	}
	require.Equal(t, users+5-stock, refusedHolder+refusedSoldOut)
	require.GreaterOrEqual(t, wentBack, 1, "a number handed out twice is Redis back in time")
	require.Zero(t, sumOf(bucketsOf(t, st, sale.ID)))
	require.Equal(t, stock, ledgerCount(t, st, sale.ID, "deduct"))
	groups, grouped := st.HoldGroupsSent()
	groups, grouped = groups-groups0, grouped-grouped0
	t.Logf("%d holds in %d groups", grouped, groups)
	require.Less(t, groups, grouped/2, "holds arriving together went in groups")
}

// Every hold record's round trip that the database answers moves the
// progress a waiting caller judges the database by: when one last
// answered, and how long one takes.
func TestHoldRecordsReportTheirProgress(t *testing.T) {
	st := testenv.MustStore(t)
	sale := testenv.MustSale(t, st, 3)
	base := testenv.UniqueUser() * 1000
	began := time.Now()
	record(t, st, sale, base, "progress-1", 1)
	last, trip := st.HoldProgress()
	require.False(t, last.Before(began), "a new hold's group answered")
	require.Positive(t, trip)
	require.Less(t, trip, 10*time.Second)

	replayed := time.Now()
	record(t, st, sale, base, "progress-1", 0)
	last, _ = st.HoldProgress()
	require.False(t, last.Before(replayed), "a replay's read answered")
}

// A crowd's new holds go in groups of which a shard sends two at once, so
// one sale's records use two of the database's threads; each sale's parts
// take their buckets in ascending order, so two groups in flight never
// wait on each other's bucket locks in a cycle: with units in every
// bucket, every part commits in its group (a deadlock would roll a whole
// group back to its callers' own paths).
func TestHoldGroupsOverlapTakingBucketsInOrder(t *testing.T) {
	st := testenv.MustStore(t)
	const stock, holds, workers = 64_000, 2_000, 64
	sale := testenv.MustSale(t, st, stock, func(s *domain.Sale) { s.Buckets = 16 })
	base := testenv.UniqueUser() * 10_000
	_, undecided0 := st.HoldGroupsOverlap()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := next.Add(1); i <= holds; i = next.Add(1) {
				rec, err := st.RecordRedisHold(ctx(t), redisHold(sale, base+i, fmt.Sprintf("overlap-%05d", i)), sale.ModeEpoch, i, true)
				if !assert.NoError(t, err) || !assert.True(t, rec.Promised(), "hold %d: %+v", i, rec) {
					return
				}
			}
		})
	}
	wg.Wait()
	peak, undecided := st.HoldGroupsOverlap()
	require.EqualValues(t, 2, peak, "a shard sent two groups at once")
	require.Zero(t, undecided-undecided0, "every part committed in its group")
	require.EqualValues(t, stock-holds, sumOf(bucketsOf(t, st, sale.ID)))
	require.Equal(t, holds, ledgerCount(t, st, sale.ID, "deduct"))
}

// The statements a new hold's record runs in MariaDB, counted on the
// store's one connection by its session's counters of each kind (which
// count the statements inside a compound statement and a trigger's): one
// round trip (Questions), the hold inserted from the sale row with the
// bucket it picked, the token's key (the trigger), the ledger row, the
// unit taken and the group's answer; no read of the row back for its
// bucket.
func TestAHoldsRecordRunsItsStatementsOnce(t *testing.T) {
	st := testenv.MustStore(t)
	st.DB.SetMaxOpenConns(1)
	sale := testenv.MustSale(t, st, 100, func(s *domain.Sale) { s.Buckets = 4 })
	base := testenv.UniqueUser() * 1000
	record(t, st, sale, base, "count-0", 1) // the connection's first use
	kinds := []string{"Questions", "Com_insert_select", "Com_insert", "Com_update", "Com_set_option", "Com_select"}
	before := sessionCounters(t, st, kinds)
	_, rec := record(t, st, sale, base+1, "count-1", 2)
	require.True(t, rec.Promised())
	after := sessionCounters(t, st, kinds)
	got := map[string]int64{}
	for _, k := range kinds {
		got[k] = after[k] - before[k]
	}
	got["Questions"]-- // the second reading counts itself
	require.Equal(t, map[string]int64{"Questions": 1, "Com_insert_select": 1, "Com_insert": 2, "Com_update": 1, "Com_set_option": 0, "Com_select": 1}, got)
}

// sessionCounters reads the session's status counters named, on the
// store's one connection.
func sessionCounters(tb testing.TB, st *store.Store, names []string) map[string]int64 {
	tb.Helper()
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := st.DB.QueryContext(c, "SHOW SESSION STATUS WHERE Variable_name IN (?)", bun.List(names))
	require.NoError(tb, err)
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var name string
		var n int64
		require.NoError(tb, rows.Scan(&name, &n))
		out[name] = n
	}
	require.NoError(tb, rows.Err())
	require.Len(tb, out, len(names))
	return out
}

// A grouped hold takes its unit from the bucket its insert picked, and its
// ledger row names that bucket: after a crowd's holds in groups, each
// bucket gave up exactly the units of the holds naming it (unit_bucket),
// and every hold's ledger row names its hold's bucket.
func TestGroupedHoldsTakeTheBucketTheirInsertPicked(t *testing.T) {
	st := testenv.MustStore(t)
	const holds, workers = 240, 24
	sale := testenv.MustSale(t, st, 8_000, func(s *domain.Sale) { s.Buckets = 8 })
	base := testenv.UniqueUser() * 10_000
	before := bucketsOf(t, st, sale.ID)
	groups0, _ := st.HoldGroupsSent()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := next.Add(1); i <= holds; i = next.Add(1) {
				rec, err := st.RecordRedisHold(ctx(t), redisHold(sale, base+i, fmt.Sprintf("picked-%d", i)), sale.ModeEpoch, i, true)
				if !assert.NoError(t, err) || !assert.True(t, rec.Promised(), "hold %d: %+v", i, rec) {
					return
				}
			}
		})
	}
	wg.Wait()
	groups, _ := st.HoldGroupsSent()
	require.Less(t, groups-groups0, int64(holds), "holds went in groups")
	var named []struct {
		Bucket int   `bun:"unit_bucket"`
		Holds  int64 `bun:"holds"`
	}
	require.NoError(t, st.DB.NewRaw("SELECT unit_bucket, COUNT(*) AS holds FROM reservations WHERE sale_id = ? GROUP BY unit_bucket", sale.ID).Scan(ctx(t), &named))
	after := bucketsOf(t, st, sale.ID)
	taken := make([]int64, len(before))
	for _, n := range named {
		require.True(t, n.Bucket >= 0 && n.Bucket < len(before), "a hold names bucket %d", n.Bucket)
		taken[n.Bucket] = n.Holds
	}
	for b := range before {
		require.Equal(t, before[b]-after[b], taken[b], "bucket %d gave up its holds' units", b)
	}
	var astray int
	require.NoError(t, st.DB.QueryRowContext(ctx(t), `SELECT COUNT(*) FROM reservations r
		LEFT JOIN stock_ledger l ON l.token = r.token AND l.operation = 'deduct' AND l.bucket_no = r.unit_bucket
		WHERE r.sale_id = ? AND l.token IS NULL`, sale.ID).Scan(&astray))
	require.Zero(t, astray, "every hold's ledger row names its bucket")
}
