package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/store"
)

// Database-path reservations that arrive together, once one of the sale
// succeeded, go in groups, each decided on its own: a crowd of new users
// takes a unit each while a replay gets the first answer and a second
// request of a buyer and a user with a QUEUED hold are refused as already
// purchased; then a crowd larger than what is left takes exactly the rest
// of the quota, and the others are refused.
func TestDatabasePathReservationsGoInGroupsEachDecidedOnItsOwn(t *testing.T) {
	st := testenv.MustStore(t)
	const quota, crowd, last = 30, 24, 10
	sale := testenv.MustSale(t, st, 100, func(s *domain.Sale) { s.Buckets = 4 })
	base := testenv.UniqueUser() * 1000
	queued := mustQueued(t, st, sale, base+999, "queued")
	require.NoError(t, st.RecordRedisStock(ctx(t), sale.ID, quota, time.Now()))
	_, err := st.SwitchToDatabase(ctx(t), sale.ID, 0)
	require.NoError(t, err)
	dispatchedAtEnd(t, st, sale.ID)
	first := dbInput(sale, base, "first")
	firstRes, _, err := st.ReserveInDB(ctx(t), first) // opens the quota; the sale's next reservations go in groups
	require.NoError(t, err)
	groups0, grouped0 := st.DBGroupsSent()

	ins := []domain.OrderInput{first, dbInput(sale, base, "first-again"), dbInput(sale, queued.UserID, "queued-db-path")}
	for i := 1; i <= crowd; i++ {
		ins = append(ins, dbInput(sale, base+int64(i), fmt.Sprintf("new-%03d", i)))
	}
	for _, a := range reserveTogether(t, st, ins) {
		switch a.in.RequestID {
		case "first":
			require.NoError(t, a.err)
			require.True(t, a.replay, "the replay gets the first answer")
			require.Equal(t, firstRes.Token, a.res.Token)
		case "first-again", "queued-db-path":
			require.ErrorIs(t, a.err, domain.ErrAlreadyHolds, a.in.RequestID)
		default:
			require.NoError(t, a.err, a.in.RequestID)
			require.False(t, a.replay)
			require.Equal(t, domain.StatusPendingPayment, a.res.Status)
			require.Equal(t, sale.PriceCents, a.res.AmountCents)
			got, err := st.GetReservation(ctx(t), a.in.Token)
			require.NoError(t, err)
			require.Equal(t, a.res.OrderNo, got.OrderNo, "the answer is the reservation recorded")
		}
	}
	groups, grouped := st.DBGroupsSent()
	groups, grouped = groups-groups0, grouped-grouped0
	t.Logf("%d reservations in %d groups", grouped, groups)
	require.GreaterOrEqual(t, grouped, int64(len(ins)), "every reservation was tried in a group")
	require.Less(t, groups, grouped/2, "reservations arriving together went in groups")

	ins = ins[:0]
	for i := 1; i <= last; i++ {
		ins = append(ins, dbInput(sale, base+int64(crowd+i), fmt.Sprintf("last-%03d", i)))
	}
	var sold, soldOut int
	for _, a := range reserveTogether(t, st, ins) {
		switch {
		case a.err == nil:
			sold++
		case errors.Is(a.err, store.ErrQuotaExhausted), errors.Is(a.err, domain.ErrSoldOut):
			soldOut++
		default:
			t.Errorf("%s: %v", a.in.RequestID, a.err)
		}
	}
	require.Equal(t, quota-1-crowd, sold, "the rest of the quota sells, no more")
	require.Equal(t, last-sold, soldOut)
	left, err := st.DBStock(ctx(t), sale.ID)
	require.NoError(t, err)
	require.EqualValues(t, 100-1-quota, left, "the QUEUED hold's unit and the quota's")
	require.Equal(t, 1+quota, ledgerCount(t, st, sale.ID, "deduct"))
}

// dbAnswer is a database-path reservation's answer.
type dbAnswer struct {
	in     domain.OrderInput
	res    *domain.Reservation
	replay bool
	err    error
}

