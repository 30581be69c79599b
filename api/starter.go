package api

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/reqid"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/store"
	"github.com/seckill/seckill/workflows"
)

const (
	starterWorkers = 4
	startTimeout   = 5 * time.Second
)

// starter starts order workflows off the request path. The queue is bounded
// and never blocks a request: an entry that does not fit is dropped, and the
// worker's inbox relay starts that workflow from the Redis stream instead.
type starter struct {
	q       chan queuedStart
	tc      client.Client
	queue   string // Temporal task queue
	st      *store.Store
	rdb     *lua.Client
	timeout time.Duration
	logger  *slog.Logger
	m       *metrics
	wg      sync.WaitGroup
}

func newStarter(capacity int, tc client.Client, taskQueue string, st *store.Store, rdb *lua.Client, redisTimeout time.Duration, logger *slog.Logger, m *metrics) *starter {
	return &starter{q: make(chan queuedStart, max(capacity, 1)), tc: tc, queue: taskQueue, st: st, rdb: rdb, timeout: redisTimeout, logger: logger, m: m}
}

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

// enqueue hands a start to the queue without waiting; reqCtx is the
// request's context (only its id and span are kept).
func (s *starter) enqueue(reqCtx context.Context, in domain.OrderInput) {
	if s.tc == nil {
		s.m.starter.WithLabelValues("no_temporal").Inc()
		return
	}
	select {
	case s.q <- queuedStart{in: in, httpRequestID: reqid.From(reqCtx), span: trace.SpanContextFromContext(reqCtx)}:
		s.m.starter.WithLabelValues("queued").Inc()
	default:
		s.m.starter.WithLabelValues("dropped").Inc()
	}
}

// run serves the queue until stop closes, then drains what is queued while
// the drain context lasts (best effort: the relay covers whatever is left).
func (s *starter) run(stop <-chan struct{}, drain func() context.Context) {
	for range starterWorkers {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			for {
				select {
				case q := <-s.q:
					s.start(q.context(context.Background()), q.in)
				case <-stop:
					dctx := drain()
					for dctx.Err() == nil {
						select {
						case q := <-s.q:
							s.start(q.context(dctx), q.in)
						default:
							return
						}
					}
					return
				}
			}
		}()
	}
}

func (s *starter) start(parent context.Context, in domain.OrderInput) {
	sctx, cancel := context.WithTimeout(parent, startTimeout)
	defer cancel()
	if err := workflows.StartOrder(sctx, s.tc, s.queue, in); err != nil {
		s.m.starter.WithLabelValues("failed").Inc()
		s.logger.Warn("workflow start failed; the inbox or outbox relay will start it", "token", in.Token,
			reqid.LogKey, reqid.From(parent), "err", err)
		return
	}
	s.m.starter.WithLabelValues("started").Inc()
	if in.Path == domain.PathDatabase {
		// The outbox relay need not start it again.
		dctx, dcancel := context.WithTimeout(context.WithoutCancel(parent), 2*time.Second)
		defer dcancel()
		if err := s.st.MarkDispatched(dctx, in.Token); err != nil {
			s.logger.Warn("mark outbox dispatched", "token", in.Token, "err", err)
		}
		return
	}
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(parent), max(s.timeout, time.Second))
	defer rcancel()
	if err := s.rdb.MarkStarted(rctx, in.SaleID, in.Token); err != nil {
		// Only an optimisation for the relay: it finds the workflow started.
		s.logger.Warn("mark workflow started", "token", in.Token, "err", err)
	}
}

func (s *starter) wait() { s.wg.Wait() }
