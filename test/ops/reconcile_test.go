package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/sales"
	"github.com/seckill/seckill/temporalgateway"
)

func testCtx(tb testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}

// MustStartSale starts a sale workflow, retrying while a loaded Temporal
// answers late (a start that did happen is found by the retry).
func MustStartSale(tb testing.TB, tc client.Client, queue string, in domain.SaleInput) {
	tb.Helper()
	require.EventuallyWithT(tb, func(c *assert.CollectT) {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		assert.NoError(c, temporalgateway.StartSale(ctx, tc, queue, in))
	}, 90*time.Second, time.Second)
}

// tryReconciliation is reconciliation for goroutines: no test failure.
func (s *stack) tryReconciliation(tb testing.TB, saleID int64) (report, error) {
	req, err := http.NewRequest("GET", fmt.Sprintf("%s/admin/v1/sales/%d/reconciliation", s.api.URL, saleID), nil)
	if err != nil {
		return report{}, err
	}
	req.Header.Set("Authorization", "Bearer "+mint(tb, -1))
	resp, err := httpClient.Do(req)
	if err != nil {
		return report{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return report{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return report{}, fmt.Errorf("status %d: %s", resp.StatusCode, raw)
	}
	var rep report
	if err := json.Unmarshal(raw, &rep); err != nil {
		return report{}, err
	}
	rep.raw = string(raw)
	return rep, nil
}

// A burst of 200 users on 50 units, then payments, cancellations and
// expiries: reconciliation taken during the burst lists nothing, and ends
// consistent.
func TestReconciliationAfterBurst(t *testing.T) {
	// 200 first script calls at once on a machine the other packages'
	// tests load: a generous Redis timeout keeps the breaker out of a test
	// about reconciliation (as cluster.TestTwoAPIsTwoWorkersShareOneSale).
	s := MustStack(t, "burst", map[string]string{"SECKILL_REDIS_TIMEOUT": "2s"})
	const users, stock, paying, cancelling = 200, 50, 20, 10
	saleID := s.MustLiveSale(t, stock, 20, time.Hour)

	b := burstWithReconciliation(t, s, saleID, users)
	require.Empty(t, b.errs)
	require.Equal(t, map[int]int{http.StatusAccepted: stock, http.StatusGone: users - stock}, b.codes)
	require.Len(t, b.during, 3)
	for _, rep := range b.during {
		require.Empty(t, rep.Discrepancies, "nothing spurious during a burst: %s", rep.raw)
	}
	// Pay some and cancel some as soon as each is an order; the rest expire
	// after the 20s payment window.
	payAndCancelSome(t, s, b.winners, paying, cancelling)
	rep := s.reconciliation(t, saleID, false)
	require.Empty(t, rep.Discrepancies, "nothing spurious while orders await payment: %s", rep.raw)

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		rep, err := s.tryReconciliation(t, saleID)
		if !assert.NoError(c, err) {
			return
		}
		assert.True(c, rep.Consistent, rep.raw)
		assert.Empty(c, rep.Discrepancies, rep.raw)
		assert.Equal(c, map[string]int64{"PENDING_PAYMENT": 0, "PAID": paying, "CANCELLED": cancelling,
			"EXPIRED": stock - paying - cancelling, "FAILED": 0}, rep.Orders, rep.raw)
		assert.EqualValues(c, stock-paying, rep.RedisStock, rep.raw)
		assert.EqualValues(c, stock-paying, rep.DBStock, rep.raw)
		assert.Zero(c, rep.InFlight, rep.raw)
	}, 90*time.Second, time.Second)
}

// burstWon is a 202 of the burst.
type burstWon struct {
	user  int64
	token string
}

// burstResult is what a burst and the reconciliations run during it saw.
type burstResult struct {
	winners []burstWon
	codes   map[int]int
	during  []report
	errs    []error
}

