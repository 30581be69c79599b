package workflows

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/domain"
)

// quietTimes is a live sale the change feed can speak for and finds quiet.
func quietTimes(start time.Time, ends, window time.Duration) activities.SaleTimes {
	return activities.SaleTimes{StartsAt: start.Add(-time.Minute), EndsAt: start.Add(ends), PaymentWindow: window,
		Changes: activities.ChangeMark{Known: true}}
}

// offsets answers each time as its offset from start.
func offsets(start time.Time, at []time.Time) []time.Duration {
	out := make([]time.Duration, len(at))
	for i, t := range at {
		out[i] = t.Sub(start)
	}
	return out
}

// timerLog records the duration of every timer the workflow starts.
func timerLog(env *testsuite.TestWorkflowEnvironment) *[]time.Duration {
	var timers []time.Duration
	env.SetOnTimerScheduledListener(func(_ string, d time.Duration) { timers = append(timers, d) })
	return &timers
}

// A quiet live sale costs nothing until its end: one load and one timer
// to the end, then one to the payment window's close and the retire
// margin, and one reconciliation, the final one. Over a day, the whole run
// is these commands and no more.
func TestSaleWorkflowQuietSaleSleepsUntilItsEnd(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	start := s.NewTestWorkflowEnvironment().Now()
	times := quietTimes(start, 24*time.Hour, 15*time.Minute)
	env, calls := newSaleEnv(t, times, 0)
	timers := timerLog(env)
	env.SetStartTime(start)
	env.ExecuteWorkflow(SaleWorkflowV2, domain.SaleInput{SaleID: 21})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())

	closes := 24*time.Hour + 15*time.Minute
	// The run's own load, then the live phase's: at the opening, the end
	// and the close.
	require.Equal(t, []time.Duration{0, 0, 24 * time.Hour, closes}, offsets(start, calls.loadedAt))
	require.Equal(t, []time.Duration{closes + domain.DefaultRetireMargin}, offsets(start, calls.reconciledAt))
	require.Equal(t, []time.Duration{24 * time.Hour, 15 * time.Minute, domain.DefaultRetireMargin}, *timers)
	require.Equal(t, 1, calls.finals)
	require.Equal(t, 1, calls.running)
}

// Runs before firstChange reconcile a quiet sale once more, at their first
// look after the opening.
func TestSaleWorkflowQuietSaleBeforeFirstChange(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	start := s.NewTestWorkflowEnvironment().Now()
	times := quietTimes(start, 24*time.Hour, 15*time.Minute)
	env, calls := newSaleEnv(t, times, 0)
	env.OnGetVersion(firstChange, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	timers := timerLog(env)
	env.SetStartTime(start)
	env.ExecuteWorkflow(SaleWorkflow, domain.SaleInput{SaleID: 27})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())

	closes := 24*time.Hour + 15*time.Minute
	require.Equal(t, []time.Duration{0, 0, 24 * time.Hour, closes}, offsets(start, calls.loadedAt))
	require.Equal(t, []time.Duration{0, closes + domain.DefaultRetireMargin}, offsets(start, calls.reconciledAt))
	require.Equal(t, []time.Duration{24 * time.Hour, 15 * time.Minute, domain.DefaultRetireMargin}, *timers)
}

// A sale warmed ahead of its opening sleeps from then to its end; a change
// signalled before the opening, or in its first period, is reconciled a
// period after the opening, once.
func TestSaleWorkflowReconcilesAChangeAtTheOpeningAPeriodAfterIt(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	start := s.NewTestWorkflowEnvironment().Now()
	opens := 10 * time.Minute
	times := activities.SaleTimes{StartsAt: start.Add(opens), EndsAt: start.Add(time.Hour), PaymentWindow: time.Minute,
		Changes: activities.ChangeMark{Known: true}}
	env, calls := newSaleEnv(t, times, 0)
	signal := func() { env.SignalWorkflow(domain.SignalSaleChanged, nil) }
	env.RegisterDelayedCallback(signal, opens-domain.DefaultWarmLead/2) // buffered before the live phase
	env.RegisterDelayedCallback(signal, opens+5*time.Second)            // in the opening's rush
	env.SetStartTime(start)
	env.ExecuteWorkflow(SaleWorkflowV2, domain.SaleInput{SaleID: 28})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())

	closes := time.Hour + time.Minute
	require.Equal(t, []time.Duration{opens + time.Minute, closes + domain.DefaultRetireMargin}, offsets(start, calls.reconciledAt))
	warmed := opens - domain.DefaultWarmLead
	require.Equal(t, []time.Duration{0, warmed, opens - domain.DefaultWarmLead/2, opens + time.Minute, time.Hour, closes},
		offsets(start, calls.loadedAt), "warmed, it sleeps to the end until the first signal, then waits without a wake")
}

