package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	tworker "go.temporal.io/sdk/worker"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/reconcile"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/temporalgateway"
	"github.com/seckill/seckill/workflows"
)

// signalRecorder is a SaleSignaller's Signal that records each tick's
// signals and fails the sales in fail. The signaller sends signals in
// parallel, so the record is locked.
type signalRecorder struct {
	mu   sync.Mutex
	got  []int64
	fail map[int64]bool
}

func (r *signalRecorder) signal(_ context.Context, id int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail[id] {
		return errors.New("temporal unavailable")
	}
	r.got = append(r.got, id)
	return nil
}

// take answers the tick's signals, sorted, and clears them.
func (r *signalRecorder) take() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := slices.Clone(r.got)
	slices.Sort(got)
	r.got = r.got[:0]
	return got
}

// liveSale is an open, warmed sale on Redis live at now.
func liveSale(id int64, now time.Time) *domain.Sale {
	return &domain.Sale{ID: id, Warmed: true, Mode: domain.ModeRedis, Control: domain.ControlActive,
		StartsAt: now.Add(-time.Hour), EndsAt: now.Add(time.Hour)}
}

func mustSignaller(t *testing.T, rdb *redisgateway.Client, open *[]*domain.Sale, rec *signalRecorder) *SaleSignaller {
	t.Helper()
	return &SaleSignaller{Redis: rdb, Signal: rec.signal, Logger: slog.New(slog.DiscardHandler),
		Every: 5 * time.Second, Period: time.Minute, FullEvery: time.Minute,
		OpenSales: func(context.Context) ([]*domain.Sale, error) { return *open, nil }}
}

// The feed's changes are signalled within a tick, then at most once a
// period per sale however many notes come; a change within the period is
// signalled when it is over. A sale off Redis is signalled once when first
// seen so; an ended sale never; a failed signal is sent again next tick.
func TestSaleSignallerSignalsChangesOncePerPeriod(t *testing.T) {
	raw := testenv.MustRedis(t)
	rdb := redisgateway.NewClient(raw)
	st := testenv.MustStore(t)
	ctx := testCtx(t)
	var ids [5]int64
	for i := range ids {
		ids[i] = testenv.MustSale(t, st, 1).ID
		// A run before this one, on a fresh database, had these ids.
		require.NoError(t, raw.ZRem(ctx, redisgateway.ChangesKey, ids[i]).Err())
	}
	t0 := time.Now()
	a, b, c, db, ended := ids[0], ids[1], ids[2], ids[3], ids[4]
	open := []*domain.Sale{liveSale(a, t0), liveSale(b, t0), liveSale(c, t0), liveSale(db, t0), liveSale(ended, t0)}
	open[3].Mode = domain.ModeDatabase
	open[4].EndsAt = t0.Add(-time.Second)
	require.NoError(t, rdb.WriteSignalMark(ctx, t0)) // the fleet read the feed just now: no full pass
	rec := &signalRecorder{fail: map[int64]bool{}}
	s := mustSignaller(t, rdb, &open, rec)
	tick := func(at time.Duration) []int64 {
		t.Helper()
		require.NoError(t, s.Once(ctx, t0.Add(at)))
		return rec.take()
	}
	note := func(id int64, at time.Duration) { require.NoError(t, rdb.WriteChange(ctx, id, t0.Add(at))) }

	require.Equal(t, []int64{db}, tick(0), "the sale off Redis, first seen")
	note(a, time.Second)
	note(ended, time.Second)
	require.Equal(t, []int64{a}, tick(5*time.Second))
	note(a, 6*time.Second)
	note(a, 7*time.Second)
	note(b, 8*time.Second)
	require.Equal(t, []int64{b}, tick(10*time.Second), "a was signalled 5 s ago: owed")
	for at := 15 * time.Second; at < 65*time.Second; at += 5 * time.Second {
		require.Empty(t, tick(at), "at %s", at)
	}
	require.Equal(t, []int64{a}, tick(65*time.Second), "a's owed change, once, a period after its signal")
	require.Empty(t, tick(70*time.Second))

	rec.fail[c] = true
	note(c, 71*time.Second)
	require.Error(t, s.Once(ctx, t0.Add(75*time.Second)))
	rec.take()
	rec.fail[c] = false
	require.Equal(t, []int64{c}, tick(80*time.Second), "the failed signal, again")
	require.Empty(t, tick(85*time.Second))
}