// burstWithReconciliation sends users reservations at once (a 503 sent
// again with the same request_id, as the contract tells clients) while
// reconciling the sale three times.
func burstWithReconciliation(t *testing.T, s *stack, saleID int64, users int) *burstResult {
	b := &burstResult{codes: map[int]int{}}
	var mu sync.Mutex
	start := make(chan struct{})
	var burst sync.WaitGroup
	for i := range users {
		burst.Go(func() {
			user := testenv.UniqueUser()
			<-start
			code, body, err := testenv.DoRetrying("POST", fmt.Sprintf("%s/api/v1/sales/%d/reservations", s.api.URL, saleID), user,
				map[string]any{"request_id": fmt.Sprintf("burst-%04d", i)}, 10)
			if err != nil {
				t.Logf("%v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			b.codes[code]++
			if code == http.StatusAccepted {
				b.winners = append(b.winners, burstWon{user, body["token"].(string)})
			}
		})
	}
	var recon sync.WaitGroup
	recon.Go(func() {
		<-start
		for range 3 {
			rep, err := s.tryReconciliation(t, saleID)
			mu.Lock()
			if err != nil {
				b.errs = append(b.errs, err)
			} else {
				b.during = append(b.during, rep)
			}
			mu.Unlock()
		}
	})
	close(start)
	burst.Wait()
	recon.Wait()
	return b
}

// payAndCancelSome pays the first paying winners and cancels the next
// cancelling ones, each once it is an order.
func payAndCancelSome(t *testing.T, s *stack, winners []burstWon, paying, cancelling int) {
	var after sync.WaitGroup
	for i, w := range winners {
		after.Go(func() {
			s.waitStatus(t, w.user, w.token, "PENDING_PAYMENT")
			switch {
			case i < paying:
				code, body := call(t, "POST", s.api.URL+"/api/v1/reservations/"+w.token+"/payment", w.user, map[string]any{"payment_ref": "burst-pay"})
				assert.Equal(t, http.StatusOK, code, "%v", body)
			case i < paying+cancelling:
				code, body := call(t, "POST", s.api.URL+"/api/v1/reservations/"+w.token+"/cancel", w.user, nil)
				assert.Equal(t, http.StatusOK, code, "%v", body)
			}
		})
	}
	after.Wait()
}

// A hold leaked past its workflow and a release dropped after its
// workflow was terminated are reported, then repaired with ?repair=true by
// the tokens' own workflows.
func TestLeakedHoldAndDroppedReleaseAreRepaired(t *testing.T) {
	ctx := testCtx(t, 3*time.Minute)
	st, rdb, tc := testenv.MustStore(t), testenv.MustRedis(t), testenv.MustTemporal(t)
	sale := testenv.MustSale(t, st, 5)
	MustCleanWorkflows(t, sale.ID)
	// Park the sale's workflow on a queue no worker polls, before any
	// worker's sweeper starts it: only this test's calls repair the sale.
	MustStartSale(t, tc, newQueue("parked"), domain.SaleInput{SaleID: sale.ID})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := tc.TerminateWorkflow(ctx, domain.SaleWorkflowID(sale.ID), "", "test over"); err != nil {
			t.Logf("terminate parked sale workflow: %v", err)
		}
		if err := rdb.Del(ctx, redisgateway.SaleKeys(sale.ID).All()...).Err(); err != nil {
			t.Logf("clean up sale %d: %v", sale.ID, err)
		}
	})
	_, _, err := sales.Warmup(ctx, st, redisgateway.NewClient(rdb), nil, sale.ID)
	require.NoError(t, err)

	leaker := testenv.UniqueUser()
	leaked := leakHold(t, ctx, rdb, sale, leaker)
	k := redisgateway.SaleKeys(sale.ID)
	s := MustStack(t, "repair", nil)
	rb := MustRunbook(t, s.api.URL)

	// The dropped release: an order whose workflow an operator terminated,
	// then released in the database by hand; Redis still says ordered.
	dropper, dropped := s.MustPending(t, sale.ID)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		// The workflow marks the Redis token ordered after the order.
		st, err := rdb.HGet(ctx, k.Tokens, dropped).Result()
		assert.NoError(c, err)
		assert.Equal(c, domain.TokenOrdered+":"+fmt.Sprint(dropper), st)
	}, 30*time.Second, 200*time.Millisecond)
	rb.run("terminate", map[string]string{"TOKEN": dropped})
	_, err = st.ReleaseOrder(ctx, dropped, domain.StatusCancelled)
	require.NoError(t, err)

	// A hold without workflow is excused only while its own inbox entry
	// waits; the leaked hold's entry is gone, so the report names it
	// whatever else waits in the inbox.
	want := map[string]string{leaked: domain.KindHoldWithoutWorkflow, dropped: domain.KindReleaseNotFinished}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		rep := s.reconciliation(t, sale.ID, false)
		assert.False(c, rep.Consistent)
		kinds := map[string]string{}
		for _, d := range rep.Discrepancies {
			kinds[d.Token] = d.Kind
			assert.False(c, d.Repaired, "report only: %s", rep.raw)
		}
		assert.Equal(c, want, kinds, rep.raw)
	}, 30*time.Second, time.Second)

	rep := s.reconciliation(t, sale.ID, true)
	require.Len(t, rep.Discrepancies, 2, rep.raw)
	for _, d := range rep.Discrepancies {
		require.True(t, d.Repaired, rep.raw)
	}

	// The leaked hold became an order; the dropped release finished.
	s.waitStatus(t, leaker, leaked, "PENDING_PAYMENT")
	s.waitStatus(t, dropper, dropped, "CANCELLED")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		rep, err := s.tryReconciliation(t, sale.ID)
		if !assert.NoError(c, err) {
			return
		}
		assert.True(c, rep.Consistent, rep.raw)
		assert.Empty(c, rep.Discrepancies, rep.raw)
		assert.EqualValues(c, 1, rep.Orders["PENDING_PAYMENT"], rep.raw)
		assert.EqualValues(c, 1, rep.Orders["CANCELLED"], rep.raw)
		assert.EqualValues(c, 4, rep.RedisStock, rep.raw)
	}, 60*time.Second, time.Second)
	// The dropper may buy again: the buyer mark went with the release.
	code, body := s.reserve(t, sale.ID, dropper, "dropper-again")
	require.Equal(t, http.StatusAccepted, code, "%v", body)
}

