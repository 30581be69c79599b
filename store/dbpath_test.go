package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/store"
)

func dbInput(sale *domain.Sale, user int64, req string) domain.OrderInput {
	return domain.OrderInput{
		Token: domain.DeriveToken([]byte("test-key"), sale.ID, user, req), SaleID: sale.ID,
		UserID: user, RequestID: req, Path: domain.PathDatabase, Deducted: true,
	}
}

func TestDatabasePathRefusedOutsideDatabaseMode(t *testing.T) {
	st := testenv.MustStore(t)
	sale := testenv.MustSale(t, st, 5)
	_, _, err := st.ReserveInDB(ctx(t), dbInput(sale, testenv.UniqueUser(), "dbpath-0001"))
	require.ErrorIs(t, err, domain.ErrSaleResyncing)
}

// The invariant of the two paths: units sold by both together never exceed
// the stock. The database path sells at most what Redis had unsold when
// last seen, so the holds Redis already promised keep their units.
func TestDatabasePathSellsOnlyWhatRedisHadUnsold(t *testing.T) {
	st := testenv.MustStore(t)
	const stock = 10
	sale := testenv.MustSale(t, st, stock)
	base := testenv.UniqueUser() * 1000

	// Redis took 4 holds; 2 of them are already orders, 2 are in flight.
	var holds []domain.OrderInput
	for i := 0; i < 4; i++ {
		holds = append(holds, mustQueued(t, st, sale, base+int64(i), fmt.Sprintf("redis-%04d", i)))
	}
	for _, in := range holds[:2] {
		_, err := st.PlaceOrder(ctx(t), in.Token)
		require.NoError(t, err)
	}
	require.NoError(t, st.RecordRedisStock(ctx(t), sale.ID, stock-4, time.Now()))

	switched, err := st.SwitchToDatabase(ctx(t), sale.ID, 0)
	require.NoError(t, err)
	require.Equal(t, domain.ModeDatabase, switched.Mode)
	require.EqualValues(t, 2, switched.ModeEpoch)
	again, err := st.SwitchToDatabase(ctx(t), sale.ID, 0)
	require.NoError(t, err)
	require.EqualValues(t, 2, again.ModeEpoch, "switching twice is one switch")

	// 30 buyers race for the 6 units Redis had unsold.
	sold, refused := raceDatabasePath(t, st, sale, base+100, 30)
	require.Equal(t, 6, sold)
	require.Equal(t, 24, refused)

	// The two holds in flight still find their units.
	for _, in := range holds[2:] {
		r, err := st.PlaceOrder(ctx(t), in.Token)
		require.NoError(t, err)
		require.Equal(t, domain.StatusPendingPayment, r.Status)
	}
	left, err := st.DBStock(ctx(t), sale.ID)
	require.NoError(t, err)
	require.Zero(t, left)
	counts, err := st.CountReservations(ctx(t), sale.ID)
	require.NoError(t, err)
	require.EqualValues(t, stock, counts[domain.StatusPendingPayment], "exactly the stock sold by both paths")

	var n int
	require.NoError(t, st.DB.QueryRowContext(ctx(t), "SELECT COUNT(*) FROM outbox WHERE sale_id = ? AND dispatched_at IS NULL", sale.ID).Scan(&n))
	require.Equal(t, 6, n, "every database-path reservation has an outbox row")

	// Marked in one statement, the entries named and no other.
	var tokens []string
	require.NoError(t, st.DB.NewRaw("SELECT token FROM outbox WHERE sale_id = ? ORDER BY id", sale.ID).Scan(ctx(t), &tokens))
	require.NoError(t, st.MarkDispatched(ctx(t), tokens[:4]...))
	require.NoError(t, st.MarkDispatched(ctx(t)))
	var unmarked []string
	require.NoError(t, st.DB.NewRaw("SELECT token FROM outbox WHERE sale_id = ? AND dispatched_at IS NULL ORDER BY id", sale.ID).Scan(ctx(t), &unmarked))
	require.Equal(t, tokens[4:], unmarked)
}

