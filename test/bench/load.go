// Package bench is seckill's load generator and benchmark suite: closed- and
// open-loop HTTP load with HDR histograms, a latency-injecting TCP proxy,
// the baselines each scenario is measured against, and the report (JSON,
// Markdown, chart). cmd/seckill-bench runs it; `go tool task bench` wraps it.
package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/sync/errgroup"
)

// Op is one request of a load run; i is the request's sequence number (use
// it to pick a distinct user). It returns the HTTP status (or any code the
// scenario defines) and an error for transport failures.
type Op func(ctx context.Context, i int64) (status int, err error)

// Result summarises one load run. Latencies are in milliseconds.
type Result struct {
	Name        string           `json:"name"`
	Mode        string           `json:"mode"` // closed or open
	Connections int              `json:"connections"`
	OfferedRPS  float64          `json:"offered_rps,omitempty"`
	Requests    int64            `json:"requests"`
	Errors      int64            `json:"errors"`
	Status      map[string]int64 `json:"status"`
	Seconds     float64          `json:"seconds"`
	RPS         float64          `json:"rps"`
	MeanMS      float64          `json:"mean_ms"`
	P50MS       float64          `json:"p50_ms"`
	P90MS       float64          `json:"p90_ms"`
	P99MS       float64          `json:"p99_ms"`
	P999MS      float64          `json:"p999_ms"`
	MaxMS       float64          `json:"max_ms"`
	// StatusP99MS is the p99 of the answers of each status alone.
	StatusP99MS map[string]float64 `json:"status_p99_ms,omitempty"`
}

// Latencies are recorded in microseconds, 1 µs .. 60 s, 3 significant digits.
func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(1, 60_000_000, 3) }

// recorder is one load worker's private tally, merged at the end (no locks
// on the request path).
type recorder struct {
	h        *hdrhistogram.Histogram
	status   map[int]int64
	byStatus map[int]*hdrhistogram.Histogram
	errs     int64
}

func newRecorder() *recorder {
	return &recorder{h: newHist(), status: map[int]int64{}, byStatus: map[int]*hdrhistogram.Histogram{}}
}

func (r *recorder) record(d time.Duration, status int, err error) {
	us := d.Microseconds()
	if us < 1 {
		us = 1
	}
	_ = r.h.RecordValue(us) // values beyond 60 s are clamped by the caller's timeout
	if err != nil {
		r.errs++
		return
	}
	r.status[status]++
	h := r.byStatus[status]
	if h == nil {
		h = newHist()
		r.byStatus[status] = h
	}
	_ = h.RecordValue(us)
}

// Summarise merges the recorders into a Result.
func summarise(name, mode string, conns int, elapsed time.Duration, recs []*recorder) Result {
	h := newHist()
	res := Result{Name: name, Mode: mode, Connections: conns, Status: map[string]int64{}, Seconds: elapsed.Seconds(), StatusP99MS: map[string]float64{}}
	byStatus := map[int]*hdrhistogram.Histogram{}
	for _, r := range recs {
		h.Merge(r.h)
		res.Errors += r.errs
		for s, n := range r.status {
			res.Status[fmt.Sprint(s)] += n
		}
		for s, sh := range r.byStatus {
			if byStatus[s] == nil {
				byStatus[s] = newHist()
			}
			byStatus[s].Merge(sh)
		}
	}
	for s, sh := range byStatus {
		res.StatusP99MS[fmt.Sprint(s)] = float64(sh.ValueAtQuantile(99)) / 1000
	}
	res.Requests = h.TotalCount()
	fillLatency(&res, h)
	if res.Seconds > 0 {
		res.RPS = float64(res.Requests) / res.Seconds
	}
	return res
}

// fillLatency copies the histogram's percentiles (µs) into res (ms).
func fillLatency(res *Result, h *hdrhistogram.Histogram) {
	ms := func(us int64) float64 { return float64(us) / 1000 }
	res.MeanMS = h.Mean() / 1000
	res.P50MS = ms(h.ValueAtQuantile(50))
	res.P90MS = ms(h.ValueAtQuantile(90))
	res.P99MS = ms(h.ValueAtQuantile(99))
	res.P999MS = ms(h.ValueAtQuantile(99.9))
	res.MaxMS = ms(h.Max())
}

// Count returns how many answers had the given status.
func (r Result) Count(status int) int64 { return r.Status[fmt.Sprint(status)] }

// StatusLine renders the status counts in a stable order.
func (r Result) StatusLine() string {
	keys := make([]string, 0, len(r.Status))
	for k := range r.Status {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	s := ""
	for _, k := range keys {
		s += fmt.Sprintf("%s×%d ", k, r.Status[k])
	}
	if r.Errors > 0 {
		s += fmt.Sprintf("err×%d", r.Errors)
	}
	return s
}

// bar draws progress over a duration on stderr.
func bar(name string, d time.Duration, done <-chan struct{}) {
	b := progressbar.NewOptions64(d.Milliseconds(),
		progressbar.OptionSetDescription(name),
		progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(200*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)
	start := time.Now()
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-done:
			_ = b.Finish()
			return
		case <-t.C:
			_ = b.Set64(min(time.Since(start).Milliseconds(), d.Milliseconds()))
		}
	}
}

