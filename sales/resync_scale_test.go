package sales_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/sales"
)

// A resync of a sale with 5,000 live orders while 50 of them are paid and
// 5 cancelled every second: the rebuild merges what ran during it and
// finishes in one pass (before, each payment or cancel moved the fence, so
// the rebuild started over five times and rolled back, round after round).
// The time it took is logged; docs/benchmarks.md keeps the measurement.
func TestResyncUnderPaymentsAndCancelsFinishesInOnePass(t *testing.T) {
	const orders, payEvery, cancelEvery = 5000, 20 * time.Millisecond, 200 * time.Millisecond
	f := mustFixture(t, orders+100)
	f.toDatabaseMode()
	began := time.Now()
	tokens := make([]string, orders)
	for i := range tokens {
		tokens[i] = f.dbOrder(testenv.UniqueUser())
	}
	t.Logf("%d live orders placed in %s", orders, time.Since(began).Round(time.Millisecond))

	snapshots := 0
	sales.SetAfterSnapshot(func() { snapshots++ })
	t.Cleanup(func() { sales.SetAfterSnapshot(nil) })
	var next atomic.Int64
	paid, cancelled := sync.Map{}, sync.Map{}
	step := func(every time.Duration, act func(tok string) error, done *sync.Map, stop <-chan struct{}) {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			tok := tokens[next.Add(1)-1]
			if err := act(tok); err != nil {
				t.Errorf("%s: %v", tok, err)
				return
			}
			if _, err := sales.SyncToken(f.ctx, f.st, f.client, tok); err != nil {
				t.Errorf("sync %s: %v", tok, err)
				return
			}
			done.Store(tok, true)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		step(payEvery, func(tok string) error { _, err := f.st.MarkPaid(f.ctx, tok, "pay-"+tok[len(tok)-8:]); return err }, &paid, stop)
	})
	wg.Go(func() {
		step(cancelEvery, func(tok string) error {
			_, err := f.st.ReleaseOrder(f.ctx, tok, domain.StatusCancelled)
			return err
		}, &cancelled, stop)
	})
	time.Sleep(time.Second)
	began = time.Now()
	done, err := sales.Resync(f.ctx, f.st, f.client, testenv.MustTemporal(t), f.sale.ID)
	took := time.Since(began)
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	require.NoError(t, err)
	require.True(t, done, "the resync finished")
	t.Logf("resync of %d live orders under 50 payments/s and 5 cancels/s: %s, %d snapshot(s)", orders, took.Round(time.Millisecond), snapshots)
	require.Equal(t, 1, snapshots, "the rebuild never started over")

	f.requireStockAgrees()
	paid.Range(func(k, _ any) bool {
		require.Contains(t, f.rdb.HGet(f.ctx, f.keys.Tokens, k.(string)).Val(), "paid:", "a payment made during the resync")
		return true
	})
	cancelled.Range(func(k, _ any) bool {
		tok := k.(string)
		if v := f.rdb.HGet(f.ctx, f.keys.Tokens, tok).Val(); v != "" {
			require.Contains(t, v, "released:", "a cancel made during the resync")
			return true
		}
		// Cancelled before the snapshot while Redis did not name the
		// token: not written back, its user retired.
		r, err := f.st.GetReservation(f.ctx, tok)
		require.NoError(t, err)
		require.True(t, f.rdb.SIsMember(f.ctx, f.keys.Retired, r.UserID).Val(), "a cancel made before the snapshot retires its user")
		return true
	})
}