// leakHold reserves for user with the reserve script and removes its inbox
// entry in one MULTI, so no relay (of any test's worker) can read it
// first: a hold leaked past its workflow. It returns the hold's token.
func leakHold(t *testing.T, ctx context.Context, rdb redis.UniversalClient, sale *domain.Sale, user int64) string {
	leakReq := "leaked-hold-1"
	leaked := domain.DeriveToken([]byte("ops-test"), sale.ID, user, leakReq)
	src, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "redisgateway", "reserve.lua"))
	require.NoError(t, err)
	k := redisgateway.SaleKeys(sale.ID)
	var reserveCmd *redis.Cmd
	_, err = rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		reserveCmd = p.Eval(ctx, string(src), redisgateway.ReserveKeys(k), user, leakReq, leaked, sale.ModeEpoch)
		p.XTrimMaxLen(ctx, k.Inbox, 0)
		return nil
	})
	require.NoError(t, err)
	reply, err := reserveCmd.Slice()
	require.NoError(t, err)
	require.Equal(t, redisgateway.OutcomeOK, reply[0])
	return leaked
}

// A sale that ends is drained, gets its final report stored, and its Redis
// keys removed by the sale workflow.
func TestFinalReportAndTeardown(t *testing.T) {
	ctx := testCtx(t, 3*time.Minute)
	st, rdb, tc := testenv.MustStore(t), testenv.MustRedis(t), testenv.MustTemporal(t)
	sale := testenv.MustSale(t, st, 3, func(s *domain.Sale) {
		s.EndsAt = time.Now().UTC().Add(10 * time.Second)
		s.PaymentWindowSeconds = 1
	})
	MustCleanWorkflows(t, sale.ID)
	queue := newQueue("final")
	// Started before any sweeper with a short reconciliation period; the
	// id is the sale's, so whoever starts first wins.
	MustStartSale(t, tc, queue, domain.SaleInput{SaleID: sale.ID, ReconcileEvery: time.Second, RetireMargin: time.Second})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rdb.Del(ctx, redisgateway.SaleKeys(sale.ID).All()...).Err(); err != nil {
			t.Logf("clean up sale %d: %v", sale.ID, err)
		}
	})
	s := MustStackOn(t, queue, nil)

	// The workflow warms the sale; then one user buys and pays.
	user := testenv.UniqueUser()
	var token string
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, body := s.reserve(t, sale.ID, user, "final-buy-1")
		if assert.Equal(c, http.StatusAccepted, code, "%v", body) {
			token = body["token"].(string)
		}
	}, 8*time.Second, 200*time.Millisecond)
	s.waitStatus(t, user, token, "PENDING_PAYMENT")
	code, body := call(t, "POST", s.api.URL+"/api/v1/reservations/"+token+"/payment", user, map[string]any{"payment_ref": "final-pay"})
	require.Equal(t, http.StatusOK, code, "%v", body)

	var result domain.SaleResult
	require.NoError(t, tc.GetWorkflow(ctx, domain.SaleWorkflowID(sale.ID), "").Get(ctx, &result))

	n, err := rdb.Exists(ctx, redisgateway.SaleKeys(sale.ID).All()...).Result()
	require.NoError(t, err)
	require.Zero(t, n, "the sale's Redis keys are gone")

	raw, err := st.LatestReport(ctx, sale.ID)
	require.NoError(t, err)
	var rep domain.ReconciliationReport
	require.NoError(t, json.Unmarshal(raw, &rep))
	require.True(t, rep.Consistent, "%s", raw)
	require.Empty(t, rep.Discrepancies)
	require.EqualValues(t, 1, rep.Orders[string(domain.StatusPaid)])
	require.EqualValues(t, 2, rep.DBStock)
	var final bool
	require.NoError(t, st.DB.QueryRowContext(ctx, "SELECT final FROM reconciliation_reports WHERE sale_id = ? ORDER BY id DESC LIMIT 1", sale.ID).Scan(&final))
	require.True(t, final, "the last report is the final one")
}