// reserveTogether makes the reservations at once, each from a goroutine of
// its own, and returns their answers.
func reserveTogether(t *testing.T, st *store.Store, ins []domain.OrderInput) []dbAnswer {
	answers := make([]dbAnswer, len(ins))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, in := range ins {
		wg.Go(func() {
			<-start
			res, replay, err := st.ReserveInDB(ctx(t), in)
			answers[i] = dbAnswer{in, res, replay, err}
		})
	}
	close(start)
	wg.Wait()
	return answers
}

// A grouped reservation meets every check of the per-reservation path: the
// operator's pause and stop, the window, a price changed since the sale's
// terms were kept, and a mode epoch moved on (a resync begun, and one
// aborted back to the database path) each get the per-reservation path's
// answer, and nothing is sold meanwhile.
func TestDatabasePathGroupsCheckTheSaleAsItIsNow(t *testing.T) {
	st := testenv.MustStore(t)
	sale := mustDatabaseSale(t, st, 10, 4)
	_, _, err := st.ReserveInDB(ctx(t), dbInput(sale, testenv.UniqueUser(), "terms")) // keeps the sale's terms
	require.NoError(t, err)
	set := func(q string) {
		t.Helper()
		_, err := st.DB.ExecContext(ctx(t), "UPDATE sales SET "+q+" WHERE id = ?", sale.ID)
		require.NoError(t, err)
	}
	for _, c := range []struct {
		set, undo string
		want      func(error) bool
	}{
		{"control = 'paused'", "control = 'active'", isCode(domain.ESalePaused)},
		{"control = 'stopped'", "control = 'active'", isCode(domain.ESaleEnded)},
		{"ends_at = NOW(3) - INTERVAL 1 SECOND", "ends_at = NOW(3) + INTERVAL 1 HOUR", isCode(domain.ESaleEnded)},
		{"starts_at = NOW(3) + INTERVAL 1 MINUTE", "starts_at = NOW(3) - INTERVAL 1 MINUTE", isCode(domain.ESaleNotStarted)},
		{"mode = 'resync', mode_epoch = mode_epoch + 1", "", isErr(domain.ErrSaleResyncing)},
	} {
		set(c.set)
		groups0, _ := st.DBGroupsSent()
		_, _, err := st.ReserveInDB(ctx(t), dbInput(sale, testenv.UniqueUser(), "check"))
		require.True(t, c.want(err), "after %s: %v", c.set, err)
		groups, _ := st.DBGroupsSent()
		require.Equal(t, groups0+1, groups, "after %s: tried in a group first", c.set)
		if c.undo != "" {
			set(c.undo)
		}
	}
	left, err := st.DBStock(ctx(t), sale.ID)
	require.NoError(t, err)
	require.EqualValues(t, 9, left, "nothing sold meanwhile")

	// Back on the database path in a new epoch, at a new price: the first
	// reservation's group part does not match the kept terms; the
	// per-reservation path sells at the price of now and keeps the new
	// terms, and the next reservation's group sells at it too.
	set("mode = 'database', mode_epoch = mode_epoch + 1, price_cents = price_cents + 100")
	for i := range 2 {
		groups0, grouped0 := st.DBGroupsSent()
		res, _, err := st.ReserveInDB(ctx(t), dbInput(sale, testenv.UniqueUser(), fmt.Sprintf("new-terms-%d", i)))
		require.NoError(t, err)
		require.Equal(t, sale.PriceCents+100, res.AmountCents)
		groups, grouped := st.DBGroupsSent()
		require.Equal(t, []int64{groups0 + 1, grouped0 + 1}, []int64{groups, grouped}, "tried in a group first")
	}
	left, err = st.DBStock(ctx(t), sale.ID)
	require.NoError(t, err)
	require.EqualValues(t, 7, left)
}

func isCode(code string) func(error) bool {
	return func(err error) bool { return domain.ErrorCode(err) == code }
}

func isErr(target error) func(error) bool {
	return func(err error) bool { return errors.Is(err, target) }
}

