package sales_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/sales"
	"github.com/seckill/seckill/temporalgateway"
)

// A resync of a sale with 5,000 live orders while 50 of them are paid and
// 5 cancelled every second: the rebuild merges what ran during it and
// finishes in one pass (before, each payment or cancel moved the fence, so
// the rebuild started over five times and rolled back, round after round).
// The time it took is logged; docs/benchmarks.md keeps the measurement.
func TestResyncUnderPaymentsAndCancelsFinishesInOnePass(t *testing.T) {
	const orders, payEvery, cancelEvery = 5000, 20 * time.Millisecond, 200 * time.Millisecond
	f := mustFixture(t, orders+100)
	f.within(10 * time.Minute) // 5,000 orders one by one: a minute on a loaded host
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

// listCounter counts a Temporal client's visibility list calls (pages).
type listCounter struct {
	client.Client
	pages atomic.Int64
}

func (c *listCounter) ListWorkflow(ctx context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	c.pages.Add(1)
	return c.Client.ListWorkflow(ctx, req)
}

// scaleEnv reads a size of the rebuild's timing from the environment.
func scaleEnv(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n >= 0 {
		return n
	}
	return def
}

// The steps of a rebuild of lost keys, timed, with live sales beside and
// recorded holds whose order workflows run QUEUED on the lost sale (nobody
// polls their task queue): SECKILL_TEST_REBUILD_SALES live sales (500)
// and SECKILL_TEST_REBUILD_QUEUED holds (1,000). The times and the
// visibility pages read are logged; docs/benchmarks.md keeps the
// measurement. The rebuild counts every hold once.
func TestRebuildLostStepTimes(t *testing.T) {
	live, queued := scaleEnv("SECKILL_TEST_REBUILD_SALES", 500), scaleEnv("SECKILL_TEST_REBUILD_QUEUED", 1000)
	f := mustFixture(t, int64(queued+100))
	f.within(15 * time.Minute)
	ctx := f.ctx
	testenv.MustIdleSales(t, f.st, live)
	tc := &listCounter{Client: testenv.MustTemporal(t)}
	toks := make([]string, queued)
	for i := range toks {
		toks[i] = f.redisHold(testenv.UniqueUser(), false)
	}
	startUnpolled(t, f, tc, toks, int64(len(toks)))
	var stopped int64 // the pages read once the resync stopped the paths
	sales.SetAfterSnapshot(func() { stopped = tc.pages.Load() })
	t.Cleanup(func() { sales.SetAfterSnapshot(nil) })
	step := func(name string, do func() error) {
		began, pages := time.Now(), tc.pages.Load()
		require.NoError(t, do())
		t.Logf("%-15s %8s, %d visibility page(s)", name, time.Since(began).Round(100*time.Microsecond), tc.pages.Load()-pages)
	}
	for range 2 {
		require.NoError(t, f.rdb.Del(ctx, f.keys.All()...).Err())
		step("ReadFence", func() error { _, err := f.client.ReadFence(ctx, f.sale.ID); return err })
		step("PresentTokens", func() error { _, err := f.client.PresentTokens(ctx, f.sale.ID); return err })
		known := map[string]bool{}
		step("ReadRedisState", func() error {
			s, err := f.st.ReadRedisState(ctx, f.sale.ID)
			for _, h := range s.Tokens {
				known[h.Token] = true
			}
			return err
		})
		step("unrecordedHolds", func() error {
			_, err := sales.UnrecordedHolds(ctx, tc, f.sale.ID, func(tok string) bool { return known[tok] }, map[string]domain.OrderInput{})
			return err
		})
		step("RebuildLost", func() error { _, err := sales.RebuildLost(ctx, f.st, f.client, tc, f.sale.ID); return err })
		t.Logf("of which after the snapshot: %d visibility page(s)", tc.pages.Load()-stopped)
		require.EqualValues(t, 100, mustInt(t, f.rdb.Get(ctx, f.keys.Stock)), "every recorded hold counted once")
	}
}

// startUnpolled starts the recorded holds' order workflows on a task
// queue nobody polls, waits until visibility lists the sale's running
// ones, and terminates them at the end of the test.
func startUnpolled(t *testing.T, f *fixture, tc client.Client, toks []string, running int64) {
	queue := fmt.Sprintf("sales-test-unpolled-%d", testenv.UniqueUser())
	each := func(do func(tok string) error) {
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Go(func() {
				for j := i; j < len(toks); j += 16 {
					if err := do(toks[j]); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
	}
	each(func(tok string) error {
		r, err := f.st.GetReservation(f.ctx, tok)
		if err != nil {
			return err
		}
		return temporalgateway.Start(f.ctx, tc, queue, domain.RedisHoldInput(tok, f.sale.ID, r.UserID, r.RequestID))
	})
	t.Cleanup(func() {
		each(func(tok string) error {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = tc.TerminateWorkflow(ctx, domain.OrderWorkflowID(tok), "", "test over")
			return nil
		})
	})
	require.Eventually(t, func() bool {
		n, err := temporalgateway.CountRunning(f.ctx, tc, f.sale.ID)
		return err == nil && n == running
	}, 2*time.Minute, 200*time.Millisecond, "visibility lists every workflow")
}

// A resync takes its full listing of the sale's QUEUED workflows before it
// stops the sale's paths, and once stopped lists only what started since:
// one visibility page with a thousand recorded holds running QUEUED (two
// before). It still counts every unrecorded hold: one whose workflow
// started long before (found by the full listing, still running), one
// started after the snapshot; not one whose workflow ended meanwhile.
func TestResyncListsOnlyWhatStartedSinceItsFullListing(t *testing.T) {
	const recorded, lag = 1000, 3 * time.Second
	sales.SetListedLag(t, lag)
	f := mustFixture(t, recorded+10)
	f.within(10 * time.Minute)
	ctx := f.ctx
	tc := &listCounter{Client: testenv.MustTemporal(t)}
	early, ended := f.unrecordedHold(tc), f.unrecordedHold(tc)
	toks := make([]string, recorded)
	for i := range toks {
		toks[i] = f.redisHold(testenv.UniqueUser(), false)
	}
	startUnpolled(t, f, tc, toks, recorded+2)
	time.Sleep(time.Until(early.began.Add(lag + time.Second)))

	var late unrecorded
	var stopped int64
	sales.SetAfterSnapshot(func() {
		require.NoError(t, tc.TerminateWorkflow(ctx, domain.OrderWorkflowID(ended.token), "", "ended meanwhile"))
		late = f.unrecordedHold(tc)
		stopped = tc.pages.Load()
	})
	t.Cleanup(func() { sales.SetAfterSnapshot(nil) })
	require.NoError(t, f.rdb.Del(ctx, f.keys.All()...).Err())
	done, err := sales.RebuildLost(ctx, f.st, f.client, tc, f.sale.ID)
	require.NoError(t, err)
	require.True(t, done)

	require.EqualValues(t, 1, tc.pages.Load()-stopped, "visibility pages read with the paths stopped")
	require.EqualValues(t, 8, mustInt(t, f.rdb.Get(ctx, f.keys.Stock)), "1,010 units - 1,000 recorded holds - 2 running unrecorded ones")
	for tok, want := range map[string]bool{early.token: true, late.token: true, ended.token: false} {
		_, _, ok, err := f.client.TokenHold(ctx, f.sale.ID, tok)
		require.NoError(t, err)
		require.Equal(t, want, ok, tok)
	}
}

// unrecorded is a hold whose workflow runs while the database has no record of it.
type unrecorded struct {
	token string
	began time.Time
}

// unrecordedHold starts the workflow of a hold the database has not
// recorded (its record failed) on a queue nobody polls, and waits until
// visibility lists it.
func (f *fixture) unrecordedHold(tc client.Client) unrecorded {
	user := testenv.UniqueUser()
	req := fmt.Sprintf("req-%d", user)
	h := unrecorded{token: domain.DeriveToken(tokenKey, f.sale.ID, user, req), began: time.Now()}
	queue := fmt.Sprintf("sales-test-unpolled-%d", user)
	require.NoError(f.t, temporalgateway.Start(f.ctx, tc, queue, domain.RedisHoldInput(h.token, f.sale.ID, user, req)))
	f.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = tc.TerminateWorkflow(ctx, domain.OrderWorkflowID(h.token), "", "test over")
	})
	require.Eventually(f.t, func() bool {
		running, err := temporalgateway.Queued(f.ctx, tc, f.sale.ID)
		return err == nil && running[h.token]
	}, 10*time.Second, 50*time.Millisecond, "the workflow is visible as running")
	return h
}
