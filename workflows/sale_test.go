package workflows

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/redisgateway"
)

type saleCalls struct {
	loadedAt     []time.Time
	warmedAt     []time.Time
	reconciledAt []time.Time
	finals       int
	inconsistent int // the first reports answered inconsistent
	teardownAt   time.Time
	running      int
}

// newSaleEnv runs SaleWorkflow with its activities replaced by recorders.
func newSaleEnv(t *testing.T, times activities.SaleTimes, runningChecks int) (*testsuite.TestWorkflowEnvironment, *saleCalls) {
	t.Helper()
	return newSaleEnvLoading(t, func(time.Time) activities.SaleTimes { return times }, runningChecks)
}

// newSaleEnvLoading is newSaleEnv with the sale as load answers at each
// load's time.
func newSaleEnvLoading(t *testing.T, load func(now time.Time) activities.SaleTimes, runningChecks int) (*testsuite.TestWorkflowEnvironment, *saleCalls) {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterActivity(&activities.SaleActivities{})
	calls := &saleCalls{}
	env.OnActivity(saleActs.LoadSale, mock.Anything, mock.Anything).Return(
		func(_ context.Context, _ int64) (activities.SaleTimes, error) {
			calls.loadedAt = append(calls.loadedAt, env.Now())
			return load(env.Now()), nil
		})
	env.OnActivity(saleActs.WarmupSale, mock.Anything, mock.Anything).Return(
		func(_ context.Context, _ int64) (int64, error) {
			calls.warmedAt = append(calls.warmedAt, env.Now())
			return 10, nil
		})
	env.OnActivity(saleActs.ReconcileSale, mock.Anything, mock.Anything, mock.Anything).Return(
		func(_ context.Context, saleID int64, final bool) (*domain.ReconciliationReport, error) {
			calls.reconciledAt = append(calls.reconciledAt, env.Now())
			if final {
				calls.finals++
			}
			consistent := len(calls.reconciledAt) > calls.inconsistent
			return &domain.ReconciliationReport{SaleID: saleID, Consistent: consistent}, nil
		})
	env.OnActivity(saleActs.RunningOrders, mock.Anything, mock.Anything).Return(
		func(_ context.Context, _ int64) (int64, error) {
			calls.running++
			if calls.running <= runningChecks {
				return 3, nil
			}
			return 0, nil
		})
	env.OnActivity(saleActs.TeardownSale, mock.Anything, mock.Anything).Return(
		func(_ context.Context, _ int64) error {
			calls.teardownAt = env.Now()
			return nil
		})
	return env, calls
}

func TestSaleWorkflowWarmsAheadReconcilesAndTearsDown(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	start := s.NewTestWorkflowEnvironment().Now()
	times := activities.SaleTimes{
		StartsAt:      start.Add(10 * time.Minute),
		EndsAt:        start.Add(15 * time.Minute),
		PaymentWindow: 5 * time.Minute,
	}
	env, calls := newSaleEnv(t, times, 2)
	env.SetStartTime(start)
	env.ExecuteWorkflow(SaleWorkflowV2, domain.SaleInput{SaleID: 7})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())

	require.Len(t, calls.warmedAt, 1)
	warm := calls.warmedAt[0]
	require.True(t, warm.Before(times.StartsAt), "warmed at %s, opens at %s", warm, times.StartsAt)
	require.False(t, warm.Before(times.StartsAt.Add(-domain.DefaultWarmLead)), "warmed too early: %s", warm)

	// About once a minute while live, then the final one.
	require.GreaterOrEqual(t, len(calls.reconciledAt), 5)
	live := calls.reconciledAt[:len(calls.reconciledAt)-1]
	for _, at := range live {
		require.True(t, at.After(times.StartsAt) && at.Before(times.EndsAt), "live reconciliation at %s", at)
	}
	require.Equal(t, 1, calls.finals)
	final := calls.reconciledAt[len(calls.reconciledAt)-1]
	require.False(t, final.Before(times.EndsAt.Add(times.PaymentWindow)), "final report before the payment window closed: %s", final)
	require.Equal(t, 3, calls.running, "waits while order workflows still run")
	require.False(t, calls.teardownAt.Before(final))

	var result domain.SaleResult
	require.NoError(t, env.GetWorkflowResult(&result))
	require.NotNil(t, result.FinalReport)
	require.True(t, result.FinalReport.Consistent)
}

func TestSaleWorkflowWarmsAPastSaleAtOnce(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	start := s.NewTestWorkflowEnvironment().Now()
	times := activities.SaleTimes{
		StartsAt:      start.Add(-time.Hour),
		EndsAt:        start.Add(2 * time.Minute),
		PaymentWindow: time.Minute,
	}
	env, calls := newSaleEnv(t, times, 0)
	env.SetStartTime(start)
	env.ExecuteWorkflow(SaleWorkflowV2, domain.SaleInput{SaleID: 8})
	require.NoError(t, env.GetWorkflowError())
	require.Len(t, calls.warmedAt, 1)
	require.Equal(t, start, calls.warmedAt[0])
	require.Equal(t, 1, calls.finals)
}

func TestSaleWorkflowAnswersItsLatestReport(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	start := s.NewTestWorkflowEnvironment().Now()
	times := activities.SaleTimes{StartsAt: start.Add(-time.Minute), EndsAt: start.Add(10 * time.Minute), PaymentWindow: time.Minute}
	env, _ := newSaleEnv(t, times, 0)
	env.SetStartTime(start)
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(domain.QueryReport)
		require.NoError(t, err)
		var rep *domain.ReconciliationReport
		require.NoError(t, v.Get(&rep))
		require.NotNil(t, rep)
		require.EqualValues(t, 9, rep.SaleID)
		v, err = env.QueryWorkflow(domain.QuerySalePhase)
		require.NoError(t, err)
		var phase string
		require.NoError(t, v.Get(&phase))
		require.Equal(t, domain.PhaseLive, phase)
	}, 3*time.Minute)
	env.ExecuteWorkflow(SaleWorkflowV2, domain.SaleInput{SaleID: 9})
	require.NoError(t, env.GetWorkflowError())
}

