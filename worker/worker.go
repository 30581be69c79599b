// Package worker wires seckill's worker process: the Temporal worker of the
// order and sale workflows, the inbox relay that hands Redis reservations to
// Temporal, the Redis-stock recorder and the worker's metrics endpoint.
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime/debug"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.temporal.io/sdk/client"
	tworker "go.temporal.io/sdk/worker"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/degraded"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/buildinfo"
	"github.com/seckill/seckill/internal/conn"
	"github.com/seckill/seckill/reconcile"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/store"
	"github.com/seckill/seckill/temporalgateway"
	"github.com/seckill/seckill/workflows"
)

// Temporal dial bounds: each attempt, and the pause between attempts.
const (
	temporalDialTimeout = 10 * time.Second
	temporalMaxBackoff  = 15 * time.Second
)

// Run runs the worker until ctx is cancelled, then shuts down within
// cfg.ShutdownTimeout: the relay stops reading and finishes its batch, the
// Temporal worker stops, the clients close. A cancelled ctx is a clean stop
// (nil), during start-up too.
func Run(ctx context.Context, cfg *config.Config, logger *slog.Logger) error {
	if cfg.WorkerGOGC > 0 {
		debug.SetGCPercent(cfg.WorkerGOGC)
	}
	// Process-wide in the SDK: set before any worker starts.
	tworker.SetStickyWorkflowCacheSize(cfg.WorkerStickyCache)
	p := &process{cfg: cfg, logger: logger, reg: prometheus.NewRegistry()}
	if err := p.registerMetrics(); err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	temporalMetrics, closeTemporalMetrics := conn.TemporalMetrics(p.reg, logger)
	defer closeLogged(logger, "temporal metrics", closeTemporalMetrics.Close)
	// Bind first: a taken port fails the start before anything else opens.
	ln, err := net.Listen("tcp", cfg.WorkerMetricsAddr)
	if err != nil {
		return fmt.Errorf("worker: listen for metrics on %s: %w", cfg.WorkerMetricsAddr, err)
	}
	defer p.serveMetrics(ctx, ln)()

	closeAll, err := p.open(ctx, conn.WithMetrics(temporalMetrics))
	defer closeAll()
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("worker: %w", err)
	}
	w, err := p.startTemporalWorker()
	if err != nil {
		return fmt.Errorf("worker: start temporal worker: %w", err)
	}
	// work bounds the relay's in-flight batch; it outlives ctx until the
	// shutdown deadline.
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	var bg sync.WaitGroup
	relayDone := p.startLoops(ctx, work, &bg)
	logger.Info("worker: running", "task_queue", cfg.TaskQueue, "relay_consumer", cfg.RelayConsumer,
		"metrics_addr", ln.Addr().String())

	<-ctx.Done()
	p.shutdown(ctx, w, relayDone, cancelWork)
	bg.Wait()
	logger.Info("worker: stopped")
	return nil
}

// process is one worker process's dependencies, opened by Run.
type process struct {
	cfg        *config.Config
	logger     *slog.Logger
	reg        *prometheus.Registry
	metrics    *Metrics
	actMetrics *activities.Metrics
	startTimes *startTimer
	rdb        *redisgateway.Client
	st         *store.Store
	tc         client.Client
}

func (p *process) registerMetrics() error {
	p.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildinfo.Collector())
	var err error
	if p.metrics, err = NewMetrics(p.reg); err != nil {
		return err
	}
	if p.actMetrics, err = activities.NewMetrics(p.reg); err != nil {
		return err
	}
	p.startTimes, err = newStartTimer(p.reg)
	return err
}

// serveMetrics serves /metrics and /healthz on ln; the returned func stops
// the server.
func (p *process) serveMetrics(ctx context.Context, ln net.Listener) func() {
	srv := metricsServer(p.reg, p.cfg.Dev())
	serveDone := make(chan struct{})
	go func() {
		defer close(serveDone)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			p.logger.Error("worker: metrics server", "err", err)
		}
	}()
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			p.logger.Warn("worker: metrics server shutdown", "err", err)
		}
		<-serveDone
	}
}