// A signalled reconciliation that finds discrepancies is followed by one
// every period until one is clean; then the sale sleeps again.
func TestSaleWorkflowPollsAfterDiscrepancies(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	start := s.NewTestWorkflowEnvironment().Now()
	times := quietTimes(start, time.Hour, time.Minute)
	env, calls := newSaleEnv(t, times, 0)
	calls.inconsistent = 2
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(domain.SignalSaleChanged, nil) }, 10*time.Minute)
	env.SetStartTime(start)
	env.ExecuteWorkflow(SaleWorkflowV2, domain.SaleInput{SaleID: 29})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())

	closes := time.Hour + time.Minute
	require.Equal(t, []time.Duration{10 * time.Minute, 11 * time.Minute, 12 * time.Minute, closes + domain.DefaultRetireMargin},
		offsets(start, calls.reconciledAt))
}

// A signalled change is reconciled at once when the last reconciliation
// began a period ago or more, else a period after it; however many
// signals come within a period, it is reconciled once more, not once per
// signal.
func TestSaleWorkflowReconcilesSignalledChangesOncePerPeriod(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	start := s.NewTestWorkflowEnvironment().Now()
	times := quietTimes(start, 2*time.Hour, time.Minute)
	env, calls := newSaleEnv(t, times, 0)
	signal := func() { env.SignalWorkflow(domain.SignalSaleChanged, nil) }
	env.RegisterDelayedCallback(signal, 10*time.Minute)
	for i := range 50 {
		env.RegisterDelayedCallback(signal, 20*time.Minute+time.Duration(i)*time.Second)
	}
	env.SetStartTime(start)
	env.ExecuteWorkflow(SaleWorkflowV2, domain.SaleInput{SaleID: 22})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())

	closes := 2*time.Hour + time.Minute
	require.Equal(t, []time.Duration{
		10 * time.Minute, // one signal, one reconciliation
		20 * time.Minute,
		21 * time.Minute, // the signals after 20m, once
		closes + domain.DefaultRetireMargin,
	}, offsets(start, calls.reconciledAt))
	// Woken by the first signal of the burst and its second (which finds
	// the period not over), not by the other 48.
	require.Equal(t, []time.Duration{
		0, 0,
		10 * time.Minute,
		20 * time.Minute,
		20*time.Minute + time.Second,
		21 * time.Minute,
		2 * time.Hour,
		closes,
	}, offsets(start, calls.loadedAt))
}

// Signals to a sale that has ended change nothing: it waits for the
// payment window on its one timer and reconciles once, at the end.
func TestSaleWorkflowSignalsToAnEndedSaleAreHarmless(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	start := s.NewTestWorkflowEnvironment().Now()
	times := quietTimes(start, 10*time.Minute, 15*time.Minute)
	env, calls := newSaleEnv(t, times, 1)
	timers := timerLog(env)
	for _, at := range []time.Duration{12 * time.Minute, 20 * time.Minute, 25*time.Minute + 5*time.Second} {
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(domain.SignalSaleChanged, nil) }, at)
	}
	env.SetStartTime(start)
	env.ExecuteWorkflow(SaleWorkflowV2, domain.SaleInput{SaleID: 23})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())

	require.Len(t, calls.reconciledAt, 1, "the final one: %v", calls.reconciledAt)
	require.Equal(t, 1, calls.finals)
	require.Equal(t, []time.Duration{10 * time.Minute, 15 * time.Minute, 10 * time.Second, domain.DefaultRetireMargin}, *timers,
		"to the end, to the close, one drain wait, the margin")
}