// Before its first reconciliation the report query says so, instead of a
// bare null.
func TestSaleWorkflowReportQueryBeforeTheFirstReport(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	start := s.NewTestWorkflowEnvironment().Now()
	times := activities.SaleTimes{StartsAt: start.Add(time.Hour), EndsAt: start.Add(2 * time.Hour), PaymentWindow: time.Minute}
	env, _ := newSaleEnv(t, times, 0)
	env.SetStartTime(start)
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(domain.QueryReport)
		require.NoError(t, err)
		var none domain.NoReportYet
		require.NoError(t, v.Get(&none))
		require.EqualValues(t, 11, none.SaleID)
		require.Equal(t, domain.PhaseWaiting, none.Phase)
		require.Contains(t, none.Note, "no reconciliation report yet")
	}, time.Minute)
	env.ExecuteWorkflow(SaleWorkflowV2, domain.SaleInput{SaleID: 11})
	require.NoError(t, env.GetWorkflowError())
}

// TestSaleWorkflowRetiresAfterTheMargin: once no order of the sale runs,
// the sale keeps its keys for the retire margin, then reconciles one last
// time and retires.
func TestSaleWorkflowRetiresAfterTheMargin(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	start := s.NewTestWorkflowEnvironment().Now()
	times := activities.SaleTimes{
		StartsAt:      start.Add(-10 * time.Minute),
		EndsAt:        start.Add(-5 * time.Minute),
		PaymentWindow: time.Minute,
	}
	env, calls := newSaleEnv(t, times, 1)
	env.SetStartTime(start)
	const margin = 7 * time.Minute
	env.ExecuteWorkflow(SaleWorkflowV2, domain.SaleInput{SaleID: 12, RetireMargin: margin})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, 2, calls.running, "drained: one check found orders, the next none")
	require.Equal(t, 1, calls.finals)
	// The second check runs 10 s after the first; the retirement a margin
	// after it, not before.
	settled := start.Add(10 * time.Second)
	require.False(t, calls.teardownAt.Before(settled.Add(margin)), "retired at %s, settled at %s", calls.teardownAt, settled)
	require.True(t, calls.teardownAt.Before(settled.Add(margin+time.Minute)), "retired at %s", calls.teardownAt)
}

// TestSaleWorkflowReconcilesOnlyWhatChanged: in runs before wakeOnChange,
// a live sale the change feed finds quiet is reconciled once, then looked at less and less often
// (never more than quietMaxWait apart) without a reconciliation; a change
// is reconciled at the next look; the end still gets its final one.
func TestSaleWorkflowReconcilesOnlyWhatChanged(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	start := s.NewTestWorkflowEnvironment().Now()
	changed := start.Add(40 * time.Minute)
	times := activities.SaleTimes{StartsAt: start.Add(-time.Minute), EndsAt: start.Add(90 * time.Minute), PaymentWindow: time.Minute}
	env, calls := newSaleEnvLoading(t, func(now time.Time) activities.SaleTimes {
		at := times
		at.Changes = activities.ChangeMark{Known: true}
		if !now.Before(changed) {
			at.Changes.At = changed
		}
		return at
	}, 0)
	// The runs before wakeOnChange.
	env.OnGetVersion(wakeOnChange, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	env.SetStartTime(start)
	env.ExecuteWorkflow(SaleWorkflow, domain.SaleInput{SaleID: 13})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())

	require.Equal(t, 1, calls.finals)
	live := calls.reconciledAt[:len(calls.reconciledAt)-1]
	require.Len(t, live, 2, "the first look and the change: %v", live)
	require.Equal(t, start, live[0])
	require.False(t, live[1].Before(changed), "reconciled the change at %s", live[1])
	require.True(t, live[1].Before(changed.Add(quietMaxWait+time.Minute)), "reconciled the change at %s", live[1])
	var looks int
	for i := 1; i < len(calls.loadedAt); i++ {
		at := calls.loadedAt[i]
		if at.After(times.EndsAt) {
			break
		}
		looks++
		require.LessOrEqual(t, at.Sub(calls.loadedAt[i-1]), quietMaxWait+time.Second, "looks at %s and %s", calls.loadedAt[i-1], at)
	}
	require.Less(t, looks, 40, "a quiet sale is looked at less than once a minute")
}

// The sale workflow's idea of how long the feed keeps a note is the
// feed's: a longer one would skip changes pruned unseen.
func TestSaleWorkflowFeedKeepIsTheFeeds(t *testing.T) {
	require.Equal(t, redisgateway.ChangesKeep, feedKeep)
}

// A mark the feed cannot give (unreadable, the database path, an activity
// from before the feed) reconciles every period, as before.
func TestSaleWorkflowReconcilesEveryPeriodWithoutTheFeed(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	start := s.NewTestWorkflowEnvironment().Now()
	times := activities.SaleTimes{StartsAt: start.Add(-time.Minute), EndsAt: start.Add(10 * time.Minute), PaymentWindow: time.Minute}
	env, calls := newSaleEnv(t, times, 0)
	env.SetStartTime(start)
	env.ExecuteWorkflow(SaleWorkflowV2, domain.SaleInput{SaleID: 14})
	require.NoError(t, env.GetWorkflowError())
	require.GreaterOrEqual(t, len(calls.reconciledAt), 10)
}