// open connects Redis, MariaDB (waiting for it) and Temporal; the
// returned func closes what was opened, also after an error.
func (p *process) open(ctx context.Context, temporalOpts ...conn.TemporalOption) (func(), error) {
	var closers []func()
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	redisClient, err := conn.Redis(p.cfg)
	if err != nil {
		return closeAll, err
	}
	p.rdb = redisgateway.NewClient(redisClient)
	closers = append(closers, func() { closeLogged(p.logger, "redis", p.rdb.Close) })
	if err := p.rdb.InstrumentScripts(p.reg); err != nil {
		return closeAll, err
	}
	if p.st, err = conn.StoreWhenReady(ctx, p.cfg, p.logger); err != nil {
		return closeAll, err
	}
	closers = append(closers, func() { closeLogged(p.logger, "store", p.st.Close) })
	if err := conn.InstrumentReplica(p.reg, p.st); err != nil {
		return closeAll, err
	}
	if p.tc, err = dialTemporal(ctx, p.cfg, p.logger, temporalOpts...); err != nil {
		return closeAll, err
	}
	closers = append(closers, p.tc.Close)
	return closeAll, nil
}

func (p *process) start(ctx context.Context, in domain.OrderInput) error {
	return temporalgateway.Start(ctx, p.tc, p.cfg.TaskQueue, in)
}

// startTemporalWorker registers the order and sale workflows and their
// activities (this is the project's one worker process) and starts it.
func (p *process) startTemporalWorker() (tworker.Worker, error) {
	restart := func(ctx context.Context, in domain.OrderInput) error {
		_, err := temporalgateway.Restart(ctx, p.tc, p.cfg.TaskQueue, in)
		return err
	}
	w := tworker.New(p.tc, p.cfg.TaskQueue, tworker.Options{
		// Leave part of the budget for the relay and the clients.
		WorkerStopTimeout: p.cfg.ShutdownTimeout * 8 / 10,
	})
	workflows.Register(w, &activities.Activities{Store: p.st, Redis: p.rdb, FailAfterCommit: p.cfg.FaultFailAfterCommit, Metrics: p.actMetrics})
	workflows.RegisterSale(w, &activities.SaleActivities{
		Store:    p.st,
		Redis:    p.rdb,
		Temporal: p.tc,
		Metrics:  p.actMetrics,
		Logger:   p.logger,
		Slots:    activities.NewReconcileSlots(p.cfg.ReconcileConcurrency),
		Reconciler: &reconcile.Reconciler{
			Store: p.st, Redis: p.rdb, Temporal: p.tc, Start: p.startTimes.wrap("reconcile", p.start), Restart: restart, Logger: p.logger,
		},
	})
	return w, w.Start()
}

// startLoops starts the relay, the stock recorder and follower, the
// outbox relay, the fleet observer, the resyncer and the lost holds'
// starts, the retirer, the sale signaller and the sale sweep; the channel
// closes when the relay has finished.
func (p *process) startLoops(ctx, work context.Context, bg *sync.WaitGroup) <-chan struct{} {
	st, rdb, logger, cfg := p.st, p.rdb, p.logger, p.cfg
	relay := &Relay{Redis: rdb, Store: st, Starter: p.startTimes.wrap("inbox_relay", p.start), Consumer: cfg.RelayConsumer,
		MinIdle: cfg.RelayMinIdle, DeadAfter: cfg.RelayDeadAfter, MaxDelivery: cfg.RelayMaxDelivery, Logger: logger, Metrics: p.metrics}
	relayDone := make(chan struct{})
	bg.Go(func() {
		defer close(relayDone)
		relay.Run(ctx, work)
	})
	recorder := &StockRecorder{Redis: rdb, Store: st, Logger: logger}
	bg.Go(func() { recorder.Run(ctx) })
	follower := &Follower{Redis: rdb, Store: st, Logger: logger}
	bg.Go(func() { follower.Run(ctx) })
	outbox := &OutboxRelay{Store: st, Starter: p.startTimes.wrap("outbox_relay", p.start), MinAge: 3 * time.Second, Every: time.Second, Logger: logger}
	bg.Go(func() { outbox.Run(ctx) })
	observer := runObserver(ctx, bg, cfg, st, rdb, logger)
	lostHolds := &LostHolds{Store: st, Redis: rdb, InRelay: relay.InHand, OpenSales: openSaleList(st), Logger: logger,
		Start: func(ctx context.Context, in domain.OrderInput) (temporalgateway.StartOutcome, error) {
			return temporalgateway.StartOutcomeOf(ctx, p.tc, cfg.TaskQueue, in)
		}}
	bg.Go(func() { lostHolds.Run(ctx) })
	resyncer := &Resyncer{Store: st, Redis: rdb, Temporal: p.tc, Comeback: degraded.NewComeback(cfg.Degraded, st, observer, logger),
		Logger: logger, Rebuilt: p.metrics.Rebuilt, HoldsLost: lostHolds.Changed}
	bg.Go(func() { resyncer.Run(ctx) })
	retirer := &Retirer{Store: st, Redis: rdb, Metrics: p.metrics, ActMetrics: p.actMetrics, Logger: logger}
	bg.Go(func() { retirer.Run(ctx) })
	signaller := p.saleSignaller()
	bg.Go(func() { signaller.Run(ctx) })
	if cfg.SaleSweep {
		sweeper := &SaleSweeper{OpenSales: openSaleList(st), Every: 30 * time.Second, RecheckEvery: 10 * time.Minute, Logger: logger,
			Start: func(ctx context.Context, in domain.SaleInput) error {
				return temporalgateway.StartSale(ctx, p.tc, cfg.TaskQueue, in)
			},
			Running: func(ctx context.Context) (map[int64]bool, error) { return temporalgateway.RunningSales(ctx, p.tc) }}
		bg.Go(func() { sweeper.Run(ctx) })
	}
	return relayDone
}