// raceDatabasePath has n users (from first on) reserve on the database
// path at once, retrying what is retryable, and counts the sold and the
// refused.
func raceDatabasePath(t *testing.T, st *store.Store, sale *domain.Sale, first int64, n int) (sold, refused int) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := dbInput(sale, first+int64(i), fmt.Sprintf("dbpath-%04d", i))
			for {
				_, replay, err := st.ReserveInDB(ctx(t), in)
				if err != nil && store.IsRetryable(err) {
					continue
				}
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					require.False(t, replay)
					sold++
				case errors.Is(err, store.ErrQuotaExhausted), errors.Is(err, domain.ErrSoldOut):
					refused++
				default:
					t.Errorf("reserve in db: %v", err)
				}
				return
			}
		}()
	}
	wg.Wait()
	return sold, refused
}

func TestDatabasePathReplayAndOneLiveOrder(t *testing.T) {
	st := testenv.MustStore(t)
	sale := mustDatabaseSale(t, st, 5, 4)
	user := testenv.UniqueUser()

	first, replay, err := st.ReserveInDB(ctx(t), dbInput(sale, user, "dbpath-a"))
	require.NoError(t, err)
	require.False(t, replay)
	second, replay, err := st.ReserveInDB(ctx(t), dbInput(sale, user, "dbpath-a"))
	require.NoError(t, err)
	require.True(t, replay)
	require.Equal(t, first.Token, second.Token)
	_, _, err = st.ReserveInDB(ctx(t), dbInput(sale, user, "dbpath-b"))
	require.ErrorIs(t, err, domain.ErrAlreadyHolds)

	// A release in database mode gives the unit back to the path's quota.
	_, err = st.ReleaseOrder(ctx(t), first.Token, domain.StatusCancelled)
	require.NoError(t, err)
	got, err := st.GetSale(ctx(t), sale.ID)
	require.NoError(t, err)
	require.Equal(t, domain.ModeDatabase, got.Mode)
	_, _, err = st.ReserveInDB(ctx(t), dbInput(sale, user, "dbpath-c"))
	require.NoError(t, err)
	left, err := st.DBStock(ctx(t), sale.ID)
	require.NoError(t, err)
	require.EqualValues(t, 4, left)
}

// A user whose Redis hold is recorded QUEUED but not placed yet (no order,
// so the orders' one-live-order key does not see it) gets 409 from the
// database path, not a second unit; once the hold has ended the user may
// buy. Before, the database path sold the second unit and the hold ended
// FAILED already_purchased (chaos seed 3).
func TestDatabasePathRefusesAUserWithAQueuedHold(t *testing.T) {
	st := testenv.MustStore(t)
	sale := testenv.MustSale(t, st, 5)
	user := testenv.UniqueUser()
	hold := domain.RedisHoldInput(domain.DeriveToken([]byte("k"), sale.ID, user, "redis-hold"), sale.ID, user, "redis-hold")
	_, err := st.RecordReservation(ctx(t), hold)
	require.NoError(t, err)
	require.NoError(t, st.RecordRedisStock(ctx(t), sale.ID, 4, time.Now()))
	_, err = st.SwitchToDatabase(ctx(t), sale.ID, 0)
	require.NoError(t, err)

	_, _, err = st.ReserveInDB(ctx(t), dbInput(sale, user, "dbpath-q"))
	require.ErrorIs(t, err, domain.ErrAlreadyHolds)
	_, _, err = st.ReserveInDB(ctx(t), dbInput(sale, testenv.UniqueUser(), "dbpath-q"))
	require.NoError(t, err, "another user buys")

	_, err = st.EndQueued(ctx(t), hold.Token, domain.StatusCancelled, "user")
	require.NoError(t, err)
	_, _, err = st.ReserveInDB(ctx(t), dbInput(sale, user, "dbpath-q"))
	require.NoError(t, err, "the hold ended: its user may buy")
}

