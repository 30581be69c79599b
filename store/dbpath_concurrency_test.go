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

// 64 database-path transactions at once, on one sale: every answer is a
// reservation or a business refusal (quota, sold out); none is a deadlock
// or a lock-wait timeout, and nothing is sold beyond the quota. Once with a
// quota far below the stock, once with the buckets running empty (the
// bucket pick's locking scan deadlocks there; ReserveInDB retries).
func TestDatabasePathUnderConcurrencyHasNoLockErrors(t *testing.T) {
	t.Run("quota below stock", func(t *testing.T) { testDatabasePathConcurrency(t, 100_000, 300) })
	t.Run("buckets run empty", func(t *testing.T) { testDatabasePathConcurrency(t, 200, 200) })
}

func testDatabasePathConcurrency(t *testing.T, stock, quota int) {
	st := testenv.MustStore(t)
	const (
		workers = 64
		perW    = 8
	)
	sale := testenv.MustSale(t, st, int64(stock), func(s *domain.Sale) { s.Buckets = 16 })
	require.NoError(t, st.RecordRedisStock(ctx(t), sale.ID, int64(quota), time.Now()))
	_, err := st.SwitchToDatabase(ctx(t), sale.ID, 0)
	require.NoError(t, err)
	base := testenv.UniqueUser() * 10_000
	dispatchedAtEnd(t, st, sale.ID)

	var (
		mu            sync.Mutex
		sold, refused int
		other         []error
		wg            sync.WaitGroup
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perW {
				user := base + int64(w*perW+i)
				c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				_, _, err := st.ReserveInDB(c, dbInput(sale, user, fmt.Sprintf("conc-%d", user)))
				cancel()
				mu.Lock()
				switch {
				case err == nil:
					sold++
				case errors.Is(err, store.ErrQuotaExhausted), errors.Is(err, domain.ErrSoldOut):
					refused++
				default:
					other = append(other, err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for i, err := range other {
		if i < 5 {
			t.Logf("error: %v (retryable: %v)", err, store.IsRetryable(err))
		}
	}
	require.Empty(t, other, "%d of %d database-path reservations failed with errors", len(other), workers*perW)
	require.Equal(t, quota, sold, "the whole quota sells")
	require.Equal(t, workers*perW-quota, refused)
	counts, err := st.CountReservations(ctx(t), sale.ID)
	require.NoError(t, err)
	require.EqualValues(t, quota, counts[domain.StatusPendingPayment])
	got, err := st.GetSale(ctx(t), sale.ID)
	require.NoError(t, err)
	require.Equal(t, domain.ModeDatabase, got.Mode)
	left, err := st.DBStock(ctx(t), sale.ID)
	require.NoError(t, err)
	require.EqualValues(t, stock-quota, left)
}

// A resync that begins while a database-path transaction waits for the
// sale row makes that transaction answer ErrNotDatabaseMode (retry soon),
// not ErrQuotaExhausted (sold out), and leaves nothing behind.
func TestDatabasePathRacingAResyncIsNotSoldOut(t *testing.T) {
	st := testenv.MustStore(t)
	sale := mustDatabaseSale(t, st, 10, 4)

	// The resync's mode change, held uncommitted: it owns the sale row.
	tx, err := st.DB.BeginTx(ctx(t), nil)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	_, err = tx.ExecContext(ctx(t), "UPDATE sales SET mode = ?, mode_epoch = mode_epoch + 1 WHERE id = ?", string(domain.ModeResync), sale.ID)
	require.NoError(t, err)

	in := dbInput(sale, testenv.UniqueUser(), "racing-resync")
	done := make(chan error, 1)
	go func() {
		_, _, err := st.ReserveInDB(ctx(t), in)
		done <- err
	}()
	// Wait until it queues for the sale row (the outcome is the same if it
	// arrives after the commit; this makes the test take the racing path).
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var n int
		// Either the quota's opening or the taking of a unit.
		assert.NoError(c, st.DB.QueryRowContext(ctx(t), "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE info LIKE ? OR info LIKE ?",
			fmt.Sprintf("INSERT INTO orders %%FROM sales WHERE id = %d %%", sale.ID),
			fmt.Sprintf("UPDATE sales s SET s.db_quota = %%WHERE s.id = %d %%", sale.ID)).Scan(&n))
		assert.Positive(c, n)
	}, 10*time.Second, 20*time.Millisecond)
	require.NoError(t, tx.Commit())

	require.ErrorIs(t, <-done, domain.ErrSaleResyncing)
	_, err = st.GetReservation(ctx(t), in.Token)
	require.ErrorIs(t, err, store.ErrNotFound, "the reservation rolled back")
	left, err := st.DBStock(ctx(t), sale.ID)
	require.NoError(t, err)
	require.EqualValues(t, 10, left)
}

// A database-path reservation in flight (a bucket's row taken, the sale row
// read under a shared lock) does not hold up another: the quota is taken
// from the buckets' shares, not from the sale row. Before, every
// reservation updated the sale row's quota and waited for the one before.
func TestDatabasePathReservationsDoNotQueueOnTheSaleRow(t *testing.T) {
	st := testenv.MustStore(t)
	sale := mustDatabaseSale(t, st, 20, 4)
	base := testenv.UniqueUser() * 1000
	_, _, err := st.ReserveInDB(ctx(t), dbInput(sale, base, "queue-0")) // opens the quota
	require.NoError(t, err)

	// What a reservation in flight holds just before its commit.
	tx, err := st.DB.BeginTx(ctx(t), nil)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	_, err = tx.ExecContext(ctx(t), "UPDATE stock_buckets SET stock = stock - 1, db_quota = db_quota - 1 WHERE sale_id = ? AND bucket_no = 0", sale.ID)
	require.NoError(t, err)
	var mode string
	require.NoError(t, tx.QueryRowContext(ctx(t), "SELECT mode FROM sales WHERE id = ? LOCK IN SHARE MODE", sale.ID).Scan(&mode))

	// Far below InnoDB's lock wait timeout: a reservation that queued
	// behind the one in flight would run out of time.
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i := 1; i <= 3; i++ {
		_, _, err := st.ReserveInDB(c, dbInput(sale, base+int64(i), fmt.Sprintf("queue-%d", i)))
		require.NoError(t, err, "reservation %d while another is in flight", i)
	}
	require.NoError(t, tx.Rollback())
	left, err := st.DBStock(ctx(t), sale.ID)
	require.NoError(t, err)
	require.EqualValues(t, 16, left)
}

// A mode change that commits while a database-path reservation, its quota
// open, waits for the sale row (the last row it reads, under a shared lock,
// after it took a unit of a bucket) makes the reservation roll back whole
// with ErrNotDatabaseMode: no reservation, order, ledger or outbox row, and
// the bucket's stock and share as they were.
func TestDatabasePathWaitingForAModeChangeRollsBack(t *testing.T) {
	st := testenv.MustStore(t)
	sale := mustDatabaseSale(t, st, 10, 2)
	base := testenv.UniqueUser() * 1000
	_, _, err := st.ReserveInDB(ctx(t), dbInput(sale, base, "mode-0")) // opens the quota
	require.NoError(t, err)

	// The resync's mode change, held uncommitted: it owns the sale row.
	tx, err := st.DB.BeginTx(ctx(t), nil)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	_, err = tx.ExecContext(ctx(t), "UPDATE sales SET mode = ?, mode_epoch = mode_epoch + 1 WHERE id = ?", string(domain.ModeResync), sale.ID)
	require.NoError(t, err)

	in := dbInput(sale, base+1, "mode-1")
	done := make(chan error, 1)
	go func() {
		_, _, err := st.ReserveInDB(ctx(t), in)
		done <- err
	}()
	// Waiting: its statement that reads the sale row has run for a while.
	waitForStatement(t, st, fmt.Sprintf("%%FROM sales WHERE id = %d %%LOCK IN SHARE MODE%%", sale.ID), "the reservation waits for the sale row")
	require.NoError(t, tx.Commit())

	require.ErrorIs(t, <-done, domain.ErrSaleResyncing)
	_, err = st.GetReservation(ctx(t), in.Token)
	require.ErrorIs(t, err, store.ErrNotFound, "the reservation rolled back")
	var orders, ledger, outbox int
	require.NoError(t, st.DB.QueryRowContext(ctx(t), `SELECT (SELECT COUNT(*) FROM orders WHERE token = ?),
		(SELECT COUNT(*) FROM stock_ledger WHERE token = ?), (SELECT COUNT(*) FROM outbox WHERE token = ?)`,
		in.Token, in.Token, in.Token).Scan(&orders, &ledger, &outbox))
	require.Zero(t, orders+ledger+outbox, "orders %d, ledger %d, outbox %d", orders, ledger, outbox)
	var stock, share int64
	require.NoError(t, st.DB.QueryRowContext(ctx(t), "SELECT SUM(stock), SUM(db_quota) FROM stock_buckets WHERE sale_id = ?", sale.ID).Scan(&stock, &share))
	require.EqualValues(t, 9, stock)
	require.EqualValues(t, 9, share)
}
