package workflows

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/histories"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/reconcile"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/temporalgateway"
)

// recordTag names the recording: the files TestReplay reads are
// <workflow>_<branch>@<tag>.json. Record new histories (never over old ones)
// after a deliberate, versioned change with
//
//	SECKILL_RECORD_HISTORIES=<tag> go test -count=1 -run TestRecordHistories ./workflows/
//
// then list them in a manifest of their own, never editing a committed one
// (cd workflows/testdata && sha256sum *@<tag>.json > histories@<tag>.sha256).
// Without the variable the recorder writes to a temporary folder: it runs in
// every test run and replays what it just recorded, so it cannot rot.
var recordTagRe = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)

// recording is one branch to record: run drives the workflow through it
// and returns the execution whose (closed) history is saved.
type recording struct {
	name string
	run  func(s *stack) (workflowID, runID string)
}

// TestRecordHistories drives OrderWorkflow through every branch it has and
// SaleWorkflow through its life and a continue-as-new, saves their
// histories and replays them against the current code.
func TestRecordHistories(t *testing.T) {
	dir, tag := t.TempDir(), "tmp"
	if v := os.Getenv("SECKILL_RECORD_HISTORIES"); v != "" {
		require.Regexp(t, recordTagRe, v, "SECKILL_RECORD_HISTORIES is the recording's tag")
		dir, tag = historyDir, v
	}
	base := MustStack(t)
	for _, r := range recordings() {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			s := *base
			s.t = t
			path := filepath.Join(dir, r.name+"@"+tag+".json")
			_, err := os.Stat(path)
			require.True(t, os.IsNotExist(err), "%s exists; histories are append-only: record with a new tag", path)
			wid, runID := r.run(&s)
			s.saveHistory(path, wid, runID)
			require.NoError(t, newReplayer().ReplayWorkflowHistoryFromJSONFile(nil, path), "replay of the %s history just recorded", r.name)
		})
	}
}

func recordings() []recording {
	return []recording{
		{orderHistoryPrefix + "paid", recordPaid},
		{orderHistoryPrefix + "expired", recordExpired},
		{orderHistoryPrefix + "cancel_pending", recordCancelPending},
		{orderHistoryPrefix + "operator_expire", recordOperatorExpire},
		{orderHistoryPrefix + "cancel_queued", recordCancelQueued},
		{orderHistoryPrefix + "paid_while_redis_away", recordPaidWhileRedisAway},
		{orderHistoryPrefix + "pay_races_timer", recordPayRacesTimer},
		{orderHistoryPrefix + "failed_no_stock", recordFailedNoStock},
		{orderHistoryPrefix + "failed_already_purchased", recordFailedAlreadyPurchased},
		{orderHistoryPrefix + "refused_at_record", recordRefusedAtRecord},
		{orderHistoryPrefix + "database_path", recordDatabasePath},
		{orderHistoryPrefix + "rerun_pending", recordRerunPending},
		{orderHistoryPrefix + "rerun_ended", recordRerunEnded},
		{saleHistoryPrefix + "life", recordSaleLife},
		{saleHistoryPrefix + "continue_as_new", recordSaleContinueAsNew},
		{saleHistoryPrefix + "quiet", recordSaleQuiet},
		{saleHistoryPrefix + "signalled", recordSaleSignalled},
	}
}

func recordPaid(s *stack) (string, string) {
	sale := s.MustWarmSale(s.t, 1, 10*time.Minute, 1)
	in := s.MustOrder(sale, testenv.UniqueUser(), "req-rec-paid")
	s.waitStatus(in.Token, domain.StatusPendingPayment)
	s.mustUpdate(in.Token, domain.UpdatePay, domain.PayRequest{PaymentRef: "rec-pay"}, domain.StatusPaid)
	require.Equal(s.t, domain.StatusPaid, s.result(in.Token).Status)
	return domain.OrderWorkflowID(in.Token), ""
}

