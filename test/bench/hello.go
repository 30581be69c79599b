package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

const helloWorkflowName, helloActivityName = "BenchHello", "BenchHelloActivity"

// HelloWorkflow is the drain scenario's baseline: one trivial activity.
func HelloWorkflow(ctx workflow.Context, name string) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	var out string
	if err := workflow.ExecuteActivity(ctx, helloActivityName, name).Get(ctx, &out); err != nil {
		return "", fmt.Errorf("hello activity: %w", err)
	}
	return out, nil
}

// HelloActivity says hello.
func HelloActivity(_ context.Context, name string) (string, error) { return "hello " + name, nil }

// HelloRate runs n hello workflows on a worker of its own (own task queue,
// in this process), started by `starters` goroutines, and returns their
// completion rate (workflows/s from the first start to the last completion).
func HelloRate(ctx context.Context, c client.Client, taskQueue string, n, starters int) (rate float64, elapsed time.Duration, err error) {
	w := worker.New(c, taskQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(HelloWorkflow, workflow.RegisterOptions{Name: helloWorkflowName})
	w.RegisterActivityWithOptions(HelloActivity, activity.RegisterOptions{Name: helloActivityName})
	if err := w.Start(); err != nil {
		return 0, 0, fmt.Errorf("hello worker: %w", err)
	}
	defer w.Stop()
	ctx, cancel := context.WithTimeout(ctx, runLimit(n))
	defer cancel()
	jobs := make(chan int, n)
	for i := range n {
		jobs <- i
	}
	close(jobs)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
	}
	// Starting and waiting are separate pools, so the rate measures the
	// server and the worker, not one goroutine's round trips.
	runs := make(chan client.WorkflowRun, n)
	var waiters sync.WaitGroup
	for range 128 {
		waiters.Add(1)
		go func() {
			defer waiters.Done()
			for run := range runs {
				var out string
				if err := run.Get(ctx, &out); err != nil {
					fail(fmt.Errorf("hello workflow %s: %w", run.GetID(), err))
				}
			}
		}()
	}
	start := time.Now()
	for range starters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				id := fmt.Sprintf("%s-%d", taskQueue, i)
				run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: taskQueue}, helloWorkflowName, id)
				if err != nil {
					fail(fmt.Errorf("start hello workflow %s: %w", id, err))
					return
				}
				runs <- run
			}
		}()
	}
	wg.Wait()
	close(runs)
	waiters.Wait()
	elapsed = time.Since(start)
	if firstErr != nil {
		return 0, elapsed, firstErr
	}
	return float64(n) / elapsed.Seconds(), elapsed, nil
}

// runLimit bounds a run of n workflows: 5 minutes, or 100 ms a workflow
// when that is longer (a 10,000-unit burst drains at about 50 orders/s on
// this machine, and its hello baseline runs at about 40/s).
func runLimit(n int) time.Duration {
	return max(5*time.Minute, time.Duration(n)*100*time.Millisecond)
}
