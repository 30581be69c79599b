package reservation

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/reqid"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/store"
	"github.com/seckill/seckill/temporalgateway"
)

const (
	starterWorkers = 4
	startTimeout   = 2 * time.Second
	// retryCap bounds the starts kept for retrying; beyond it the oldest
	// is left to the relays alone.
	retryCap       = 50_000
	retryFirstWait = time.Second
	retryMaxWait   = 5 * time.Second
	// A database-path start's outbox mark waits up to markEvery for others
	// to share its UPDATE (at most markBatch); the outbox relay leaves an
	// entry to the API for seconds.
	markEvery = 10 * time.Millisecond
	markBatch = 256
	markQueue = 4096
)

// StartQueue starts order workflows off the request path. The queue is bounded
// and never blocks a request: an entry that does not fit is retried later,
// and the worker's inbox relay starts that workflow from the Redis stream
// as well.
//
// A start that fails (Temporal down) is retried until it succeeds: while
// Temporal is down a Redis hold's 202 lives only in Redis, and a fault that
// loses Redis writes meanwhile (keys deleted, an AOF's last second) took
// its inbox entry too, so no relay could ever start it and the 202
// would vanish. The retry keeps it, and records it QUEUED
// in the database so that it outlives this process too (recordKept); the
// workflow then finds the unit or ends FAILED, as the contract allows
// after such faults. While a start failed lately, a new Redis hold's
// reservation is recorded before its 202 is answered (enqueue).
type StartQueue struct {
	q       chan queuedStart
	retry   retryList
	tc      client.Client
	queue   string // Temporal task queue
	st      *store.Store
	rdb     *redisgateway.Client
	timeout time.Duration
	logger  *slog.Logger
	count   func(outcome string)
	wg      sync.WaitGroup
	// failedAt is when a start last failed (unix ns; 0 after a success).
	failedAt atomic.Int64
	// marks carries the tokens of started database-path workflows to
	// markLoop while run runs; nil otherwise (each start marks its own).
	marks chan string
}

// suspectWindow is how long after a failed start Temporal is suspect:
// starts then record their reservation first, since a failing start can
// take its whole timeout to say so, and the API may not live that long.
const suspectWindow = 30 * time.Second

// temporalSuspect reports whether a start failed within suspectWindow.
func (s *StartQueue) temporalSuspect() bool {
	at := s.failedAt.Load()
	return at != 0 && time.Since(time.Unix(0, at)) < suspectWindow
}

// StartQueueDeps are what a StartQueue needs. Temporal may be nil: then no
// workflow is started here (the relays start them). Count receives each
// start's outcome ("queued", "deferred", "no_temporal", "retry_dropped",
// "started", "failed", "retried", "recorded").
type StartQueueDeps struct {
	Capacity     int
	Temporal     client.Client
	TaskQueue    string
	Store        *store.Store
	Redis        *redisgateway.Client
	RedisTimeout time.Duration
	Logger       *slog.Logger
	Count        func(outcome string)
}

// NewStartQueue is a start queue; Run serves it.
func NewStartQueue(d StartQueueDeps) *StartQueue {
	return &StartQueue{q: make(chan queuedStart, max(d.Capacity, 1)), tc: d.Temporal, queue: d.TaskQueue, st: d.Store, rdb: d.Redis,
		timeout: d.RedisTimeout, logger: d.Logger, count: d.Count}
}

// Len is how many starts wait in the queue.
func (s *StartQueue) Len() int { return len(s.q) }

// queuedStart is a start and what it keeps of the request that asked for
// it: its id (a header of the workflow's start, reqid.Propagator) and its
// span, so the start and the workflow join the request's trace.
type queuedStart struct {
	in            domain.OrderInput
	httpRequestID string
	span          trace.SpanContext
}

// context is base with the request's id and span.
func (q queuedStart) context(base context.Context) context.Context {
	ctx := reqid.With(base, q.httpRequestID)
	if q.span.IsValid() {
		ctx = trace.ContextWithSpanContext(ctx, q.span)
	}
	return ctx
}

