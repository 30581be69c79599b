package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/store"
)

func ctx(tb testing.TB) context.Context {
	tb.Helper()
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	tb.Cleanup(cancel)
	return c
}

// mustQueued records a QUEUED reservation for a fresh user.
func mustQueued(tb testing.TB, st *store.Store, sale *domain.Sale, userID int64, requestID string) domain.OrderInput {
	tb.Helper()
	in := domain.OrderInput{
		Token:     domain.DeriveToken([]byte("test-key"), sale.ID, userID, requestID),
		SaleID:    sale.ID,
		UserID:    userID,
		RequestID: requestID,
		Path:      domain.PathRedis,
	}
	r, err := st.RecordReservation(ctx(tb), in)
	require.NoError(tb, err)
	require.Equal(tb, domain.StatusQueued, r.Status)
	return in
}

// mustLegacyQueued records a QUEUED reservation without a unit
// (testenv.MustLegacyHold), which its order takes.
func mustLegacyQueued(tb testing.TB, st *store.Store, sale *domain.Sale, userID int64, requestID string) domain.OrderInput {
	tb.Helper()
	in := domain.RedisHoldInput(domain.DeriveToken([]byte("test-key"), sale.ID, userID, requestID), sale.ID, userID, requestID)
	testenv.MustLegacyHold(tb, st, in)
	return in
}

func ledgerCount(tb testing.TB, st *store.Store, saleID int64, op string) int {
	tb.Helper()
	var n int
	require.NoError(tb, st.DB.QueryRowContext(ctx(tb), "SELECT COUNT(*) FROM stock_ledger WHERE sale_id = ? AND operation = ?", saleID, op).Scan(&n))
	return n
}

func TestCreateSaleSpreadsStockOverBuckets(t *testing.T) {
	st := testenv.MustStore(t)
	sale := testenv.MustSale(t, st, 10, func(s *domain.Sale) { s.Buckets = 4 })
	var stocks []int64
	require.NoError(t, st.DB.NewRaw("SELECT stock FROM stock_buckets WHERE sale_id = ? ORDER BY bucket_no", sale.ID).Scan(ctx(t), &stocks))
	require.Equal(t, []int64{3, 3, 2, 2}, stocks)

	// More buckets than units: the extra buckets start empty.
	small := testenv.MustSale(t, st, 2, func(s *domain.Sale) { s.Buckets = 5 })
	stocks = nil
	require.NoError(t, st.DB.NewRaw("SELECT stock FROM stock_buckets WHERE sale_id = ? ORDER BY bucket_no", small.ID).Scan(ctx(t), &stocks))
	require.Equal(t, []int64{1, 1, 0, 0, 0}, stocks)
}

// The third defence: the conditional UPDATE checked by affected rows lets
// exactly the stock through, however many transactions race for it.
func TestPlaceOrderNeverOversellsUnderConcurrency(t *testing.T) {
	st := testenv.MustStore(t)
	const stock, buyers = 20, 60
	sale := testenv.MustSale(t, st, stock, func(s *domain.Sale) { s.Buckets = 3 })
	base := testenv.UniqueUser() * 1000

	inputs := make([]domain.OrderInput, buyers)
	for i := range inputs {
		inputs[i] = mustLegacyQueued(t, st, sale, base+int64(i), fmt.Sprintf("req-%08d", i))
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	placed, noStock := 0, 0
	for _, in := range inputs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				r, err := st.PlaceOrder(ctx(t), in.Token)
				mu.Lock()
				switch {
				case err == nil:
					require.Equal(t, domain.StatusPendingPayment, r.Status)
					placed++
				case errors.Is(err, domain.ErrSoldOut):
					noStock++
				case store.IsRetryable(err):
					mu.Unlock()
					continue
				default:
					t.Errorf("place order: %v", err)
				}
				mu.Unlock()
				return
			}
		}()
	}
	wg.Wait()
	require.Equal(t, stock, placed)
	require.Equal(t, buyers-stock, noStock)
	left, err := st.DBStock(ctx(t), sale.ID)
	require.NoError(t, err)
	require.Zero(t, left)
	require.Equal(t, stock, ledgerCount(t, st, sale.ID, "deduct"))
	var negative int
	require.NoError(t, st.DB.QueryRowContext(ctx(t), "SELECT COUNT(*) FROM stock_buckets WHERE sale_id = ? AND stock < 0", sale.ID).Scan(&negative))
	require.Zero(t, negative)
}