// A signaller that finds the fleet's last read of the feed older than the
// feed keeps notes (or none recorded) signals every live sale once,
// spread over the full pass; so does one that sees Redis's identity
// change.
func TestSaleSignallerSignalsEverySaleWhenNotesMayBeLost(t *testing.T) {
	rdb := redisgateway.NewClient(testenv.MustRedis(t))
	// Ids past this package's sales: the feed names none of them.
	base := testenv.MustSale(t, testenv.MustStore(t), 1).ID + 1_000_000
	ctx := testCtx(t)
	t0 := time.Now()
	var open []*domain.Sale
	for i := range int64(240) {
		open = append(open, liveSale(base+i, t0))
	}
	require.NoError(t, rdb.WriteSignalMark(ctx, t0.Add(-redisgateway.ChangesKeep-time.Minute)))
	rec := &signalRecorder{}
	s := mustSignaller(t, rdb, &open, rec)
	pass := func(from time.Duration) {
		t.Helper()
		counts := map[int64]int{}
		for i := range 12 { // FullEvery / Every
			require.NoError(t, s.Once(ctx, t0.Add(from+time.Duration(i)*5*time.Second)))
			got := rec.take()
			require.Less(t, len(got), 60, "a share of the sales a tick, not all")
			for _, id := range got {
				counts[id]++
			}
		}
		require.Len(t, counts, len(open), "every live sale signalled")
		for id, n := range counts {
			require.Equal(t, 1, n, "sale %d signalled once", id)
		}
		require.NoError(t, s.Once(ctx, t0.Add(from+time.Minute)))
		require.Empty(t, rec.take(), "the pass is over")
	}
	pass(0)
	mark, ok, err := rdb.ReadSignalMark(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.False(t, mark.Before(t0), "each tick records the fleet's read")

	s.identity = "a Redis that went" // as after a failover
	pass(2 * time.Minute)
}

// A full pass signals the sales open when it began; a sale opened after
// it (a marketplace's wave of creations) notes its changes where the
// signaller reads them, so only a note of its own has it signalled.
func TestSaleSignallerFullPassLeavesTheSalesOpenedAfterIt(t *testing.T) {
	raw := testenv.MustRedis(t)
	rdb := redisgateway.NewClient(raw)
	// Ids past this package's sales and the other pass test's.
	base := testenv.MustSale(t, testenv.MustStore(t), 1).ID + 2_000_000
	ctx := testCtx(t)
	t0 := time.Now()
	var open []*domain.Sale
	for i := range int64(240) {
		open = append(open, liveSale(base+i, t0))
	}
	before, after := open[:120:120], open[120:]
	open = before
	require.NoError(t, raw.Del(ctx, redisgateway.SignalledKey).Err()) // a fresh Redis: no mark
	rec := &signalRecorder{}
	s := mustSignaller(t, rdb, &open, rec)
	counts := map[int64]int{}
	for i := range 12 { // FullEvery / Every
		if i == 1 {
			open = append(before, after...) // created and opened once the pass began
		}
		require.NoError(t, s.Once(ctx, t0.Add(time.Duration(i)*5*time.Second)))
		for _, id := range rec.take() {
			counts[id]++
		}
	}
	for _, sale := range before {
		require.Equal(t, 1, counts[sale.ID], "sale %d, open when the pass began, signalled once", sale.ID)
	}
	for _, sale := range after {
		require.Zero(t, counts[sale.ID], "sale %d, opened after the pass began", sale.ID)
	}
	require.NoError(t, rdb.WriteChange(ctx, after[0].ID, t0.Add(61*time.Second)))
	require.NoError(t, s.Once(ctx, t0.Add(65*time.Second)))
	require.Equal(t, []int64{after[0].ID}, rec.take(), "its own note")
}

// scheduled counts the sale workflow's events: activities of the type
// scheduled and signals received.
func scheduled(t *testing.T, tc client.Client, saleID int64, activity string) (acts, signals, events int) {
	t.Helper()
	iter := tc.GetWorkflowHistory(testCtx(t), domain.SaleWorkflowID(saleID), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		ev, err := iter.Next()
		require.NoError(t, err)
		events++
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == activity {
			acts++
		}
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED {
			signals++
		}
	}
	return acts, signals, events
}

// stillFor waits (at most a minute) until the sale workflow's history has
// not grown for d, and answers scheduled's counts then.
func stillFor(t *testing.T, tc client.Client, saleID int64, activity string, d time.Duration) (acts, signals, events int) {
	t.Helper()
	last, since := -1, time.Now()
	for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		acts, signals, events = scheduled(t, tc, saleID, activity)
		if events != last {
			last, since = events, time.Now()
		} else if time.Since(since) >= d {
			return acts, signals, events
		}
	}
	t.Fatalf("sale %d's workflow history kept growing for a minute (%d events)", saleID, events)
	return 0, 0, 0
}