// Enqueue hands a start to the queue without waiting; reqCtx is the
// request's context (only its id and span are kept).
func (s *StartQueue) Enqueue(reqCtx context.Context, in domain.OrderInput) {
	if s.tc == nil {
		s.count("no_temporal")
		return
	}
	q := queuedStart{in: in, httpRequestID: reqid.From(reqCtx), span: trace.SpanContextFromContext(reqCtx)}
	if s.temporalSuspect() && !in.NoRedisHold() {
		// A start failed lately: this one would wait in the queue behind
		// starts that take their whole timeout to fail, and until it is
		// recorded the 202 lives only in this process and Redis (both
		// killed, an AOF's last second lost, it would vanish). It is recorded QUEUED now, before the 202 goes out, and
		// kept for the retry loop, which starts it once Temporal answers.
		s.count("deferred")
		s.keep(reqCtx, q, false, recordOnRequestTimeout)
		return
	}
	select {
	case s.q <- q:
		s.count("queued")
	default:
		// The starts are slow (Temporal down or a burst): retried later.
		s.count("deferred")
		if s.retry.add(q) {
			s.count("retry_dropped")
		}
	}
}

// Run serves the queue until stop closes, then drains what is queued while
// the drain context lasts (best effort: the relay covers whatever is left).
func (s *StartQueue) Run(stop <-chan struct{}, drain func() context.Context) {
	var starting sync.WaitGroup
	s.marks = make(chan string, markQueue)
	starting.Go(func() { s.retryLoop(stop, drain) })
	for range starterWorkers {
		starting.Go(func() { s.serve(stop, drain) })
	}
	s.wg.Go(func() {
		// The marks end after every goroutine that starts, and so marks.
		go func() {
			starting.Wait()
			close(s.marks)
		}()
		s.markLoop()
	})
}

// serve is one StartQueue worker: it starts the queued workflows until stop
// closes, then what is still queued while the drain context lasts.
func (s *StartQueue) serve(stop <-chan struct{}, drain func() context.Context) {
	for {
		select {
		case q := <-s.q:
			s.start(q.context(context.Background()), q)
		case <-stop:
			dctx := drain()
			for dctx.Err() == nil {
				select {
				case q := <-s.q:
					s.start(q.context(dctx), q)
				default:
					return
				}
			}
			return
		}
	}
}

func (s *StartQueue) start(parent context.Context, q queuedStart) {
	recorded := false
	if s.temporalSuspect() && !q.in.NoRedisHold() {
		recorded = s.record(parent, q.in, recordTimeout)
	}
	if s.tryStart(parent, q.in) {
		return
	}
	s.keep(parent, q, recorded, recordTimeout)
}

// keep keeps q's start for the retry loop and, for a Redis hold not
// recorded yet, records its reservation QUEUED within timeout; what it
// cannot record the retry loop records (recordKept).
func (s *StartQueue) keep(ctx context.Context, q queuedStart, recorded bool, timeout time.Duration) {
	if s.retry.add(q) {
		s.count("retry_dropped")
	}
	if !q.in.NoRedisHold() && (recorded || s.record(ctx, q.in, timeout)) {
		s.retry.markRecorded(q.in.Token)
	}
}

// tryStart starts in's workflow once; false when the start failed.
func (s *StartQueue) tryStart(parent context.Context, in domain.OrderInput) bool {
	sctx, cancel := context.WithTimeout(parent, startTimeout)
	defer cancel()
	if err := temporalgateway.Start(sctx, s.tc, s.queue, in); err != nil {
		s.failedAt.Store(time.Now().UnixNano())
		s.count("failed")
		s.logger.Warn("workflow start failed; retried, and the inbox or outbox relay starts it too", "token", in.Token,
			reqid.LogKey, reqid.From(parent), "err", err)
		return false
	}
	s.failedAt.Store(0)
	s.count("started")
	if in.Path == domain.PathDatabase {
		// The outbox relay need not start it again.
		select {
		case s.marks <- in.Token:
		default: // not running, or the marks are behind: mark it here
			s.markDispatched(in.Token)
		}
		return true
	}
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(parent), max(s.timeout, time.Second))
	defer rcancel()
	if err := s.rdb.MarkStarted(rctx, in.SaleID, in.Token); err != nil {
		// Only an optimisation for the relay: it finds the workflow started.
		s.logger.Warn("mark workflow started", "token", in.Token, "err", err)
	}
	return true
}

// markLoop marks the outbox entries of started database-path workflows,
// many in one UPDATE, until marks closes. A mark lost (the database down,
// the API killed first) costs the outbox relay a start that finds its
// workflow.
func (s *StartQueue) markLoop() {
	batch := make([]string, 0, markBatch)
	for first := range s.marks {
		batch = append(batch[:0], first)
		wait := time.NewTimer(markEvery)
	collect:
		for len(batch) < markBatch {
			select {
			case token, ok := <-s.marks:
				if !ok {
					break collect
				}
				batch = append(batch, token)
			case <-wait.C:
				break collect
			}
		}
		wait.Stop()
		s.markDispatched(batch...)
	}
}