func TestConditionalUpdateTouchesNoEmptyBucket(t *testing.T) {
	st := testenv.MustStore(t)
	sale := testenv.MustSale(t, st, 1, func(s *domain.Sale) { s.Buckets = 2 })
	res, err := st.DB.ExecContext(ctx(t), "UPDATE stock_buckets SET stock = stock - 1 WHERE sale_id = ? AND bucket_no = 1 AND stock >= 1", sale.ID)
	require.NoError(t, err)
	n, err := res.RowsAffected()
	require.NoError(t, err)
	require.Zero(t, n, "an empty bucket must not be decremented")
}

// bucketsOf reads a sale's bucket stocks, in bucket order.
func bucketsOf(tb testing.TB, st *store.Store, saleID int64) []int64 {
	tb.Helper()
	var stocks []int64
	require.NoError(tb, st.DB.NewRaw("SELECT stock FROM stock_buckets WHERE sale_id = ? ORDER BY bucket_no", saleID).Scan(ctx(tb), &stocks))
	return stocks
}

// orderBuckets reads the bucket an order and its ledger deduct row name.
func orderBuckets(tb testing.TB, st *store.Store, token string) (order, ledger int) {
	tb.Helper()
	require.NoError(tb, st.DB.QueryRowContext(ctx(tb), "SELECT bucket_no FROM orders WHERE token = ?", token).Scan(&order))
	require.NoError(tb, st.DB.QueryRowContext(ctx(tb), "SELECT bucket_no FROM stock_ledger WHERE token = ? AND operation = 'deduct'", token).Scan(&ledger))
	return order, ledger
}

// An order takes its unit last, from the bucket its read saw with one. When
// that bucket ran out meanwhile, the conditional UPDATE touches nothing and
// the order takes the unit from another bucket, which its order and ledger
// rows then name; with none left it rolls back whole.
func TestPlaceOrderFromABucketThatRanOutTakesAnother(t *testing.T) {
	st := testenv.MustStore(t)
	sale := testenv.MustSale(t, st, 2, func(s *domain.Sale) { s.Buckets = 2 })
	require.Equal(t, []int64{1, 1}, bucketsOf(t, st, sale.ID))
	user := testenv.UniqueUser() * 1000
	first := mustLegacyQueued(t, st, sale, user, "ran-out-1")
	second := mustLegacyQueued(t, st, sale, user+1, "ran-out-2")
	third := mustLegacyQueued(t, st, sale, user+2, "ran-out-3")

	_, err := st.PlaceOrderWanting(ctx(t), first.Token, 0)
	require.NoError(t, err)
	o, l := orderBuckets(t, st, first.Token)
	require.Equal(t, []int{0, 0}, []int{o, l})

	// Bucket 0 is empty now: a read that saw it with a unit is stale.
	r, err := st.PlaceOrderWanting(ctx(t), second.Token, 0)
	require.NoError(t, err)
	require.Equal(t, domain.StatusPendingPayment, r.Status)
	o, l = orderBuckets(t, st, second.Token)
	require.Equal(t, []int{1, 1}, []int{o, l}, "the order and its ledger row name the bucket the unit came from")
	require.Equal(t, []int64{0, 0}, bucketsOf(t, st, sale.ID))

	_, err = st.PlaceOrderWanting(ctx(t), third.Token, 1)
	require.ErrorIs(t, err, domain.ErrSoldOut)
	got, err := st.GetReservation(ctx(t), third.Token)
	require.NoError(t, err)
	require.Equal(t, domain.StatusQueued, got.Status, "rolled back whole")
	var orders int
	require.NoError(t, st.DB.QueryRowContext(ctx(t), "SELECT COUNT(*) FROM orders WHERE token = ?", third.Token).Scan(&orders))
	require.Zero(t, orders)
	require.Equal(t, 2, ledgerCount(t, st, sale.ID, "deduct"))
	require.Equal(t, []int64{0, 0}, bucketsOf(t, st, sale.ID))
}