func recordExpired(s *stack) (string, string) {
	sale := s.MustWarmSale(s.t, 1, time.Second, 1)
	in := s.MustOrder(sale, testenv.UniqueUser(), "req-rec-expired")
	require.Equal(s.t, domain.StatusExpired, s.result(in.Token).Status)
	return domain.OrderWorkflowID(in.Token), ""
}

func recordCancelPending(s *stack) (string, string) {
	sale := s.MustWarmSale(s.t, 1, 10*time.Minute, 1)
	in := s.MustOrder(sale, testenv.UniqueUser(), "req-rec-cancel")
	s.waitStatus(in.Token, domain.StatusPendingPayment)
	s.mustUpdate(in.Token, domain.UpdateCancel, domain.CancelRequest{Reason: "record"}, domain.StatusCancelled)
	require.Equal(s.t, domain.StatusCancelled, s.result(in.Token).Status)
	return domain.OrderWorkflowID(in.Token), ""
}

func recordOperatorExpire(s *stack) (string, string) {
	sale := s.MustWarmSale(s.t, 1, 10*time.Minute, 1)
	in := s.MustOrder(sale, testenv.UniqueUser(), "req-rec-opexpire")
	s.waitStatus(in.Token, domain.StatusPendingPayment)
	s.mustUpdate(in.Token, domain.UpdateExpire, domain.CancelRequest{Reason: "operator"}, domain.StatusExpired)
	require.Equal(s.t, domain.StatusExpired, s.result(in.Token).Status)
	return domain.OrderWorkflowID(in.Token), ""
}

func recordPaidWhileRedisAway(s *stack) (string, string) {
	away, proxy := mustRedisAwayStack(s.t)
	in, st, err := away.payWhileRedisAway(proxy)
	require.NoError(s.t, err)
	require.Equal(s.t, domain.StatusPaid, st.Status)
	require.Equal(s.t, domain.StatusPaid, away.result(in.Token).Status)
	return domain.OrderWorkflowID(in.Token), ""
}

func recordFailedNoStock(s *stack) (string, string) {
	sale := s.MustWarmSale(s.t, 1, 10*time.Minute, 1)
	require.NoError(s.t, s.st.AdjustStock(ctxT(s.t, 10*time.Second), sale.ID, -1, fmt.Sprintf("rec-withdraw-%d", sale.ID)))
	// Recorded without its unit, its order finds none: the placement's
	// no_stock branch (a hold recorded now is refused at its record,
	// recordRefusedAtRecord).
	in := s.MustLegacyOrder(sale, testenv.UniqueUser(), "req-rec-nostock")
	st := s.result(in.Token)
	require.Equal(s.t, domain.StatusFailed, st.Status)
	require.Equal(s.t, domain.FailReasonNoStock, st.FailReason)
	return domain.OrderWorkflowID(in.Token), ""
}

// recordRefusedAtRecord: a hold the database refuses when its workflow
// records it ends FAILED there, and the run releases its Redis side.
func recordRefusedAtRecord(s *stack) (string, string) {
	sale := s.MustWarmSale(s.t, 1, 10*time.Minute, 1)
	require.NoError(s.t, s.st.AdjustStock(ctxT(s.t, 10*time.Second), sale.ID, -1, fmt.Sprintf("rec-refuse-%d", sale.ID)))
	in := s.MustOrder(sale, testenv.UniqueUser(), "req-rec-refused")
	st := s.result(in.Token)
	require.Equal(s.t, domain.StatusFailed, st.Status)
	require.Equal(s.t, domain.FailReasonRefusedSoldOut, st.FailReason)
	return domain.OrderWorkflowID(in.Token), ""
}