// saleSignaller is the process's sale signaller, reading the sales
// directory (an idle tick costs no statement).
func (p *process) saleSignaller() *SaleSignaller {
	return &SaleSignaller{Redis: p.rdb, OpenSales: openSaleList(p.st), Logger: p.logger,
		Signal: func(ctx context.Context, saleID int64) error {
			return temporalgateway.SignalSaleChanged(ctx, p.tc, saleID)
		}}
}

// openSaleList is the store's directory of open sales as a list.
func openSaleList(st *store.Store) func(ctx context.Context) ([]*domain.Sale, error) {
	return func(ctx context.Context) ([]*domain.Sale, error) {
		open, err := st.OpenSales(ctx)
		if err != nil {
			return nil, err
		}
		return open.List(), nil
	}
}

// shutdown drains the Temporal worker while the relay finishes its batch,
// both within cfg.ShutdownTimeout.
func (p *process) shutdown(ctx context.Context, w tworker.Worker, relayDone <-chan struct{}, cancelWork func()) {
	p.logger.Info("worker: shutting down", "timeout", p.cfg.ShutdownTimeout)
	deadline, cancelDeadline := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.ShutdownTimeout)
	defer cancelDeadline()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		w.Stop()
	}()
	select {
	case <-relayDone:
	case <-deadline.Done():
		p.logger.Warn("worker: relay batch unfinished at the shutdown deadline; its entries stay pending")
		cancelWork()
	}
	select {
	case <-stopped:
	case <-deadline.Done():
		p.logger.Warn("worker: temporal worker still stopping at the shutdown deadline")
	}
}

// runObserver publishes the worker's own view of Redis (a ping every
// degraded.FleetCheck) in the fleet's, until ctx ends.
func runObserver(ctx context.Context, bg *sync.WaitGroup, cfg *config.Config, st *store.Store, rdb *redisgateway.Client, logger *slog.Logger) *degraded.Observer {
	pinger := degraded.NewPinger(rdb.Ping)
	observer := degraded.NewObserver(st, degraded.ObserverName("worker", cfg.Instance), "worker", pinger.Up, logger)
	bg.Go(func() { pinger.Run(ctx.Done()) })
	bg.Go(func() { observer.Run(ctx.Done()) })
	return observer
}

// metricsServer serves /metrics and a liveness /healthz, and in
// development mode Go's profiler under /debug/pprof/ (for profiling a
// drain; the API has SECKILL_PPROF_ADDR).
func metricsServer(reg *prometheus.Registry, profile bool) *http.Server {
	mux := http.NewServeMux()
	if profile {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg, Timeout: 10 * time.Second}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	})
	return &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      15 * time.Second,
		IdleTimeout:       60 * time.Second,
	}
}

// dialTemporal dials until Temporal answers or ctx ends, logging each failed
// attempt: the worker may start before the Temporal server does.
func dialTemporal(ctx context.Context, cfg *config.Config, logger *slog.Logger, opts ...conn.TemporalOption) (client.Client, error) {
	backoff := time.Second
	for attempt := 1; ; attempt++ {
		c, err := conn.Temporal(ctx, cfg, logger, temporalDialTimeout, opts...)
		if err == nil {
			return c, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("dial temporal: %w", ctx.Err())
		}
		logger.Warn("worker: temporal not answering", "attempt", attempt, "addr", cfg.TemporalAddress,
			"err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("dial temporal: %w", ctx.Err())
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, temporalMaxBackoff)
	}
}

func closeLogged(logger *slog.Logger, what string, closeFn func() error) {
	if err := closeFn(); err != nil {
		logger.Warn("worker: close "+what, "err", err)
	}
}