// holdBucket takes a unit of a bucket in a transaction that does not
// commit, as one whose process stopped before its commit; release rolls it
// back (the test's end does too).
func holdBucket(tb testing.TB, st *store.Store, saleID int64, bucket int) (release func()) {
	tb.Helper()
	tx, err := st.DB.BeginTx(ctx(tb), nil)
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = tx.Rollback() })
	_, err = tx.ExecContext(ctx(tb), "UPDATE stock_buckets SET stock = stock - 1 WHERE sale_id = ? AND bucket_no = ?", saleID, bucket)
	require.NoError(tb, err)
	return func() { require.NoError(tb, tx.Rollback()) }
}

// A bucket another transaction holds and does not commit (its process
// stopped between its UPDATE and its commit) holds up an order that picked
// it for about a second, not InnoDB's lock wait timeout (50 s): the order
// then fails with a retryable error, having written nothing, and its retry
// picks again.
func TestPlaceOrderDoesNotWaitLongForAStalledBucket(t *testing.T) {
	st := testenv.MustStore(t)
	sale := testenv.MustSale(t, st, 4, func(s *domain.Sale) { s.Buckets = 2 })
	in := mustLegacyQueued(t, st, sale, testenv.UniqueUser(), "stalled-1")

	release := holdBucket(t, st, sale.ID, 0)

	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := st.PlaceOrderWanting(c, in.Token, 0)
	require.Error(t, err)
	require.True(t, store.IsRetryable(err), "a lock wait timeout, not the caller's deadline: %v", err)
	got, err := st.GetReservation(ctx(t), in.Token)
	require.NoError(t, err)
	require.Equal(t, domain.StatusQueued, got.Status, "rolled back whole")
	require.Zero(t, ledgerCount(t, st, sale.ID, "deduct"))

	_, err = st.PlaceOrderWanting(c, in.Token, 1)
	require.NoError(t, err)
	o, l := orderBuckets(t, st, in.Token)
	require.Equal(t, []int{1, 1}, []int{o, l})
	release()
	require.Equal(t, []int64{2, 1}, bucketsOf(t, st, sale.ID))
}

// With one bucket there is no other to take: an order waits for a held
// bucket as long as its holder takes (it does not fail after the second
// that a sale of many buckets allows), and places once the holder ends.
func TestPlaceOrderOfOneBucketWaitsForIt(t *testing.T) {
	st := testenv.MustStore(t)
	sale := testenv.MustSale(t, st, 4, func(s *domain.Sale) { s.Buckets = 1 })
	in := mustLegacyQueued(t, st, sale, testenv.UniqueUser(), "one-bucket-1")

	release := holdBucket(t, st, sale.ID, 0)

	done := make(chan error, 1)
	go func() {
		_, err := st.PlaceOrder(ctx(t), in.Token)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("the order did not wait for its one bucket: %v", err)
	case <-time.After(2 * time.Second):
	}
	release()
	require.NoError(t, <-done)
	o, l := orderBuckets(t, st, in.Token)
	require.Equal(t, []int{0, 0}, []int{o, l})
	require.Equal(t, []int64{3}, bucketsOf(t, st, sale.ID))
}

func TestPlaceOrderIsIdempotent(t *testing.T) {
	st := testenv.MustStore(t)
	sale := testenv.MustSale(t, st, 5)
	in := mustQueued(t, st, sale, testenv.UniqueUser(), "idem-0001")

	first, err := st.PlaceOrder(ctx(t), in.Token)
	require.NoError(t, err)
	second, err := st.PlaceOrder(ctx(t), in.Token)
	require.NoError(t, err)
	require.Equal(t, first.OrderNo, second.OrderNo)
	require.Equal(t, first.PayBy, second.PayBy)
	require.Equal(t, 1, ledgerCount(t, st, sale.ID, "deduct"))
	left, err := st.DBStock(ctx(t), sale.ID)
	require.NoError(t, err)
	require.EqualValues(t, 4, left)

	// Recording the reservation again does not reset it.
	again, err := st.RecordReservation(ctx(t), in)
	require.NoError(t, err)
	require.Equal(t, domain.StatusPendingPayment, again.Status)
}

// waitForStatement waits until a statement whose text is LIKE like has run
// for a while (waiting for a lock another transaction of the test holds).
func waitForStatement(tb testing.TB, st *store.Store, like, what string) {
	tb.Helper()
	require.EventuallyWithT(tb, func(c *assert.CollectT) {
		var n int
		assert.NoError(c, st.DB.QueryRowContext(ctx(tb), `SELECT COUNT(*) FROM information_schema.PROCESSLIST
			WHERE command = 'Query' AND time_ms > 200 AND info LIKE ?`, like).Scan(&n))
		assert.Positive(c, n, what)
	}, 10*time.Second, 20*time.Millisecond)
}