func TestResyncRebuildsRedisFromTheDatabase(t *testing.T) {
	st := testenv.MustStore(t)
	rdb := testenv.MustRedis(t)
	scripts := redisgateway.New()
	sale := testenv.MustSale(t, st, 6)
	keys := redisgateway.SaleKeys(sale.ID)
	t.Cleanup(func() { rdb.Del(ctx(t), keys.All()...) })
	base := testenv.UniqueUser() * 1000

	queued := mustQueued(t, st, sale, base+1, "resync-01")
	ordered := mustQueued(t, st, sale, base+2, "resync-02")
	_, err := st.PlaceOrder(ctx(t), ordered.Token)
	require.NoError(t, err)
	require.NoError(t, st.RecordRedisStock(ctx(t), sale.ID, 4, time.Now()))
	_, err = st.SwitchToDatabase(ctx(t), sale.ID, 0)
	require.NoError(t, err)
	viaDB, _, err := st.ReserveInDB(ctx(t), dbInput(sale, base+3, "resync-03"))
	require.NoError(t, err)

	epoch, err := st.BeginResync(ctx(t), sale.ID)
	require.NoError(t, err)
	_, err = st.BeginResync(ctx(t), sale.ID)
	require.ErrorIs(t, err, domain.ErrSaleResyncing, "one instance resynchronises")
	_, _, err = st.ReserveInDB(ctx(t), dbInput(sale, base+4, "resync-04"))
	require.ErrorIs(t, err, domain.ErrSaleResyncing, "the database path stops during the resync")

	state, err := st.ReadRedisState(ctx(t), sale.ID)
	require.NoError(t, err)
	require.EqualValues(t, 3, state.Stock, "6 - 2 ordered - 1 hold in flight")
	var buyers []string
	for _, b := range state.Buyers {
		buyers = append(buyers, fmt.Sprint(b))
	}
	d := redisgateway.RebuildData{Stock: state.Stock, Epoch: epoch, Buyers: buyers}
	for _, tok := range state.Tokens {
		d.AddReservation(tok.Token, tok.State, tok.UserID, tok.RequestID)
	}
	got, err := scripts.Rebuild(ctx(t), rdb, sale.ID, d)
	require.NoError(t, err)
	require.EqualValues(t, 3, got)
	require.NoError(t, st.FinishResync(ctx(t), sale.ID, epoch))

	require.Equal(t, "held:"+fmt.Sprint(base+1), rdb.HGet(ctx(t), keys.Tokens, queued.Token).Val())
	require.Equal(t, "ordered:"+fmt.Sprint(base+3), rdb.HGet(ctx(t), keys.Tokens, viaDB.Token).Val())
	require.EqualValues(t, 3, rdb.SCard(ctx(t), keys.Buyers).Val())
	require.Equal(t, viaDB.Token, rdb.HGet(ctx(t), keys.Requests, fmt.Sprintf("%d:resync-03", base+3)).Val())
	require.Equal(t, "resync-03", rdb.HGet(ctx(t), keys.Requests, "t:"+viaDB.Token).Val(), "a cancel finds the request by its token")
	mode := rdb.HMGet(ctx(t), keys.Meta, "mode", "epoch").Val()
	require.Equal(t, []any{"redis", fmt.Sprint(epoch)}, mode)
	sale2, err := st.GetSale(ctx(t), sale.ID)
	require.NoError(t, err)
	require.Equal(t, domain.ModeRedis, sale2.Mode)
}