func recordFailedAlreadyPurchased(s *stack) (string, string) {
	// The user's live order holds the database's one live slot; a
	// second reservation of theirs (here without a Redis hold, as
	// after a lost buyer mark) is refused when its workflow records it.
	sale := s.MustWarmSale(s.t, 2, 10*time.Minute, 2)
	user := testenv.UniqueUser()
	first := s.MustOrder(sale, user, "req-rec-ap-1")
	s.waitStatus(first.Token, domain.StatusPendingPayment)
	second := domain.OrderInput{
		Token: domain.DeriveToken(tokenKey, sale.ID, user, "req-rec-ap-2"), SaleID: sale.ID, UserID: user,
		RequestID: "req-rec-ap-2", Path: domain.PathRedis,
	}
	require.NoError(s.t, temporalgateway.Start(ctxT(s.t, 10*time.Second), s.c, s.queue, second))
	st := s.result(second.Token)
	require.Equal(s.t, domain.StatusFailed, st.Status)
	require.Equal(s.t, domain.FailReasonRefusedHolder, st.FailReason)
	s.mustUpdate(first.Token, domain.UpdateCancel, domain.CancelRequest{Reason: "cleanup"}, domain.StatusCancelled)
	return domain.OrderWorkflowID(second.Token), ""
}

func recordDatabasePath(s *stack) (string, string) {
	ctx := ctxT(s.t, 30*time.Second)
	sale := testenv.MustSale(s.t, s.st, 1)
	require.NoError(s.t, s.st.RecordRedisStock(ctx, sale.ID, 1, time.Now()))
	_, err := s.st.SwitchToDatabase(ctx, sale.ID, 0)
	require.NoError(s.t, err)
	user := testenv.UniqueUser()
	in := domain.OrderInput{
		Token: domain.DeriveToken(tokenKey, sale.ID, user, "req-rec-db"), SaleID: sale.ID, UserID: user,
		RequestID: "req-rec-db", Path: domain.PathDatabase, Deducted: true,
	}
	res, _, err := s.st.ReserveInDB(ctx, in)
	require.NoError(s.t, err)
	require.Equal(s.t, domain.StatusPendingPayment, res.Status)
	require.NoError(s.t, temporalgateway.Start(ctx, s.c, s.queue, in))
	s.waitWorkflowStatus(in.Token, domain.StatusPendingPayment)
	s.mustUpdate(in.Token, domain.UpdatePay, domain.PayRequest{PaymentRef: "rec-db-pay"}, domain.StatusPaid)
	require.Equal(s.t, domain.StatusPaid, s.result(in.Token).Status)
	return domain.OrderWorkflowID(in.Token), ""
}

func recordRerunPending(s *stack) (string, string) {
	// An operator terminated a pending order's workflow; a new run
	// adopts the order and waits for its payment.
	sale := s.MustWarmSale(s.t, 1, 10*time.Minute, 1)
	in := s.MustOrder(sale, testenv.UniqueUser(), "req-rec-rerun")
	s.waitStatus(in.Token, domain.StatusPendingPayment)
	require.NoError(s.t, s.c.TerminateWorkflow(ctxT(s.t, 10*time.Second), domain.OrderWorkflowID(in.Token), "", "record rerun"))
	require.NoError(s.t, temporalgateway.Start(ctxT(s.t, 10*time.Second), s.c, s.queue, in))
	s.waitWorkflowStatus(in.Token, domain.StatusPendingPayment)
	s.mustUpdate(in.Token, domain.UpdatePay, domain.PayRequest{PaymentRef: "rec-rerun-pay"}, domain.StatusPaid)
	require.Equal(s.t, domain.StatusPaid, s.result(in.Token).Status)
	return domain.OrderWorkflowID(in.Token), ""
}

func recordRerunEnded(s *stack) (string, string) {
	// The run before stopped between the database's release and
	// Redis's: the rerun finds the end and finishes Redis.
	sale := s.MustWarmSale(s.t, 1, 10*time.Minute, 1)
	in := s.MustOrder(sale, testenv.UniqueUser(), "req-rec-rerun-end")
	s.waitStatus(in.Token, domain.StatusPendingPayment)
	require.NoError(s.t, s.c.TerminateWorkflow(ctxT(s.t, 10*time.Second), domain.OrderWorkflowID(in.Token), "", "record rerun"))
	_, err := s.st.ReleaseOrder(ctxT(s.t, 10*time.Second), in.Token, domain.StatusExpired)
	require.NoError(s.t, err)
	require.NoError(s.t, temporalgateway.Start(ctxT(s.t, 10*time.Second), s.c, s.queue, in))
	require.Equal(s.t, domain.StatusExpired, s.result(in.Token).Status)
	s.requireConsistent(sale)
	return domain.OrderWorkflowID(in.Token), ""
}

