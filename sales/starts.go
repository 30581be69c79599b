package sales

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/reqid"
	"github.com/seckill/seckill/temporalgateway"
)

// Bounds of the background starts of created sales' workflows.
const (
	// saleStartsInFlight: Temporal's dev server on two cores takes about
	// 70 sale-workflow starts a second; starts beyond what it takes only
	// wait at the server, each on its own timeout (a wave of creations'
	// starts sent at once timed out by thousands). Four in flight carry 70
	// a second while a start answers within some 55 ms, and leave the
	// server room for the order starts.
	saleStartsInFlight = 4
	// saleStartQueue bounds the sales waiting for their start: about two
	// minutes of what Temporal takes. Beyond it the worker's sweeper, which
	// starts every open sale lacking its workflow, is as quick.
	saleStartQueue = 8192
	// saleStartTimeout bounds one start, from when it leaves the queue.
	saleStartTimeout = 5 * time.Second
	// saleStartsReportEvery is how often the sales left to the sweeper are
	// summed up, in one log line.
	saleStartsReportEvery = 10 * time.Second
)

// saleStart is a queued start: the sale and the id of the request that
// created it (a header of the workflow's start).
type saleStart struct {
	saleID        int64
	httpRequestID string
}

// saleStarts starts the workflows of created sales off the request path,
// saleStartsInFlight at a time from a bounded queue, so a wave of
// creations is started at what Temporal takes. A sale whose start does not
// fit in the queue, fails (Temporal down or slow; not a refusal) or is cut
// by the process's stop is left to the worker's sweeper; those are counted
// and logged once per saleStartsReportEvery. It runs from the first
// Enqueue until stop closes, under goFn (work the process waits for).
type saleStarts struct {
	start  func(ctx context.Context, in domain.SaleInput) error
	goFn   func(fn func())
	stop   <-chan struct{}
	logger *slog.Logger
	q      chan saleStart
	once   sync.Once
	left   leftStarts
}

// newSaleStarts is a starter of sale workflows with start, whose queue
// holds capacity sales.
func newSaleStarts(start func(ctx context.Context, in domain.SaleInput) error, capacity int, goFn func(fn func()), stop <-chan struct{}, logger *slog.Logger) *saleStarts {
	return &saleStarts{start: start, goFn: goFn, stop: stop, logger: logger, q: make(chan saleStart, capacity)}
}

// Enqueue queues the start of a created sale's workflow without waiting;
// reqCtx is the creating request's context (only its id is kept).
func (s *saleStarts) Enqueue(reqCtx context.Context, saleID int64) {
	s.once.Do(func() { s.goFn(s.run) })
	select {
	case <-s.stop:
		s.left.note(leftAtStop, nil)
		return
	default:
	}
	select {
	case s.q <- saleStart{saleID: saleID, httpRequestID: reqid.From(reqCtx)}:
	default:
		s.left.note(leftQueueFull, nil)
	}
}

// run serves the queue with saleStartsInFlight starters and reports the
// sales left to the sweeper, until stop closes; then it cuts the starts
// in flight (idempotent: the sweeper's start finds any that went through)
// and leaves what is queued to the sweeper.
func (s *saleStarts) run() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var starters sync.WaitGroup
	for range saleStartsInFlight {
		starters.Go(func() { s.serve(ctx) })
	}
	tick := time.NewTicker(saleStartsReportEvery)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			s.report()
		case <-s.stop:
			cancel()
			starters.Wait()
			for range len(s.q) {
				<-s.q
				s.left.note(leftAtStop, nil)
			}
			s.report()
			return
		}
	}
}

// serve starts queued sales' workflows, one at a time, until ctx ends.
func (s *saleStarts) serve(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case st := <-s.q:
			s.startOne(ctx, st)
		}
	}
}

// startOne starts st's workflow within saleStartTimeout.
func (s *saleStarts) startOne(ctx context.Context, st saleStart) {
	if ctx.Err() != nil {
		s.left.note(leftAtStop, nil)
		return
	}
	sctx, cancel := context.WithTimeout(reqid.With(ctx, st.httpRequestID), saleStartTimeout)
	defer cancel()
	err := s.start(sctx, domain.SaleInput{SaleID: st.saleID})
	switch {
	case err == nil:
	case temporalgateway.StartRefused(err):
		// No retry changes it, the sweeper's neither.
		s.logger.Error("start sale workflow: Temporal refused it", "sale_id", st.saleID, reqid.LogKey, st.httpRequestID, "err", err)
	case ctx.Err() != nil:
		s.left.note(leftAtStop, err)
	default:
		s.left.note(leftFailed, err)
	}
}

// report logs the sales left to the sweeper since the last report, if
// any, in one line.
func (s *saleStarts) report() {
	n, err := s.left.take()
	if n[leftQueueFull]+n[leftFailed]+n[leftAtStop] == 0 {
		return
	}
	s.logger.Warn("sale workflow starts left to the worker's sweeper", "queue_full", n[leftQueueFull],
		"failed", n[leftFailed], "at_stop", n[leftAtStop], "queued", len(s.q), "last_err", err)
}

// Why a sale's start was left to the sweeper.
const (
	leftQueueFull = iota
	leftFailed
	leftAtStop
	leftReasons
)

// leftStarts counts the starts left to the sweeper by reason, with the
// last error, since the last take.
type leftStarts struct {
	mu      sync.Mutex
	n       [leftReasons]int
	lastErr error
}

func (l *leftStarts) note(reason int, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n[reason]++
	if err != nil {
		l.lastErr = err
	}
}

// take answers the counts and the last error, and resets them.
func (l *leftStarts) take() ([leftReasons]int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, err := l.n, l.lastErr
	l.n, l.lastErr = [leftReasons]int{}, nil
	return n, err
}