// The statements a database-path reservation sends, counted by MariaDB on
// the store's one connection (its session's Questions, which count a
// compound statement once): two for a reservation on its own (the read and
// the script), one for a lone grouped reservation, and one for each group
// of reservations that arrive together.
func TestDatabasePathStatementsPerReservation(t *testing.T) {
	st := testenv.MustStore(t)
	st.DB.SetMaxOpenConns(1)
	sale := mustDatabaseSale(t, st, 200, 4)
	base := testenv.UniqueUser() * 1000
	user := base
	reserve := func(alone bool) {
		t.Helper()
		user++
		in := dbInput(sale, user, fmt.Sprintf("count-%d", user))
		var err error
		if alone {
			_, _, err = st.ReserveInDBAlone(ctx(t), in)
		} else {
			_, _, err = st.ReserveInDB(ctx(t), in)
		}
		require.NoError(t, err)
	}
	reserve(true) // opens the quota and keeps the terms
	statements := func(run func()) int64 {
		t.Helper()
		before := questions(t, st)
		run()
		return questions(t, st) - before - 1 // the second SHOW counts itself
	}
	require.EqualValues(t, 20, statements(func() {
		for range 10 {
			reserve(true)
		}
	}), "two round trips each on their own")
	require.EqualValues(t, 10, statements(func() {
		for range 10 {
			reserve(false)
		}
	}), "one each in a group of one")

	groups0, grouped0 := st.DBGroupsSent()
	n := statements(func() {
		var wg sync.WaitGroup
		for range 32 {
			user++
			in := dbInput(sale, user, fmt.Sprintf("count-%d", user))
			wg.Go(func() {
				_, _, err := st.ReserveInDB(ctx(t), in)
				require.NoError(t, err)
			})
		}
		wg.Wait()
	})
	groups, grouped := st.DBGroupsSent()
	require.EqualValues(t, 32, grouped-grouped0)
	require.Equal(t, groups-groups0, n, "one statement a group")
	t.Logf("32 reservations arriving together: %d statements", n)
	require.Less(t, n, int64(16))
}

// questions is the session's count of statements received, on the store's
// one connection.
func questions(tb testing.TB, st *store.Store) int64 {
	tb.Helper()
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var name string
	var n int64
	require.NoError(tb, st.DB.QueryRowContext(c, "SHOW SESSION STATUS LIKE 'Questions'").Scan(&name, &n))
	return n
}

// The parts of a group that reserve in one sale share one pick of a
// bucket: reservations arriving together take their units from no more
// buckets than there were groups, and each order and its ledger row name
// the bucket its unit came from.
func TestDatabasePathGroupSharesItsPickOfABucket(t *testing.T) {
	st := testenv.MustStore(t)
	sale := mustDatabaseSale(t, st, 1000, 16)
	base := testenv.UniqueUser() * 1000
	_, _, err := st.ReserveInDB(ctx(t), dbInput(sale, base, "share-0")) // keeps the sale's terms
	require.NoError(t, err)
	var ins []domain.OrderInput
	for i := 1; i <= 48; i++ {
		ins = append(ins, dbInput(sale, base+int64(i), fmt.Sprintf("share-%d", i)))
	}
	groups0, _ := st.DBGroupsSent()
	buckets := map[int]bool{}
	for _, a := range reserveTogether(t, st, ins) {
		require.NoError(t, a.err, a.in.RequestID)
		o, l := orderBuckets(t, st, a.in.Token)
		require.Equal(t, o, l, "the order and its ledger row name one bucket")
		buckets[o] = true
	}
	groups, _ := st.DBGroupsSent()
	t.Logf("48 reservations in %d groups, from %d buckets", groups-groups0, len(buckets))
	require.LessOrEqual(t, int64(len(buckets)), groups-groups0)
	require.EqualValues(t, 1000-49, sumOf(bucketsOf(t, st, sale.ID)))
}