// mustUpdate sends an update and requires its answer's status.
func (s *stack) mustUpdate(token, name string, arg any, want domain.ReservationStatus) {
	s.t.Helper()
	st, err := s.update(token, name, fmt.Sprintf("%s-%d", name, time.Now().UnixNano()), arg)
	require.NoError(s.t, err, "%s of %s", name, token)
	require.Equal(s.t, want, st.Status)
}

// startWorker runs an order worker on a task queue of its own; register
// may override activities.
func (s *stack) startWorker(queue string, register func(worker.Worker)) {
	s.t.Helper()
	w := worker.New(s.c, queue, worker.Options{})
	Register(w, &activities.Activities{Store: s.st, Redis: redisgateway.NewClient(s.rdb)})
	if register != nil {
		register(w)
	}
	require.NoError(s.t, w.Start())
	s.t.Cleanup(w.Stop)
}

// recordCancelQueued: the cancel arrives before any worker ran the
// workflow, so the first workflow task carries it and the reservation ends
// without an order.
func recordCancelQueued(s *stack) (string, string) {
	queue := s.queue + "-cq"
	sale := s.MustWarmSale(s.t, 1, 10*time.Minute, 1)
	user := testenv.UniqueUser()
	outcome, token := s.reserve(sale, user, "req-rec-cq")
	require.Equal(s.t, redisgateway.OutcomeOK, outcome)
	in := domain.OrderInput{Token: token, SaleID: sale.ID, UserID: user, RequestID: "req-rec-cq", Path: domain.PathRedis}
	require.NoError(s.t, temporalgateway.Start(ctxT(s.t, 10*time.Second), s.c, queue, in))
	type answer struct {
		st  domain.OrderState
		err error
	}
	done := make(chan answer, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		h, err := s.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
			WorkflowID: domain.OrderWorkflowID(token), UpdateName: domain.UpdateCancel, UpdateID: "rec-cq",
			Args: []any{domain.CancelRequest{Reason: "record"}}, WaitForStage: client.WorkflowUpdateStageCompleted,
		})
		var st domain.OrderState
		if err == nil {
			err = h.Get(ctx, &st)
		}
		done <- answer{st, err}
	}()
	// Let the update reach the server before a worker takes the first task.
	time.Sleep(time.Second)
	s.startWorker(queue, nil)
	got := <-done
	require.NoError(s.t, got.err)
	require.Equal(s.t, domain.StatusCancelled, got.st.Status)
	st := s.result(token)
	require.Equal(s.t, domain.StatusCancelled, st.Status)
	require.Empty(s.t, st.OrderNo, "cancelled while queued: no order")
	b := s.requireConsistent(sale)
	require.Equal(s.t, int64(1), b.redisStock, "the hold is back on sale")
	return domain.OrderWorkflowID(token), ""
}

