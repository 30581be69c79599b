package backend

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/degraded"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/gate"
	"github.com/seckill/seckill/internal/idempotency"
	"github.com/seckill/seckill/internal/ratelimit"
	"github.com/seckill/seckill/internal/reqid"
	"github.com/seckill/seckill/operators"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/reservation"
	"github.com/seckill/seckill/salecache"
	"github.com/seckill/seckill/sales"
	"github.com/seckill/seckill/status"
	"github.com/seckill/seckill/store"
)

// Deps are what the API's services are built on. Temporal may be a lazy
// client, or nil: workflow starts are then left to the relay, and payment
// and reconciliation answer 503.
type Deps struct {
	Config   *config.Config
	Logger   *slog.Logger
	Store    *store.Store
	Redis    *redisgateway.Client
	Temporal client.Client
	// Registry receives the services' metrics; nil makes a fresh one.
	Registry *prometheus.Registry
}

// Services are the API's services, built and wired to each other. Start
// runs their background work; Stop ends it.
type Services struct {
	Cache    *salecache.Cache
	Gate     *gate.Service
	Lottery  *reservation.Lottery
	Starter  *reservation.StartQueue
	Filters  *reservation.Filters
	Reserve  *reservation.Service
	Orders   *reservation.Orders
	Waitlist *reservation.Waitlist
	// Operator is the admin routes' use cases on sales; Records the admin
	// audit and the refunds.
	Operator *sales.Operator
	Records  *operators.Service
	// Listing pages through the sales: the storefront's and the operators'.
	Listing *sales.Listing
	// Fleet is the fleet's view of Redis: only Redis down for most of the
	// fleet moves a sale to the database path. Guard is the degraded
	// mode's breaker, switch and database-path limiter on this instance.
	Fleet   *degraded.Observer
	Guard   *degraded.Guard
	Reads   *status.Reader
	Hub     *status.Hub
	Metrics *Metrics
	// Registry holds the services' metrics; the API adds its own and
	// serves it on /metrics.
	Registry *prometheus.Registry

	backend  *Backend
	cfg      *config.Config
	logger   *slog.Logger
	rdb      *redisgateway.Client
	temporal client.Client
	// perUser is the reservation filters' per-user bucket, swept here.
	perUser *ratelimit.Keyed[int64]

	stop      chan struct{}
	stopOnce  sync.Once
	startOnce sync.Once
	// drainCtx bounds the starter's drain; Stop publishes it by closing
	// stop.
	drainCtx context.Context
	bg       sync.WaitGroup
}

// Build builds the API's services. A failure here is a programming error
// (a clashing metric, a client type redisgateway does not know), so it panics.
func Build(d Deps) *Services {
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.Registry == nil {
		d.Registry = prometheus.NewRegistry()
	}
	cfg, logger, b := d.Config, d.Logger, New(d.Store)
	sv := &Services{
		backend: b, cfg: cfg, logger: logger, rdb: d.Redis, temporal: d.Temporal, Registry: d.Registry,
		stop:    make(chan struct{}),
		Cache:   salecache.New(d.Store, d.Redis, cfg.RedisTimeout, logger),
		Gate:    gate.New(d.Store, cfg.TokenKey, cfg.TokenKeyPrevious),
		Records: operators.New(d.Store, logger),
		Lottery: reservation.NewLottery(cfg.TokenKey, cfg.OpeningPool, cfg.OpeningGrace, d.Redis),
		perUser: ratelimit.NewKeyed(cfg.PerUserRPS, max(cfg.PerUserBurst, 2), 1<<20, time.Minute, ratelimit.HashUser),
	}
	m, err := newMetrics(d.Registry)
	must("service metrics", err)
	sv.Metrics = m
	sv.Starter = reservation.NewStartQueue(reservation.StartQueueDeps{Capacity: cfg.StarterQueue, Temporal: d.Temporal,
		TaskQueue: cfg.TaskQueue, Redis: d.Redis, RedisTimeout: cfg.RedisTimeout, Logger: logger, Count: m.Starter.Inc, Store: d.Store})
	must("service metrics", registerQueue(d.Registry, func() float64 { return float64(sv.Starter.Len()) }))
	sv.degradedMode(d)
	sv.Reserve = reservation.New(reservationSettings(cfg), reservation.Deps{
		Script: d.Redis, HoldIndex: d.Redis, Ledger: reservation.StoreLedger{Store: d.Store},
		Syncer: reservation.SalesSyncer{Store: d.Store, Redis: d.Redis}, Starter: sv.Starter, Fleet: sv.Fleet, Degraded: sv.Guard,
		Logger: logger, HoldOutcome: m.HoldRecords.Inc,
	})
	sv.Filters = reservation.NewFilters(reservation.FilterDeps{Cache: sv.Cache, Gate: sv.Gate, Lottery: sv.Lottery, PerUser: sv.perUser,
		PerUserRPS: cfg.PerUserRPS, RedisTimeout: cfg.RedisTimeout, Count: m.Filter, Logger: logger})
	sv.Operator = sales.NewOperator(sales.OperatorDeps{Redis: d.Redis, Temporal: d.Temporal, TaskQueue: cfg.TaskQueue,
		Cache: sv.Cache, Logger: logger, Go: sv.goBackground, Stop: sv.stop, Store: d.Store})
	sv.Listing = sales.NewListing(sales.ListingDeps{Store: d.Store, Cache: sv.Cache, TokenKey: cfg.TokenKey,
		PreviousTokenKey: cfg.TokenKeyPrevious, Logger: logger})
	sv.buildReads(d)
	return sv
}