// ClosedLoop runs conns workers, each sending its next request as soon as
// the previous answered, for dur or until maxReq requests were sent
// (maxReq <= 0: no cap).
func ClosedLoop(ctx context.Context, name string, conns int, dur time.Duration, maxReq int64, op Op) Result {
	ctx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()
	done := make(chan struct{})
	barDone := make(chan struct{})
	go func() { bar(name, dur, done); close(barDone) }()
	var seq atomic.Int64
	recs := make([]*recorder, conns)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range conns {
		recs[w] = newRecorder()
		wg.Add(1)
		go func(r *recorder) {
			defer wg.Done()
			for ctx.Err() == nil {
				i := seq.Add(1) - 1
				if maxReq > 0 && i >= maxReq {
					return
				}
				t0 := time.Now()
				status, err := op(ctx, i)
				if err != nil && ctx.Err() != nil {
					return // cut off by the end of the run, not a failure
				}
				r.record(time.Since(t0), status, err)
			}
		}(recs[w])
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(done)
	<-barDone
	return summarise(name, "closed", conns, elapsed, recs)
}

// OpenLoop sends requests at a constant arrival rate for dur, whatever the
// answers' speed (at most maxInFlight at once). Latency is measured from
// each request's intended send time, so a stall shows in the percentiles
// instead of silently lowering the rate (no coordinated omission).
func OpenLoop(ctx context.Context, name string, rate float64, dur time.Duration, maxInFlight int, op Op) Result {
	ctx, cancel := context.WithTimeout(ctx, dur+30*time.Second)
	defer cancel()
	n := int64(rate * dur.Seconds())
	interval := time.Duration(float64(time.Second) / rate)
	due := make(chan time.Time, n)
	done := make(chan struct{})
	barDone := make(chan struct{})
	go func() { bar(name, dur, done); close(barDone) }()
	recs := make([]*recorder, maxInFlight)
	var seq atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := range maxInFlight {
		recs[w] = newRecorder()
		wg.Add(1)
		go func(r *recorder) {
			defer wg.Done()
			for t := range due {
				if ctx.Err() != nil {
					return
				}
				status, err := op(ctx, seq.Add(1)-1)
				r.record(time.Since(t), status, err)
			}
		}(recs[w])
	}
	for i := range n {
		at := start.Add(time.Duration(i) * interval)
		if d := time.Until(at); d > 0 {
			time.Sleep(d)
		}
		due <- at
	}
	close(due)
	wg.Wait()
	elapsed := time.Since(start)
	close(done)
	<-barDone
	res := summarise(name, "open", maxInFlight, elapsed, recs)
	res.OfferedRPS = rate
	return res
}

// Unknown keeps the requests of a run answered 503, whose outcome the API
// did not know (a call that timed out may still have reserved), so that
// Settle can retry them as the contract tells a client to: the same
// request, the same request_id, after Retry-After.
type Unknown struct {
	mu  sync.Mutex
	idx []int64
}

// Record wraps op to keep the indices it got 503 for.
func (u *Unknown) Record(op Op) Op {
	return func(ctx context.Context, i int64) (int, error) {
		st, err := op(ctx, i)
		if err == nil && st == http.StatusServiceUnavailable {
			u.mu.Lock()
			u.idx = append(u.idx, i)
			u.mu.Unlock()
		}
		return st, err
	}
}

// Len is the number of requests recorded.
func (u *Unknown) Len() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.idx)
}

// Settled is what Settle made of a run's 503s.
type Settled struct {
	Retried int           // requests the run got 503 for
	Final   map[int]int64 // their last answers
}

// Accepted is the 202s of run and of its retries.
func (s Settled) Accepted(run Result) int64 {
	return run.Count(http.StatusAccepted) + s.Final[http.StatusAccepted]
}

// settleNote says in a report what ClosedLoopSettled does.
const settleNote = "the API and worker run with the default SECKILL_REDIS_TIMEOUT (250 ms); a request answered 503 (outcome unknown) is retried after the run with the same request_id, a second apart, as the contract tells a client to, and the reservations counted are the 202s of both"

// ClosedLoopSettled is ClosedLoop followed by Settle of its 503s with op.
func ClosedLoopSettled(ctx context.Context, name string, conns int, dur time.Duration, maxReq int64, op Op) (Result, Settled, error) {
	var u Unknown
	res := ClosedLoop(ctx, name, conns, dur, maxReq, u.Record(op))
	final, err := u.Settle(ctx, op)
	return res, Settled{Retried: u.Len(), Final: final}, err
}

// settleRounds bounds Settle: a request still unknown after them is
// reported as 503.
const settleRounds = 10

// Settle retries every recorded request with op, a second apart (the API's
// Retry-After), until each gets an answer other than 503 or the rounds run
// out, and returns the final statuses.
func (u *Unknown) Settle(ctx context.Context, op Op) (map[int]int64, error) {
	u.mu.Lock()
	pending := slices.Clone(u.idx)
	u.mu.Unlock()
	final := map[int]int64{}
	for round := 0; len(pending) > 0 && round < settleRounds; round++ {
		select {
		case <-ctx.Done():
			return final, fmt.Errorf("settle unknown outcomes: %w", ctx.Err())
		case <-time.After(time.Second):
		}
		var (
			mu    sync.Mutex
			again []int64
			g     errgroup.Group
		)
		g.SetLimit(32)
		for _, i := range pending {
			g.Go(func() error {
				st, err := op(ctx, i)
				if err != nil {
					return fmt.Errorf("settle request %d: %w", i, err)
				}
				mu.Lock()
				defer mu.Unlock()
				if st == http.StatusServiceUnavailable {
					again = append(again, i)
				} else {
					final[st]++
				}
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return final, err
		}
		pending = again
	}
	if len(pending) > 0 {
		final[http.StatusServiceUnavailable] = int64(len(pending))
	}
	return final, nil
}