// A group that the database stalls does not hold up the reservations that
// arrive meanwhile in its shard: once it has been out longer than its
// kind's round trips take, the next group goes beside it. Here sale A's
// group waits on A's row, locked by another transaction, and a
// reservation of sale B (same shard) commits in a group of its own while
// A's still waits; A's commits once the row is free.
func TestDatabasePathGroupGoesBesideAStalledOne(t *testing.T) {
	st := testenv.MustStore(t)
	a := mustDatabaseSale(t, st, 100, 4)
	b := mustDatabaseSale(t, st, 100, 4)
	for b.ID%8 != a.ID%8 { // the groups' shards: the sale id modulo 8
		b = mustDatabaseSale(t, st, 100, 4)
	}
	base := testenv.UniqueUser() * 1000
	for _, in := range []domain.OrderInput{dbInput(a, base, "beside-a0"), dbInput(b, base+1, "beside-b0")} {
		_, _, err := st.ReserveInDB(ctx(t), in) // keeps the sale's terms
		require.NoError(t, err)
	}

	lock, err := st.DB.BeginTx(ctx(t), nil)
	require.NoError(t, err)
	defer func() { _ = lock.Rollback() }()
	_, err = lock.ExecContext(ctx(t), "SELECT id FROM sales WHERE id = ? FOR UPDATE", a.ID)
	require.NoError(t, err)
	stalled := make(chan error, 1)
	go func() {
		_, _, err := st.ReserveInDB(ctx(t), dbInput(a, base+2, "beside-a1"))
		stalled <- err
	}()
	time.Sleep(time.Second) // A's group is in flight, waiting on A's row

	groups0, _ := st.DBGroupsSent()
	c, cancel := context.WithTimeout(ctx(t), 5*time.Second)
	defer cancel()
	res, _, err := st.ReserveInDB(c, dbInput(b, base+3, "beside-b1"))
	require.NoError(t, err, "B's reservation went beside A's stalled group")
	require.Equal(t, domain.StatusPendingPayment, res.Status)
	groups, _ := st.DBGroupsSent()
	require.EqualValues(t, 1, groups-groups0, "B's group answered while A's waits")
	peak, _ := st.DBGroupsOverlap()
	require.EqualValues(t, 2, peak, "the shard had two groups in flight")
	select {
	case err := <-stalled:
		t.Fatalf("A's reservation answered while its row was locked: %v", err)
	default:
	}

	require.NoError(t, lock.Rollback())
	require.NoError(t, <-stalled, "A's group commits once the row is free")
	require.EqualValues(t, 100-2, sumOf(bucketsOf(t, st, a.ID)))
	require.EqualValues(t, 100-2, sumOf(bucketsOf(t, st, b.ID)))
}

// A crowd of two sales' database-path reservations in one shard go in
// groups of which the shard sends two at once; each group takes one
// bucket a sale, the sales in ascending order, so two groups in flight
// never wait on each other's locks in a cycle: every reservation commits,
// none twice, and the buckets give up exactly the units sold.
func TestDatabasePathGroupsOverlapWithoutDeadlock(t *testing.T) {
	st := testenv.MustStore(t)
	const stock, each = 10_000, 300
	a := mustDatabaseSale(t, st, stock, 16)
	b := mustDatabaseSale(t, st, stock, 16)
	for b.ID%8 != a.ID%8 {
		b = mustDatabaseSale(t, st, stock, 16)
	}
	base := testenv.UniqueUser() * 10_000
	var ins []domain.OrderInput
	for i := range each {
		ins = append(ins, dbInput(a, base+int64(i), fmt.Sprintf("crowd-a%d", i)), dbInput(b, base+int64(i), fmt.Sprintf("crowd-b%d", i)))
	}
	for _, in := range ins[:2] {
		_, _, err := st.ReserveInDB(ctx(t), in) // keeps the sale's terms
		require.NoError(t, err)
	}
	var next atomic.Int64
	next.Store(2)
	var wg sync.WaitGroup
	for range 48 {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(ins)); i = next.Add(1) - 1 {
				_, _, err := st.ReserveInDB(ctx(t), ins[i])
				if !assert.NoError(t, err, ins[i].RequestID) {
					return
				}
			}
		})
	}
	wg.Wait()
	peak, undecided := st.DBGroupsOverlap()
	require.EqualValues(t, 2, peak, "a shard sent two groups at once")
	require.Zero(t, undecided, "every part committed in its group")
	require.EqualValues(t, stock-each, sumOf(bucketsOf(t, st, a.ID)))
	require.EqualValues(t, stock-each, sumOf(bucketsOf(t, st, b.ID)))
}