// markDispatched marks the outbox entries of tokens dispatched.
func (s *StartQueue) markDispatched(tokens ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.st.MarkDispatched(ctx, tokens...); err != nil {
		s.logger.Warn("mark outbox dispatched", "entries", len(tokens), "err", err)
	}
}

// retryLoop retries the failed starts, oldest first, waiting between rounds
// (1 s, doubling to 5 s while they keep failing), until stop closes; then
// once more while the drain context lasts.
func (s *StartQueue) retryLoop(stop <-chan struct{}, drain func() context.Context) {
	wait := retryFirstWait
	for {
		select {
		case <-stop:
			s.retryRound(drain())
			return
		case <-time.After(wait):
		}
		if s.retryRound(context.Background()) {
			wait = retryFirstWait
		} else {
			wait = min(2*wait, retryMaxWait)
		}
	}
}

// retryRound starts the kept starts until one fails; false when one did.
func (s *StartQueue) retryRound(ctx context.Context) bool {
	if s.temporalSuspect() {
		s.recordKept(ctx) // deferred starts wait too: record them first
	}
	for ctx.Err() == nil {
		q, ok := s.retry.oldest()
		if !ok {
			return true
		}
		if !s.tryStart(q.context(ctx), q.in) {
			s.recordKept(ctx)
			return false
		}
		s.retry.remove(q.in.Token)
		s.count("retried")
	}
	return false
}

// recordKept records the kept Redis-path reservations QUEUED in the
// database (what the workflow's first step does), so that a 202 whose
// start waits for Temporal outlives this process and a loss of Redis's
// writes: reconciliation starts the workflow of a QUEUED reservation that
// has none. It stops at the first failure (the database down too) and
// tries again after the next failed round.
func (s *StartQueue) recordKept(ctx context.Context) {
	for _, in := range s.retry.unrecorded() {
		if !s.record(ctx, in, recordTimeout) {
			return
		}
		s.retry.markRecorded(in.Token)
	}
}

// Bounds of record: off a request's path, and on it (the database slow
// or down too: a 202 is not held up longer).
const (
	recordTimeout          = 2 * time.Second
	recordOnRequestTimeout = 500 * time.Millisecond
)

// record records a Redis hold's reservation QUEUED within timeout; false
// when it failed.
func (s *StartQueue) record(ctx context.Context, in domain.OrderInput, timeout time.Duration) bool {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	if _, err := s.st.RecordReservation(rctx, in); err != nil {
		s.logger.Warn("recording a reservation whose start waits failed", "token", in.Token, "err", err)
		return false
	}
	s.count("recorded")
	return true
}

// retryList is the bounded list of starts to retry, oldest first.
type retryList struct {
	mu    sync.Mutex
	items []keptStart
}

// keptStart is a start to retry; recorded once its reservation is in the
// database.
type keptStart struct {
	queuedStart
	recorded bool
}

// add appends q; it reports whether the oldest was dropped to make room.
func (l *retryList) add(q queuedStart) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	dropped := false
	if len(l.items) >= retryCap {
		l.items = l.items[1:]
		dropped = true
	}
	l.items = append(l.items, keptStart{queuedStart: q})
	return dropped
}

func (l *retryList) oldest() (queuedStart, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.items) == 0 {
		return queuedStart{}, false
	}
	return l.items[0].queuedStart, true
}

// unrecorded lists the kept Redis-path starts not recorded yet.
func (l *retryList) unrecorded() []domain.OrderInput {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []domain.OrderInput
	for _, k := range l.items {
		if !k.recorded && !k.in.NoRedisHold() {
			out = append(out, k.in)
		}
	}
	return out
}

func (l *retryList) markRecorded(token string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range l.items {
		if l.items[i].in.Token == token {
			l.items[i].recorded = true
			return
		}
	}
}

// remove drops the entry of token (the oldest, unless dropped meanwhile).
func (l *retryList) remove(token string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, k := range l.items {
		if k.in.Token == token {
			l.items = append(l.items[:i], l.items[i+1:]...)
			return
		}
	}
}

func (l *retryList) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.items)
}

// Wait waits until Run's drain has ended.
func (s *StartQueue) Wait() { s.wg.Wait() }