// degradedMode builds the instance's degraded mode: its heartbeat on
// Redis, the fleet observer that publishes it (its gauges registered) and
// the guard.
func (sv *Services) degradedMode(d Deps) {
	cfg := d.Config
	heartbeat := degraded.NewHeartbeat(cfg.RedisTimeout)
	sv.Fleet = degraded.NewObserver(d.Store, degraded.ObserverName("api", cfg.Instance), "api", heartbeat.Up, sv.logger)
	for _, g := range sv.Fleet.Gauges() {
		must("service metrics", d.Registry.Register(g))
	}
	sv.Guard = degraded.NewGuard(cfg.Degraded, degraded.GuardDeps{RedisTimeout: cfg.RedisTimeout, ClockSkew: cfg.ClockSkew,
		Heartbeat: heartbeat, Fleet: sv.Fleet, BreakerState: sv.Metrics.Breaker, Logger: sv.logger, Store: d.Store})
}

// buildReads builds the waitlist, the status reads and the order use
// cases, which settle the reads.
func (sv *Services) buildReads(d Deps) {
	cfg, logger := sv.cfg, sv.logger
	var handOverStarts reservation.Starter
	if cfg.APIStartsRedisOrders {
		handOverStarts = sv.Starter
	}
	sv.Waitlist = reservation.NewWaitlist(reservation.WaitlistDeps{
		Cache: sv.Cache, Gate: sv.Gate, Redis: d.Redis, Holds: sv.Reserve.Holds(), Starter: handOverStarts,
		TokenKey: cfg.TokenKey, HandedOver: sv.Metrics.HandOvers.Inc, Logger: logger, Store: d.Store,
	})
	sv.Reads = status.NewReader(status.Deps{Cache: sv.Cache, Redis: d.Redis, RedisTimeout: cfg.RedisTimeout,
		Logger: logger, Count: sv.Metrics.StatusReads.Inc, Store: d.Store})
	sv.Hub = status.NewHub(sv.Reads, sv.Cache.Blacklisted, sv.stop, logger)
	sv.Orders = reservation.NewOrders(reservation.OrdersDeps{
		Temporal: d.Temporal, Redis: d.Redis, RedisTimeout: cfg.RedisTimeout, Reservations: sv.Reserve,
		Repair: func(ctx context.Context, token string) (bool, error) {
			return sv.reconciler(logger).RepairToken(ctx, token)
		},
		Settle: sv.Reads.Settle, Returned: sv.Cache.DropMark, PriceOf: sv.priceOf, Logger: logger, Store: d.Store,
	})
}

// reservationSettings are the reservation service's settings of cfg.
func reservationSettings(cfg *config.Config) reservation.Settings {
	return reservation.Settings{
		TokenKey: cfg.TokenKey, RedisTimeout: cfg.RedisTimeout, ClockSkew: cfg.ClockSkew,
		StartsRedisOrders: cfg.APIStartsRedisOrders, FaultExit: cfg.Dev() && cfg.FaultExitAfterReserve,
	}
}