// A reservation that moves on (here, cancelled while QUEUED) between
// PlaceOrder's read and its transaction gets no order: the transaction
// waits for the reservation's row, finds it no longer QUEUED, rolls back,
// and PlaceOrder returns where the reservation stands.
func TestPlaceOrderOfAReservationCancelledMeanwhile(t *testing.T) {
	st := testenv.MustStore(t)
	sale := testenv.MustSale(t, st, 5)
	in := mustLegacyQueued(t, st, sale, testenv.UniqueUser(), "cancelled-meanwhile")

	tx, err := st.DB.BeginTx(ctx(t), nil)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	_, err = tx.ExecContext(ctx(t), "UPDATE reservations SET status = ? WHERE token = ?", string(domain.StatusCancelled), in.Token)
	require.NoError(t, err)

	type placed struct {
		r   *domain.Reservation
		err error
	}
	done := make(chan placed, 1)
	go func() {
		r, err := st.PlaceOrder(ctx(t), in.Token)
		done <- placed{r, err}
	}()
	// Waiting: its read saw QUEUED, its transaction waits for the row.
	waitForStatement(t, st, fmt.Sprintf("%%WHERE token = '%s' AND user_id = %%", in.Token), "the placement waits for the reservation's row")
	require.NoError(t, tx.Commit())

	got := <-done
	require.NoError(t, got.err)
	require.Equal(t, domain.StatusCancelled, got.r.Status)
	require.Empty(t, got.r.OrderNo)
	var orders int
	require.NoError(t, st.DB.QueryRowContext(ctx(t), "SELECT COUNT(*) FROM orders WHERE token = ?", in.Token).Scan(&orders))
	require.Zero(t, orders)
	require.Zero(t, ledgerCount(t, st, sale.ID, "deduct"))
	left, err := st.DBStock(ctx(t), sale.ID)
	require.NoError(t, err)
	require.EqualValues(t, 5, left)
}

// The fourth defence: one live or paid reservation and order per user and
// sale, by unique keys on generated columns that are NULL once they ended.
// A second hold of the user is refused when it is recorded (before any
// 202), and takes no unit.
func TestOneLiveOrderPerUserAndSale(t *testing.T) {
	st := testenv.MustStore(t)
	sale := testenv.MustSale(t, st, 5)
	user := testenv.UniqueUser()
	first := mustQueued(t, st, sale, user, "live-0001")
	second := domain.RedisHoldInput(domain.DeriveToken([]byte("test-key"), sale.ID, user, "live-0002"), sale.ID, user, "live-0002")
	r, err := st.RecordReservation(ctx(t), second)
	require.NoError(t, err)
	require.Equal(t, domain.StatusFailed, r.Status)
	require.Equal(t, domain.FailReasonRefusedHolder, r.FailReason)

	_, err = st.PlaceOrder(ctx(t), first.Token)
	require.NoError(t, err)
	left, err := st.DBStock(ctx(t), sale.ID)
	require.NoError(t, err)
	require.EqualValues(t, 4, left, "the refused hold must not take a unit")

	// A raw second live reservation is refused by the key itself.
	_, err = st.DB.ExecContext(ctx(t), `INSERT INTO reservations (token, sale_id, user_id, request_id, path, status)
		VALUES ('raw-live-token', ?, ?, 'raw-live-request', 'redis', 'QUEUED')`, sale.ID, user)
	require.True(t, store.IsDuplicate(err), "want a duplicate-key error, got %v", err)

	// Once the first order expired, the user may buy again.
	_, err = st.ReleaseOrder(ctx(t), first.Token, domain.StatusExpired)
	require.NoError(t, err)
	third := mustQueued(t, st, sale, user, "live-0003")
	r, err = st.PlaceOrder(ctx(t), third.Token)
	require.NoError(t, err)
	require.Equal(t, domain.StatusPendingPayment, r.Status)

	// A raw second live order is refused by the orders' key itself.
	_, err = st.DB.ExecContext(ctx(t), `INSERT INTO orders (order_no, token, sale_id, user_id, amount_cents, status, bucket_no, pay_by)
		VALUES ('01TESTTESTTESTTESTTESTTEST', 'raw-token', ?, ?, 1, 'PAID', 0, NOW())`, sale.ID, user)
	require.True(t, store.IsDuplicate(err), "want a duplicate-key error, got %v", err)
}