// recordPayRacesTimer: a payment accepted before pay_by is still being
// recorded when the timer fires; the payment wins. The test holds the
// reservation's row lock, so the payment's MarkPaid waits on it (and is
// retried once, after its 8s database timeout) well past pay_by.
func recordPayRacesTimer(s *stack) (string, string) {
	const window = 3 * time.Second
	sale := s.MustWarmSale(s.t, 1, window, 1)
	in := s.MustOrder(sale, testenv.UniqueUser(), "req-rec-race")
	s.waitStatus(in.Token, domain.StatusPendingPayment)
	s.waitWorkflowStatus(in.Token, domain.StatusPendingPayment)
	r, err := s.st.GetReservation(ctxT(s.t, 5*time.Second), in.Token)
	require.NoError(s.t, err)
	require.NotNil(s.t, r.PayBy)

	ctx := ctxT(s.t, 30*time.Second)
	tx, err := s.st.DB.BeginTx(ctx, nil)
	require.NoError(s.t, err)
	var token string
	require.NoError(s.t, tx.QueryRowContext(ctx, "SELECT token FROM reservations WHERE token = ? FOR UPDATE", in.Token).Scan(&token))
	paid := make(chan error, 1)
	go func() {
		st, err := s.update(in.Token, domain.UpdatePay, "rec-race-pay", domain.PayRequest{PaymentRef: "rec-race-pay"})
		if err == nil && st.Status != domain.StatusPaid {
			err = fmt.Errorf("paid answered %s", st.Status)
		}
		paid <- err
	}()
	// A local activity keeps its workflow task open, and a timer that fires
	// meanwhile is dropped if that task cancels it; past 80% of the task
	// timeout (10s) the SDK heartbeats the task, and the fired timer comes
	// in the next one, while the payment is still being recorded.
	time.Sleep(max(time.Until(*r.PayBy), 0) + 7*time.Second)
	require.NoError(s.t, tx.Rollback())
	require.NoError(s.t, <-paid)
	require.Equal(s.t, domain.StatusPaid, s.result(in.Token).Status)
	// The race happened: the timer fired before the payment's marker.
	var timerFired, paidAfter bool
	for _, ev := range s.history(domain.OrderWorkflowID(in.Token), "") {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_TIMER_FIRED:
			timerFired = true
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			if timerFired {
				paidAfter = true
			}
		}
	}
	if !(timerFired && paidAfter) {
		for _, ev := range s.history(domain.OrderWorkflowID(in.Token), "") {
			s.t.Log(ev.GetEventId(), ev.GetEventType())
		}
	}
	require.True(s.t, timerFired && paidAfter, "the timer fired while the payment was recorded")
	return domain.OrderWorkflowID(in.Token), ""
}

// waitWorkflowStatus polls the workflow's status query.
func (s *stack) waitWorkflowStatus(token string, want domain.ReservationStatus) {
	s.t.Helper()
	require.EventuallyWithT(s.t, func(c *assert.CollectT) {
		v, err := s.c.QueryWorkflow(ctxT(s.t, 10*time.Second), domain.OrderWorkflowID(token), "", domain.QueryStatus)
		if !assert.NoError(c, err) {
			return
		}
		var st domain.OrderState
		assert.NoError(c, v.Get(&st))
		assert.Equal(c, want, st.Status)
	}, 30*time.Second, 50*time.Millisecond, "workflow of %s never reached %s", token, want)
}

// saleWorker runs the sale workflow on a task queue of its own.
func (s *stack) saleWorker(queue string) { s.saleWorkerSlots(queue, nil) }

// saleWorkerSlots is saleWorker with its reconciliations bounded by slots.
func (s *stack) saleWorkerSlots(queue string, slots *activities.ReconcileSlots) {
	s.t.Helper()
	w := worker.New(s.c, queue, worker.Options{})
	RegisterSale(w, &activities.SaleActivities{
		Store: s.st, Redis: redisgateway.NewClient(s.rdb), Temporal: s.c, Slots: slots,
		Reconciler: &reconcile.Reconciler{Store: s.st, Redis: redisgateway.NewClient(s.rdb), Temporal: s.c, Gap: 20 * time.Millisecond},
	})
	require.NoError(s.t, w.Start())
	s.t.Cleanup(w.Stop)
}