// With a real sale workflow: a quiet live sale is not reconciled; noted
// ten times a second for three periods, it is signalled and reconciled
// about once a period, not once a note; once the notes stop, its
// workflow's history stops growing.
func TestSaleSignallerWakesTheSaleWorkflowOncePerPeriod(t *testing.T) {
	tc := testenv.MustTemporal(t)
	st := testenv.MustStore(t)
	rdb := redisgateway.NewClient(testenv.MustRedis(t))
	queue := fmt.Sprintf("seckill-test-signal-%d", time.Now().UnixNano())
	w := tworker.New(tc, queue, tworker.Options{})
	workflows.RegisterSale(w, &activities.SaleActivities{Store: st, Redis: rdb, Temporal: tc,
		Reconciler: &reconcile.Reconciler{Store: st, Redis: rdb, Temporal: tc, Gap: 20 * time.Millisecond}})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	sale := testenv.MustSale(t, st, 2)
	require.NoError(t, temporalgateway.StartSale(testCtx(t), tc, queue, domain.SaleInput{SaleID: sale.ID, ReconcileEvery: 2 * time.Second}))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = tc.TerminateWorkflow(ctx, domain.SaleWorkflowID(sale.ID), "", "test over") // or ended
	})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		v, err := tc.QueryWorkflow(testCtx(t), domain.SaleWorkflowID(sale.ID), "", domain.QuerySalePhase)
		if assert.NoError(c, err) {
			var phase string
			assert.NoError(c, v.Get(&phase))
			assert.Equal(c, string(domain.PhaseLive), phase)
		}
	}, time.Minute, 200*time.Millisecond, "the sale's workflow in its live phase")
	time.Sleep(3 * time.Second) // over a period
	n, _, _ := scheduled(t, tc, sale.ID, "ReconcileSale")
	require.Zero(t, n, "a quiet live sale is not reconciled")

	ctx, stop := context.WithCancel(testCtx(t))
	s := &SaleSignaller{Redis: rdb, Logger: slog.New(slog.DiscardHandler), Every: 250 * time.Millisecond, Period: 2 * time.Second,
		Signal: func(ctx context.Context, id int64) error { return temporalgateway.SignalSaleChanged(ctx, tc, id) },
		OpenSales: func(ctx context.Context) ([]*domain.Sale, error) {
			got, err := st.GetSale(ctx, sale.ID)
			return []*domain.Sale{got}, err
		}}
	require.NoError(t, rdb.WriteSignalMark(ctx, time.Now())) // no full pass
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx)
	}()
	defer func() { stop(); <-done }()
	for end := time.Now().Add(6 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		require.NoError(t, rdb.WriteChange(ctx, sale.ID, time.Now()))
	}
	// The owed change of the last period is reconciled a period after the
	// reconciliation before it (later on a loaded host).
	reconciles, signals, events := stillFor(t, tc, sale.ID, "ReconcileSale", 3*time.Second)
	t.Logf("60 notes over 6 s: %d signals, %d reconciliations", signals, reconciles)
	require.GreaterOrEqual(t, signals, 3)
	require.LessOrEqual(t, signals, 5, "about one signal a period")
	require.GreaterOrEqual(t, reconciles, 3)
	require.LessOrEqual(t, reconciles, 5, "about one reconciliation a period")

	time.Sleep(5 * time.Second)
	_, _, quiet := scheduled(t, tc, sale.ID, "ReconcileSale")
	require.Equal(t, events, quiet, "quiet again: no event")
}