// must panics on a programming error found while building the services.
func must(what string, err error) {
	if err != nil {
		panic(fmt.Sprintf("%s: %v", what, err))
	}
}

// Start runs the background work: the starter, the cache refresher, the
// fleet observer, the breaker's probe and heartbeat and the status event
// fan-in. It runs once; Stop ends it.
func (sv *Services) Start() {
	sv.startOnce.Do(func() {
		aside, err := sv.rdb.Aside()
		must("redis", err) // a client type redisgateway does not know
		sv.Starter.Run(sv.stop, func() context.Context { return sv.drainCtx })
		sv.goBackground(sv.background)
		sv.Fleet.Look() // before the first hold: see HoldsTakeUnits
		sv.goBackground(func() { sv.Fleet.Run(sv.stop) })
		sv.goBackground(func() {
			sv.Guard.Watch(sv.stop, sv.rdb.Ping, aside.PingAll)
			if err := aside.Close(); err != nil {
				sv.logger.Warn("close the heartbeat's redis client", "err", err)
			}
		})
		sv.goBackground(func() { sv.Hub.Run(sv.rdb) })
	})
}

// Stop ends the background work and drains the workflow starter's queue
// within ctx.
func (sv *Services) Stop(ctx context.Context) {
	sv.stopOnce.Do(func() {
		sv.drainCtx = ctx // published to the starter by closing stop
		close(sv.stop)
		sv.bg.Wait()
		sv.Starter.Wait()
	})
}

// goBackground runs fn as background work that Stop waits for.
func (sv *Services) goBackground(fn func()) {
	sv.bg.Go(fn)
}

// background refreshes the sales every second and sweeps the idle
// per-user buckets every 30 seconds.
func (sv *Services) background() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-sv.stop; cancel() }()
	sv.refresh(ctx)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-sv.stop:
			return
		case now := <-tick.C:
			sv.refresh(ctx)
			if now.Second()%30 == 0 {
				sv.perUser.Sweep(now)
			}
		}
	}
}

// refresh re-reads the sale cache, then the gate's lists of its sales,
// drops what is kept of retired sales, and hands returned units to
// waitlists.
func (sv *Services) refresh(ctx context.Context) {
	if err := sv.Cache.Refresh(ctx); err != nil && ctx.Err() == nil {
		sv.logger.Warn("sale cache refresh", "err", err)
	}
	gctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	open := sv.Cache.Sales()
	if err := sv.Gate.Refresh(gctx, open); err != nil && ctx.Err() == nil {
		sv.logger.Warn("gate refresh", "err", err)
	}
	sv.Lottery.Sweep(open, time.Now())
	sv.forgetRetired()
	sv.Waitlist.HandOverAll(ctx, time.Now())
}

// forgetRetired drops the status reader's state of every sale the cache
// no longer holds (retired ones); the cache, the gate's allowlists and the
// lottery drop theirs in their own refresh.
func (sv *Services) forgetRetired() {
	sv.Reads.KeepSales(func(id int64) bool { return sv.Cache.Cached(id) != nil })
}

// Ping checks the database answers (readiness).
func (sv *Services) Ping(ctx context.Context) error { return sv.backend.Ping(ctx) }

// Idempotency is the Idempotency-Key middleware, its keys in the database
// (idempotency.New).
func (sv *Services) Idempotency(caller func(*fiber.Ctx) int64, write time.Duration) *idempotency.Middleware {
	return idempotency.New(sv.backend.st, caller, write, sv.logger)
}

// priceOf is a sale's price, for a payment confirmed before its order
// exists.
func (sv *Services) priceOf(ctx context.Context, saleID int64) (int64, error) {
	e, err := sv.Cache.Get(ctx, saleID)
	if err != nil {
		if domain.ErrorCode(err) == domain.ENotFound {
			return 0, err
		}
		reqid.Logger(ctx, sv.logger).Warn("webhook: sale lookup", "sale_id", saleID, "err", err)
		return 0, domain.Unavailable("sale data unavailable")
	}
	return e.Sale().PriceCents, nil
}