// recordSaleLife: warm-up ahead of the opening, reconciliation while live,
// the wait for the payment window and for a running order, the final
// report and the tear-down.
func recordSaleLife(s *stack) (string, string) {
	queue := s.queue + "-sale"
	s.saleWorker(queue)
	now := time.Now().UTC()
	sale := testenv.MustSale(s.t, s.st, 2, func(x *domain.Sale) {
		x.StartsAt = now.Add(3 * time.Second)
		x.EndsAt = now.Add(6 * time.Second)
		x.PaymentWindowSeconds = 1
	})
	// An order workflow of the sale that nobody runs: the sale waits for it.
	orphan := domain.OrderInput{Token: fmt.Sprintf("rec-orphan-%d", sale.ID), SaleID: sale.ID, UserID: testenv.UniqueUser(), RequestID: "req-rec-orphan", Path: domain.PathRedis}
	require.NoError(s.t, temporalgateway.Start(ctxT(s.t, 10*time.Second), s.c, queue+"-nobody", orphan))
	in := domain.SaleInput{SaleID: sale.ID, WarmLead: 2 * time.Second, ReconcileEvery: time.Second, RetireMargin: time.Second}
	run, err := s.c.ExecuteWorkflow(ctxT(s.t, 10*time.Second), client.StartWorkflowOptions{
		ID: domain.SaleWorkflowID(sale.ID), TaskQueue: queue,
	}, domain.SaleWorkflowName, in)
	require.NoError(s.t, err)
	// Once the payment window has closed the sale counts running orders
	// and finds the orphan; end it so the sale can finish.
	time.Sleep(time.Until(now.Add(8 * time.Second)))
	require.EventuallyWithT(s.t, func(c *assert.CollectT) {
		v, err := s.c.QueryWorkflow(ctxT(s.t, 10*time.Second), run.GetID(), "", domain.QuerySalePhase)
		if !assert.NoError(c, err) {
			return
		}
		var phase string
		assert.NoError(c, v.Get(&phase))
		assert.Equal(c, domain.PhaseDraining, phase)
	}, 30*time.Second, 200*time.Millisecond)
	time.Sleep(time.Second)
	require.NoError(s.t, s.c.TerminateWorkflow(ctxT(s.t, 10*time.Second), domain.OrderWorkflowID(orphan.Token), "", "record sale life"))
	var result domain.SaleResult
	require.NoError(s.t, run.Get(ctxT(s.t, 60*time.Second), &result))
	require.NotNil(s.t, result.FinalReport)
	return run.GetID(), run.GetRunID()
}

// recordSaleQuiet: a live sale nobody buys is left asleep until it ends
// (before first-change: reconciled at its first look; before
// wake-on-change: looked at, less and less often); the end gets its final
// reconciliation.
func recordSaleQuiet(s *stack) (string, string) {
	queue := s.queue + "-quiet"
	s.saleWorker(queue)
	now := time.Now().UTC()
	sale := testenv.MustSale(s.t, s.st, 2, func(x *domain.Sale) {
		x.StartsAt = now.Add(-time.Second)
		x.EndsAt = now.Add(20 * time.Second)
		x.PaymentWindowSeconds = 1
	})
	in := domain.SaleInput{SaleID: sale.ID, ReconcileEvery: time.Second, RetireMargin: time.Second}
	run, err := s.c.ExecuteWorkflow(ctxT(s.t, 10*time.Second), client.StartWorkflowOptions{
		ID: domain.SaleWorkflowID(sale.ID), TaskQueue: queue,
	}, domain.SaleWorkflowName, in)
	require.NoError(s.t, err)
	var result domain.SaleResult
	require.NoError(s.t, run.Get(ctxT(s.t, 90*time.Second), &result))
	require.NotNil(s.t, result.FinalReport)
	var loads, reconciles int
	for _, ev := range s.history(run.GetID(), run.GetRunID()) {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			switch a.GetActivityType().GetName() {
			case "LoadSale":
				loads++
			case "ReconcileSale":
				reconciles++
			}
		}
	}
	require.Equal(s.t, 1, reconciles, "the final reconciliation only (%d loads)", loads)
	return run.GetID(), run.GetRunID()
}