// After a switch the database path sells nothing until its hold-off has
// passed (Redis holds sent before the switch may still land), and then at
// most what a fresh Redis stock sample had unsold minus every Redis hold
// recorded since the sample, and no more than the buckets net of holds
// without an order. Before, the quota was LEAST(sample of any age, buckets).
func TestDatabasePathQuotaWaitsOutRedisHoldsAndCountsThem(t *testing.T) {
	st := testenv.MustStore(t)
	const stock = 10
	sale := testenv.MustSale(t, st, stock)
	base := testenv.UniqueUser() * 1000
	require.NoError(t, st.RecordRedisStock(ctx(t), sale.ID, stock, time.Now()))
	// Three holds land after the sample; one has its order already.
	var holds []domain.OrderInput
	for i := range 3 {
		holds = append(holds, mustQueued(t, st, sale, base+int64(i), fmt.Sprintf("after-sample-%d", i)))
	}
	_, err := st.PlaceOrder(ctx(t), holds[0].Token)
	require.NoError(t, err)

	const holdOff = 600 * time.Millisecond
	_, err = st.SwitchToDatabase(ctx(t), sale.ID, holdOff)
	require.NoError(t, err)
	_, _, err = st.ReserveInDB(ctx(t), dbInput(sale, base+100, "too-early"))
	require.ErrorIs(t, err, domain.ErrSaleMoving)
	time.Sleep(holdOff)

	sold := 0
	for i := range stock {
		_, _, err := st.ReserveInDB(ctx(t), dbInput(sale, base+200+int64(i), fmt.Sprintf("dbpath-%d", i)))
		if errors.Is(err, store.ErrQuotaExhausted) {
			break
		}
		require.NoError(t, err)
		sold++
	}
	require.Equal(t, stock-3, sold, "the sample's 10 minus the 3 holds recorded since")
	left, err := st.DBStock(ctx(t), sale.ID)
	require.NoError(t, err)
	require.EqualValues(t, 0, left, "the two holds without an order took their units when recorded")
}

// A Redis stock sample much older than the switch says nothing about the
// holds since: the database path sells nothing, and the units wait for the
// resync.
func TestDatabasePathSellsNothingFromAStaleSample(t *testing.T) {
	st := testenv.MustStore(t)
	sale := testenv.MustSale(t, st, 5)
	require.NoError(t, st.RecordRedisStock(ctx(t), sale.ID, 5, time.Now()))
	_, err := st.DB.ExecContext(ctx(t), "UPDATE sales SET redis_stock_seen_at = ? WHERE id = ?",
		time.Now().UTC().Add(-time.Minute), sale.ID)
	require.NoError(t, err)
	_, err = st.SwitchToDatabase(ctx(t), sale.ID, 0)
	require.NoError(t, err)
	_, _, err = st.ReserveInDB(ctx(t), dbInput(sale, testenv.UniqueUser(), "stale-sample"))
	require.ErrorIs(t, err, store.ErrQuotaExhausted)
	left, err := st.DBStock(ctx(t), sale.ID)
	require.NoError(t, err)
	require.EqualValues(t, 5, left)
}

// The database path judges the window and the pause on the sale as it is
// now, not on the API's cached copy: a pause or a stop takes effect at once.
func TestDatabasePathChecksTheSaleAsItIsNow(t *testing.T) {
	st := testenv.MustStore(t)
	sale := mustDatabaseSale(t, st, 5, 4)
	for _, c := range []struct {
		set, code string
	}{
		{"control = 'paused'", domain.ESalePaused},
		{"control = 'stopped'", domain.ESaleEnded},
		{"control = 'active', ends_at = NOW(3) - INTERVAL 1 SECOND", domain.ESaleEnded},
		{"starts_at = NOW(3) + INTERVAL 1 MINUTE, ends_at = NOW(3) + INTERVAL 1 HOUR", domain.ESaleNotStarted},
	} {
		_, err := st.DB.ExecContext(ctx(t), "UPDATE sales SET "+c.set+" WHERE id = ?", sale.ID)
		require.NoError(t, err)
		_, _, err = st.ReserveInDB(ctx(t), dbInput(sale, testenv.UniqueUser(), "window-check"))
		require.Equal(t, c.code, domain.ErrorCode(err), "after %s: %v", c.set, err)
	}
	left, err := st.DBStock(ctx(t), sale.ID)
	require.NoError(t, err)
	require.EqualValues(t, 5, left, "nothing sold")
}