// A PENDING_PAYMENT order whose workflow an operator terminated keeps the
// sale from tearing down: the drain finds the live reservation without a
// workflow, releases it (its pay_by has passed), and only then reconciles
// for the last time and tears down.
func TestSaleWaitsForAReservationWithoutWorkflow(t *testing.T) {
	ctx := testCtx(t, 3*time.Minute)
	st, rdb, tc := testenv.MustStore(t), testenv.MustRedis(t), testenv.MustTemporal(t)
	queue := newQueue("closed-drain")
	s := MustStackOn(t, queue, nil)
	rb := MustRunbook(t, s.api.URL)
	sale := testenv.MustSale(t, st, 2, func(s *domain.Sale) {
		s.EndsAt = time.Now().UTC().Add(6 * time.Second)
		s.PaymentWindowSeconds = 3
	})
	MustCleanWorkflows(t, sale.ID)
	// One reconciliation as the sale opens, the next after it has ended:
	// only the drain can find the terminated workflow.
	MustStartSale(t, tc, queue, domain.SaleInput{SaleID: sale.ID, ReconcileEvery: 10 * time.Second})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rdb.Del(ctx, redisgateway.SaleKeys(sale.ID).All()...).Err(); err != nil {
			t.Logf("clean up sale %d: %v", sale.ID, err)
		}
	})
	user := testenv.UniqueUser()
	var token string
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, body := s.reserve(t, sale.ID, user, "closed-drain-1")
		if assert.Equal(c, http.StatusAccepted, code, "%v", body) {
			token = body["token"].(string)
		}
	}, 5*time.Second, 200*time.Millisecond)
	s.waitStatus(t, user, token, "PENDING_PAYMENT")
	rb.run("terminate", map[string]string{"TOKEN": token})

	var result domain.SaleResult
	require.NoError(t, tc.GetWorkflow(ctx, domain.SaleWorkflowID(sale.ID), "").Get(ctx, &result))
	r, err := st.GetReservation(ctx, token)
	require.NoError(t, err)
	require.Equal(t, domain.StatusExpired, r.Status, "released before the tear-down")
	require.NotNil(t, result.FinalReport)
	require.True(t, result.FinalReport.Consistent, "%+v", result.FinalReport)
	require.EqualValues(t, 1, result.FinalReport.Orders[string(domain.StatusExpired)])
	require.EqualValues(t, 2, result.FinalReport.DBStock)
}