// recordSaleSignalled: a live sale sleeps until it is signalled,
// reconciles the change, takes a burst of signals as one change
// reconciled a period after the last, ignores a signal once it has ended,
// and gets its final reconciliation.
func recordSaleSignalled(s *stack) (string, string) {
	queue := s.queue + "-signalled"
	s.saleWorker(queue)
	now := time.Now().UTC()
	sale := testenv.MustSale(s.t, s.st, 2, func(x *domain.Sale) {
		x.StartsAt = now.Add(-time.Second)
		x.EndsAt = now.Add(15 * time.Second)
		x.PaymentWindowSeconds = 3
	})
	run := s.startSale(queue, domain.SaleInput{SaleID: sale.ID, ReconcileEvery: 2 * time.Second, RetireMargin: time.Second})
	signal := func() {
		require.NoError(s.t, temporalgateway.SignalSaleChanged(ctxT(s.t, 10*time.Second), s.c, sale.ID))
	}
	s.waitSettled(run, 0)
	signal()
	s.waitSettled(run, 1)
	for range 5 {
		signal()
	}
	s.waitSettled(run, 2)
	// Ended, in its payment window: the signal changes nothing.
	time.Sleep(time.Until(sale.EndsAt.Add(500 * time.Millisecond)))
	signal()
	var result domain.SaleResult
	require.NoError(s.t, run.Get(ctxT(s.t, 60*time.Second), &result))
	require.NotNil(s.t, result.FinalReport)
	require.Equal(s.t, 3, s.activityCount(run, "ReconcileSale"), "two live reconciliations and the final one")
	return run.GetID(), run.GetRunID()
}

// recordSaleContinueAsNew: a live sale reconciling as often as it can (a
// change signalled every 50 ms) continues as new once its history is long;
// the first run is recorded.
func recordSaleContinueAsNew(s *stack) (string, string) {
	queue := s.queue + "-can"
	s.saleWorker(queue)
	sale := testenv.MustSale(s.t, s.st, 2)
	// A short history limit: the branch is the same as at 2000 events
	// (sale_continue_as_new@base.json), reached in seconds.
	in := domain.SaleInput{SaleID: sale.ID, ReconcileEvery: time.Millisecond, HistoryLimit: 120}
	run, err := s.c.ExecuteWorkflow(ctxT(s.t, 10*time.Second), client.StartWorkflowOptions{
		ID: domain.SaleWorkflowID(sale.ID), TaskQueue: queue,
	}, domain.SaleWorkflowName, in)
	require.NoError(s.t, err)
	stop := make(chan struct{})
	signalled := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				signalled <- nil
				return
			case <-time.After(50 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := temporalgateway.SignalSaleChanged(ctx, s.c, sale.ID)
			cancel()
			if err != nil {
				signalled <- err
				return
			}
		}
	}()
	defer func() {
		close(stop)
		require.NoError(s.t, <-signalled)
	}()
	require.EventuallyWithT(s.t, func(c *assert.CollectT) {
		d, err := s.c.DescribeWorkflow(ctxT(s.t, 10*time.Second), run.GetID(), run.GetRunID())
		if !assert.NoError(c, err) {
			return
		}
		assert.Equal(c, enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW, d.RawResponse.GetWorkflowExecutionInfo().GetStatus())
	}, 3*time.Minute, 500*time.Millisecond, "the sale workflow never continued as new")
	s.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.c.TerminateWorkflow(ctx, run.GetID(), "", "recorded"); err != nil {
			s.t.Logf("terminate sale workflow: %v", err)
		}
	})
	return run.GetID(), run.GetRunID()
}

func (s *stack) history(workflowID, runID string) []*historypb.HistoryEvent {
	s.t.Helper()
	events, err := histories.Read(ctxT(s.t, 30*time.Second), s.c, workflowID, runID)
	require.NoError(s.t, err)
	return events
}

func (s *stack) saveHistory(path, workflowID, runID string) {
	s.t.Helper()
	hist := &historypb.History{Events: s.history(workflowID, runID)}
	for _, ev := range hist.Events {
		// A signal that arrives while a task completes the run (continue
		// as new) fails that task as unhandled, the server's rule; the
		// task runs again with the signal. Any other failure is the code's.
		cause := ev.GetWorkflowTaskFailedEventAttributes().GetCause()
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED && cause != enumspb.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND {
			require.Fail(s.t, "failed workflow task", "history of %s has a workflow task failed by %s", workflowID, cause)
		}
	}
	body, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(hist)
	require.NoError(s.t, err)
	require.NoError(s.t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(s.t, os.WriteFile(path, append(body, '\n'), 0o644))
	s.t.Logf("recorded %s (%d events)", path, len(hist.Events))
}