// A database-path reservation takes its unit from the bucket its read saw
// with one, in one script. When that bucket ran out meanwhile, the script
// rolls back whole and the reservation takes the unit from another bucket,
// which its order and ledger rows then name.
func TestDatabasePathFromABucketThatRanOutTakesAnother(t *testing.T) {
	st := testenv.MustStore(t)
	sale := mustDatabaseSale(t, st, 2, 2)
	base := testenv.UniqueUser() * 1000

	first := dbInput(sale, base, "ran-out-1")
	_, _, err := st.ReserveInDBWanting(ctx(t), first, 0)
	require.NoError(t, err)
	o, l := orderBuckets(t, st, first.Token)
	require.Equal(t, []int{0, 0}, []int{o, l})

	// Bucket 0 is empty now: a read that saw it with a unit is stale.
	second := dbInput(sale, base+1, "ran-out-2")
	r, replay, err := st.ReserveInDBWanting(ctx(t), second, 0)
	require.NoError(t, err)
	require.False(t, replay)
	require.Equal(t, domain.StatusPendingPayment, r.Status)
	o, l = orderBuckets(t, st, second.Token)
	require.Equal(t, []int{1, 1}, []int{o, l}, "the order and its ledger row name the bucket the unit came from")
	require.Equal(t, []int64{0, 0}, bucketsOf(t, st, sale.ID))
	require.Equal(t, 2, ledgerCount(t, st, sale.ID, "deduct"), "one ledger row each: the stale attempt left none")
	var outbox int
	require.NoError(t, st.DB.QueryRowContext(ctx(t), "SELECT COUNT(*) FROM outbox WHERE sale_id = ?", sale.ID).Scan(&outbox))
	require.Equal(t, 2, outbox)

	_, _, err = st.ReserveInDB(ctx(t), dbInput(sale, base+2, "ran-out-3"))
	require.ErrorIs(t, err, store.ErrQuotaExhausted)
}

// A bucket another transaction holds and does not commit holds up a
// database-path reservation that picked it for about a second, not
// InnoDB's lock wait timeout (50 s): the reservation then takes its unit
// from another bucket.
func TestDatabasePathDoesNotWaitLongForAStalledBucket(t *testing.T) {
	st := testenv.MustStore(t)
	sale := mustDatabaseSale(t, st, 4, 2)
	base := testenv.UniqueUser() * 1000
	_, _, err := st.ReserveInDBWanting(ctx(t), dbInput(sale, base, "stalled-0"), 1) // opens the quota
	require.NoError(t, err)
	require.Equal(t, []int64{2, 1}, bucketsOf(t, st, sale.ID))

	release := holdBucket(t, st, sale.ID, 0)
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	in := dbInput(sale, base+1, "stalled-1")
	_, _, err = st.ReserveInDBWanting(c, in, 0)
	require.NoError(t, err, "not the caller's deadline: the wait for bucket 0 is bounded")
	o, l := orderBuckets(t, st, in.Token)
	require.Equal(t, []int{1, 1}, []int{o, l})
	release()
	require.Equal(t, []int64{2, 0}, bucketsOf(t, st, sale.ID))
}

// mustDatabaseSale is a sale of stock units in buckets that Redis last saw
// with all of them unsold, moved to database mode; its outbox entries are
// marked dispatched at the test's end (dispatchedAtEnd).
func mustDatabaseSale(tb testing.TB, st *store.Store, stock int64, buckets int) *domain.Sale {
	tb.Helper()
	sale := testenv.MustSale(tb, st, stock, func(s *domain.Sale) { s.Buckets = buckets })
	require.NoError(tb, st.RecordRedisStock(ctx(tb), sale.ID, stock, time.Now()))
	_, err := st.SwitchToDatabase(ctx(tb), sale.ID, 0)
	require.NoError(tb, err)
	dispatchedAtEnd(tb, st, sale.ID)
	return sale
}

// dispatchedAtEnd marks the sale's outbox entries dispatched when the test
// ends: nobody relays this package's outbox, and other tests'
// PendingOutbox pages must not fill with them.
func dispatchedAtEnd(tb testing.TB, st *store.Store, saleID int64) {
	tb.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := st.DB.ExecContext(c, "UPDATE outbox SET dispatched_at = NOW(3) WHERE sale_id = ?", saleID)
		require.NoError(tb, err)
	})
}
