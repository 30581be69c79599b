package bench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/workflows"
)

// Bounds of the waits before scenario 13's idle windows: each idle window
// measures the fleet with no earlier work left to finish, and the report
// says what each wait saw.
const (
	// marketDrainWait bounds the wait for the paths' backlog: the
	// in-stock rounds leave thousands of holds whose order workflows the
	// worker's relay starts, at what Temporal takes.
	marketDrainWait = 10 * time.Minute
	// marketQuietFor is how long the worker's work counters must stay
	// unchanged; marketQuietWait bounds the wait for it: "running" is
	// Temporal's word for a started workflow, whose first tasks (a load,
	// a warm-up, a load) the worker may take minutes more to get through
	// for ten thousand sales on a loaded host.
	marketQuietFor  = 30 * time.Second
	marketQuietWait = 10 * time.Minute
	marketWaitPoll  = time.Second
	// marketSettledQuietFor is marketQuietFor before the idle window with
	// the sales: the first tasks of the sales' workflows leave the
	// Temporal server their activities' start-to-close timers to fire,
	// each workflows.SaleActivityTimeout after its attempt began (and
	// their workflow tasks' timeouts, seconds after), a no-op task each
	// of about 0.7 ms of the dev server's CPU; at the pace the worker
	// takes first tasks they cost it several percent of a core for that
	// long after the worker's last task, so the window waits them out.
	marketSettledQuietFor = workflows.SaleActivityTimeout + 15*time.Second
)

// workerWork are the worker's /metrics counters of work handed to it or
// sent by it: the relay's starts, the workflow, activity and local
// activity tasks Temporal gave it, and its calls to Temporal (starts,
// signals, listings). A sleeping sale workflow or order adds to none.
var workerWork = []string{
	"seckill_inbox_started_total",
	"seckill_inbox_start_errors_total",
	"temporal_workflow_task_queue_poll_succeed_total",
	"temporal_activity_execution_latency_seconds_count",
	"temporal_local_activity_total",
	"temporal_request_total",
}

// marketWait is one wait before an idle window: what it waited for, how
// long, and whether it came before its bound.
type marketWait struct {
	what string
	took time.Duration
	came bool
}

func (w marketWait) String() string {
	if !w.came {
		return fmt.Sprintf("%s: NOT within %s", w.what, w.took.Round(time.Second))
	}
	return fmt.Sprintf("%s: %s", w.what, w.took.Round(time.Second))
}

// waitInboxes waits (at most marketDrainWait) until the inbox of every
// sale of ids has no entry undelivered to the relay group and none
// pending: every hold's order workflow is known started.
func (r *runner) waitInboxes(ctx context.Context, ids []int64) marketWait {
	w := marketWait{what: fmt.Sprintf("the in-stock and fault sales' inboxes (%d) with no entry unread or pending", len(ids))}
	rc := redisgateway.NewClient(r.rdb)
	start := time.Now()
	for ; time.Since(start) < marketDrainWait && ctx.Err() == nil; sleepCtx(ctx, marketWaitPoll) {
		left, err := inboxesLeft(ctx, rc, ids)
		if err != nil {
			r.o.Logger.Warn("scenario 13: read the inboxes", "err", err)
			continue
		}
		if left == 0 {
			w.came = true
			break
		}
		if time.Since(start).Truncate(marketWaitPoll)%(30*time.Second) == 0 {
			r.o.Logger.Info("scenario 13: waiting for the inboxes to drain", "entries", left)
		}
	}
	w.took = time.Since(start)
	return w
}

// inboxesLeft counts the entries of ids' inboxes unread or pending in the
// relay group (a sale without an inbox has none).
func inboxesLeft(ctx context.Context, rc *redisgateway.Client, ids []int64) (int64, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var left int64
	for _, id := range ids {
		g, err := rc.InboxGroupState(cctx, id)
		if errors.Is(err, redisgateway.ErrNoInbox) {
			continue
		}
		if err != nil {
			return 0, err
		}
		left += g.Pending + max(g.Lag, 0)
		if g.Lag < 0 {
			left++ // Redis cannot tell: not drained
		}
	}
	return left, nil
}

// waitQuiet waits (at most marketQuietWait) until worker's work counters
// (workerWork) stay unchanged for quietFor.
func (r *runner) waitQuiet(ctx context.Context, worker *Proc, what string, quietFor time.Duration) marketWait {
	w := marketWait{what: fmt.Sprintf("%s: the worker's relay starts, Temporal tasks and calls unchanged for %s", what, quietFor)}
	start, since := time.Now(), time.Now()
	last := -1.0
	for ; time.Since(start) < marketQuietWait && ctx.Err() == nil; sleepCtx(ctx, marketWaitPoll) {
		n, err := workerWorkDone(ctx, worker)
		if err != nil {
			r.o.Logger.Warn("scenario 13: read the worker's work counters", "err", err)
			last = -1
			continue
		}
		if n != last {
			last, since = n, time.Now()
			continue
		}
		if time.Since(since) >= quietFor {
			w.came = true
			break
		}
	}
	w.took = time.Since(start)
	return w
}

// workerWorkDone is the sum of worker's workerWork counters; it fails when
// the worker exports none of them.
func workerWorkDone(ctx context.Context, worker *Proc) (float64, error) {
	var n float64
	found := false
	for _, name := range workerWork {
		samples, err := metricSamples(ctx, worker.URL+"/metrics", name)
		if err != nil {
			return 0, err
		}
		for _, v := range samples {
			n, found = n+v, true
		}
	}
	if !found {
		return 0, fmt.Errorf("worker %s exports none of %v", worker.Name, workerWork)
	}
	return n, nil
}

// profileIdle fetches the worker's CPU profile over an idle window into
// the profile directory when one is asked for; wait returns a note.
func (r *runner) profileIdle(ctx context.Context, worker *Proc, name string) (wait func() string) {
	if r.o.ProfileDir == "" {
		return func() string { return "" }
	}
	path := filepath.Join(r.o.ProfileDir, name+".pprof")
	done := make(chan error, 1)
	go func() { done <- profileCPU(ctx, worker.URL, int(marketIdle.Seconds()), path) }()
	return func() string {
		if err := <-done; err != nil {
			return fmt.Sprintf("worker CPU profile over the idle window: %v", err)
		}
		return "worker CPU profile over the idle window: " + path
	}
}