func TestPayAndReleaseLifecycle(t *testing.T) {
	st := testenv.MustStore(t)
	sale := testenv.MustSale(t, st, 3)
	paid := mustQueued(t, st, sale, testenv.UniqueUser(), "life-0001")
	cancelled := mustQueued(t, st, sale, testenv.UniqueUser(), "life-0002")
	for _, in := range []domain.OrderInput{paid, cancelled} {
		_, err := st.PlaceOrder(ctx(t), in.Token)
		require.NoError(t, err)
	}

	r, err := st.MarkPaid(ctx(t), paid.Token, "pay-ref-1")
	require.NoError(t, err)
	require.Equal(t, domain.StatusPaid, r.Status)
	r, err = st.MarkPaid(ctx(t), paid.Token, "pay-ref-1")
	require.NoError(t, err, "the same payment_ref is accepted again")
	require.Equal(t, "pay-ref-1", r.PaymentRef)
	_, err = st.MarkPaid(ctx(t), paid.Token, "pay-ref-2")
	require.ErrorIs(t, err, domain.ErrNotPayable)
	_, err = st.ReleaseOrder(ctx(t), paid.Token, domain.StatusCancelled)
	require.ErrorIs(t, err, domain.ErrNotCancellable)

	r, err = st.ReleaseOrder(ctx(t), cancelled.Token, domain.StatusCancelled)
	require.NoError(t, err)
	require.Equal(t, domain.StatusCancelled, r.Status)
	_, err = st.ReleaseOrder(ctx(t), cancelled.Token, domain.StatusCancelled)
	require.NoError(t, err, "a second release changes nothing")
	_, err = st.MarkPaid(ctx(t), cancelled.Token, "late")
	require.ErrorIs(t, err, domain.ErrNotPayable)

	require.Equal(t, 1, ledgerCount(t, st, sale.ID, "restore"))
	left, err := st.DBStock(ctx(t), sale.ID)
	require.NoError(t, err)
	require.EqualValues(t, 2, left, "3 units - 2 orders + 1 restored")

	counts, err := st.CountReservations(ctx(t), sale.ID)
	require.NoError(t, err)
	require.EqualValues(t, 1, counts[domain.StatusPaid])
	require.EqualValues(t, 1, counts[domain.StatusCancelled])
}

func TestEndQueued(t *testing.T) {
	st := testenv.MustStore(t)
	sale := testenv.MustSale(t, st, 1)
	in := mustQueued(t, st, sale, testenv.UniqueUser(), "endq-0001")
	r, err := st.EndQueued(ctx(t), in.Token, domain.StatusFailed, "no stock")
	require.NoError(t, err)
	require.Equal(t, domain.StatusFailed, r.Status)
	r, err = st.PlaceOrder(ctx(t), in.Token)
	require.NoError(t, err)
	require.Equal(t, domain.StatusFailed, r.Status, "a failed reservation never gets an order")
	left, err := st.DBStock(ctx(t), sale.ID)
	require.NoError(t, err)
	require.EqualValues(t, 1, left)
}

func TestAdjustStock(t *testing.T) {
	st := testenv.MustStore(t)
	sale := testenv.MustSale(t, st, 10, func(s *domain.Sale) { s.Buckets = 4 })
	ref := fmt.Sprintf("adjust-test-%d-", sale.ID)
	require.NoError(t, st.AdjustStock(ctx(t), sale.ID, 7, ref+"1"))
	require.NoError(t, st.AdjustStock(ctx(t), sale.ID, 7, ref+"1"), "a retry with the same ref changes nothing")
	left, err := st.DBStock(ctx(t), sale.ID)
	require.NoError(t, err)
	require.EqualValues(t, 17, left)
	require.NoError(t, st.AdjustStock(ctx(t), sale.ID, -15, ref+"2"))
	left, err = st.DBStock(ctx(t), sale.ID)
	require.NoError(t, err)
	require.EqualValues(t, 2, left)
	require.ErrorIs(t, st.AdjustStock(ctx(t), sale.ID, -3, ref+"3"), domain.ErrInsufficient)
	got, err := st.GetSale(ctx(t), sale.ID)
	require.NoError(t, err)
	require.EqualValues(t, 2, got.StockTotal)
}