// A sale whose last report found discrepancies, or whose changes the feed
// cannot tell, is reconciled every period, signalled or not.
func TestSaleWorkflowPollsWhatSignalsCannotCover(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	start := s.NewTestWorkflowEnvironment().Now()
	times := quietTimes(start, 10*time.Minute, time.Minute)
	times.Changes.Known = false // the database path notes nothing
	env, calls := newSaleEnv(t, times, 0)
	env.SetStartTime(start)
	env.ExecuteWorkflow(SaleWorkflowV2, domain.SaleInput{SaleID: 24})
	require.NoError(t, env.GetWorkflowError())
	require.Len(t, calls.reconciledAt, 11, "ten periods live, then the final one")
}

// A run that continues as new hands on when it last reconciled and the
// change signalled since, so the next run neither forgets the change nor
// reconciles it before the period is over.
func TestSaleWorkflowContinueAsNewKeepsASignalledChange(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	start := s.NewTestWorkflowEnvironment().Now()
	times := quietTimes(start, 2*time.Hour, time.Minute)
	env, _ := newSaleEnv(t, times, 0)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(domain.SignalSaleChanged, nil) }, 10*time.Minute)
	env.RegisterDelayedCallback(func() {
		env.SetContinueAsNewSuggested(true)
		env.SignalWorkflow(domain.SignalSaleChanged, nil)
	}, 10*time.Minute+10*time.Second)
	env.SetStartTime(start)
	env.ExecuteWorkflow(SaleWorkflowV2, domain.SaleInput{SaleID: 25})
	require.True(t, env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(env.GetWorkflowError(), &can), "continued as new: %v", env.GetWorkflowError())
	require.Equal(t, domain.SaleWorkflowName, can.WorkflowType.Name, "the chain continues as its own type")
	var next domain.SaleInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	require.True(t, next.Changed, "the change signalled at 10m10s is owed")
	require.True(t, start.Add(10*time.Minute).Equal(next.ReconciledAt), "reconciled at %s", next.ReconciledAt)
	require.True(t, next.Warmed)
	require.NotNil(t, next.LastReport)

	// The next run reconciles it a period after the last, then sleeps.
	env2, calls := newSaleEnv(t, times, 0)
	env2.SetStartTime(start.Add(10*time.Minute + 10*time.Second))
	env2.ExecuteWorkflow(SaleWorkflowV2, next)
	require.NoError(t, env2.GetWorkflowError())
	require.Empty(t, calls.warmedAt)
	require.Equal(t, 11*time.Minute, calls.reconciledAt[0].Sub(start))
	require.Len(t, calls.reconciledAt, 2, "the owed one and the final one")
}

// A run begun before wakeOnChange, live when it is deployed, takes it at
// its first look after a change is signalled: it reconciles the change,
// then sleeps until the sale's end.
func TestSaleWorkflowLiveRunTakesWakeOnChangeAtASignal(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	start := s.NewTestWorkflowEnvironment().Now()
	times := quietTimes(start, 2*time.Hour, time.Minute)
	env, calls := newSaleEnv(t, times, 0)
	env.OnGetVersion(wakeOnChange, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(domain.SignalSaleChanged, nil) }, 30*time.Minute)
	env.SetStartTime(start)
	env.ExecuteWorkflow(SaleWorkflow, domain.SaleInput{SaleID: 26})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())

	live := offsets(start, calls.reconciledAt[:len(calls.reconciledAt)-1])
	require.Len(t, live, 2, "the first look and the signalled change: %v", live)
	switched := live[1]
	require.Greater(t, switched, 30*time.Minute)
	require.LessOrEqual(t, switched, 30*time.Minute+quietMaxWait)
	loads := offsets(start, calls.loadedAt)
	var before int
	for _, at := range loads {
		if at < switched {
			before++
		}
	}
	require.Greater(t, before, 6, "looked at the feed every few minutes before: %v", loads)
	require.Equal(t, []time.Duration{switched, 2 * time.Hour, 2*time.Hour + time.Minute}, loads[before:],
		"then the end and the close only")
}
