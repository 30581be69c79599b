// Package api is seckill's Fiber HTTP interface: the reservation hot path
// (cheapest filter first), the reservation and sale reads, payment and
// cancellation through the order workflow, and the operators' admin routes.
package api

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/contrib/otelfiber/v2"
	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/gofiber/fiber/v2/middleware/cors"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/time/rate"

	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/backend"
	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/edge"
	"github.com/seckill/seckill/internal/promreg"
	"github.com/seckill/seckill/internal/ratelimit"
	"github.com/seckill/seckill/internal/reqid"
	"github.com/seckill/seckill/wire"
)

//go:embed openapi.yaml
var openAPI []byte

// BodyLimit is the contract's largest request body.
const BodyLimit = 8 << 10

// AdminBodyLimit is the admin listener's (ADMIN_ADDR): an allowlist call
// carries up to 100,000 ids. On the public listener admin calls keep
// BodyLimit.
const AdminBodyLimit = 4 << 20

// Deps are what the API needs: its services built (backend.Build), whose
// registry also receives the API's metrics and is served on /metrics.
type Deps struct {
	Config   *config.Config
	Logger   *slog.Logger
	Services *backend.Services
	// IdentityProvider, when set, also verifies user tokens.
	IdentityProvider *auth.IdentityProvider
	// AdminIdentityProvider, when set, verifies operators' admin tokens.
	AdminIdentityProvider *auth.AdminProvider
}

// server is the HTTP room: the services it was handed, and what only
// HTTP needs (limiters, tokens, the edge, metrics of the answers).
type server struct {
	cfg    *config.Config
	logger *slog.Logger
	svc    services
	m      *metrics

	global  *rate.Limiter
	draw    *ratelimit.Draw
	tokens  *auth.Verifier
	perAddr *ratelimit.Keyed[netip.Addr]
	// tracing is the server span's middleware (traced places it); nil
	// with tracing off.
	tracing fiber.Handler

	// The connection edge, the refusals decided on headers until
	// answered (transport.go), the principals verified on headers until
	// their route's guard takes them (auth.go), and the read routes'
	// buckets.
	edge      *edge.Edge
	refusals  edge.Refusals
	verified  headerPrincipals
	readLimit routeLimit
	// Payments and cancels: buckets of the reservation path's sizes, their
	// own, so paying spends nothing of a user's reservation budget.
	writeLimit routeLimit

	// draining is set once the instance is told to stop (Server.Drain).
	draining atomic.Bool
	stop     chan struct{}
	stopOnce sync.Once
	// shutdownCtx bounds the shutdown hook when Server.Shutdown runs it.
	shutdownCtx context.Context
	bg          sync.WaitGroup
}

// Server is the API: the Fiber app and the connection edge in front of it.
type Server struct {
	App *fiber.App
	// Admin serves /admin/* and /metrics when ADMIN_ADDR is set (App then
	// answers them 404); nil when they are on App.
	Admin *fiber.App
	edge  *edge.Edge
	s     *server
}

// MaxConns is the edge's cap on open connections.
func (s *Server) MaxConns() int64 { return s.edge.MaxConns() }

// ServeAdmin serves the admin listener on ln until Admin shuts down.
func (s *Server) ServeAdmin(ln net.Listener) error { return s.Admin.Listener(ln) }

// Serve serves the API on ln behind the edge (connection caps, accept
// back-off, per-phase read timeouts) until the app shuts down.
func (s *Server) Serve(ln net.Listener) error { return s.App.Listener(s.edge.Listener(ln)) }

// Drain begins the instance's stop while it still serves: /readyz answers
// 503 naming shutdown, so load balancers take the instance out, and every
// answer carries Connection: close, so keep-alive clients reconnect to
// another instance. App.ShutdownWithTimeout ends it once load balancers
// had the time to notice.
func (s *Server) Drain() { s.s.draining.Store(true) }

// Shutdown stops the API within ctx: the listeners close, the requests in
// flight are answered (with Connection: close), the event streams are
// told to reconnect and closed, and the background work and the workflow
// starter's queue drain.
func (s *Server) Shutdown(ctx context.Context) error {
	s.s.shutdownCtx = ctx
	var adminErr error
	var wg sync.WaitGroup
	if s.Admin != nil {
		wg.Go(func() {
			if err := s.Admin.ShutdownWithContext(ctx); err != nil {
				adminErr = fmt.Errorf("admin listener: %w", err)
			}
		})
	}
	err := s.App.ShutdownWithContext(ctx)
	wg.Wait()
	return errors.Join(err, adminErr)
}

// New builds the app and starts its own background work (the limiter
// sweeper) and its services' (Services.Start); app.Shutdown stops both.
// Serve it with NewServer(d).Serve to have the edge in front of it.
func New(d Deps) *fiber.App { return NewServer(d).App }

// NewServer builds the app and its edge; see New.
func NewServer(d Deps) *Server {
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	reg := d.Services.Registry
	s := newServerState(d)
	app := s.publicApp()
	s.routes(app)
	var adminApp *fiber.App
	if s.cfg.AdminAddr == "" {
		s.adminRoutes(app, reg)
	} else {
		adminApp = fiber.New(fiber.Config{AppName: "seckill-admin", BodyLimit: AdminBodyLimit, ErrorHandler: errorHandler(s.logger),
			DisableStartupMessage: true, ReadTimeout: s.cfg.BodyTimeout, WriteTimeout: 20 * time.Second, IdleTimeout: s.cfg.IdleTimeout})
		adminApp.Use(requestID, s.observeRequests)
		s.adminRoutes(adminApp, reg)
	}
	s.svc.Start()
	s.goBackground(s.sweep)
	app.Hooks().OnShutdown(func() error {
		s.stopOnce.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
			defer cancel()
			if s.shutdownCtx != nil { // Server.Shutdown's deadline
				ctx = s.shutdownCtx
			}
			close(s.stop)
			s.bg.Wait()
			s.svc.Stop(ctx)
		})
		return nil
	})
	return &Server{App: app, Admin: adminApp, edge: s.edge, s: s}
}

// newServerState builds the HTTP room's parts around the services:
// limiters, token verification, metrics and the edge. A failure here is a
// programming error (a clashing metric), so it panics.
func newServerState(d Deps) *server {
	cfg, logger, reg := d.Config, d.Logger, d.Services.Registry
	s := &server{
		cfg:     cfg,
		logger:  logger,
		svc:     servicesOf(d.Services),
		global:  rate.NewLimiter(ratelimit.Limit(cfg.GlobalRPS), max(cfg.GlobalBurst, 1)),
		draw:    ratelimit.NewDraw(cfg.TokenKey, cfg.GlobalRPS),
		perAddr: ratelimit.NewKeyed(cfg.PerAddrRPS, cfg.PerAddrBurst, 1<<17, time.Minute, ratelimit.HashAddr),
		stop:    make(chan struct{}),
	}
	if cfg.Tracing {
		s.tracing = otelfiber.Middleware()
	}
	tokens, err := auth.NewVerifier(auth.Secrets{User: cfg.JWTSecrets(), Admin: [][]byte{cfg.AdminJWTSecret}, IdP: d.IdentityProvider,
		Operators: d.AdminIdentityProvider}, cfg.TokenCacheSize)
	must("token verifier", err)
	s.tokens = tokens
	s.readLimit = newRouteLimit(cfg.ReadPerUserRPS, cfg.ReadPerUserBurst, cfg.ReadRPS, cfg.ReadBurst)
	s.writeLimit = newRouteLimit(cfg.PerUserRPS, max(cfg.PerUserBurst, 2), cfg.PerAddrRPS, cfg.PerAddrBurst)
	s.m, err = newMetrics(reg, s.svc.countFilter)
	must("api metrics", err)
	_, err = promreg.Register[prometheus.Collector](reg, newSaleModeCollector(s.svc.Cache))
	must("api metrics", err)
	_, err = promreg.Register[prometheus.Collector](reg, newSaleStateCollector(s.svc))
	must("api metrics", err)
	s.edge, err = edge.New(edge.Limits{MaxConns: cfg.MaxConns, MaxConnsPerAddr: cfg.MaxConnsPerAddr,
		Exempt: append(append([]netip.Prefix{}, cfg.TrustedProxies...), cfg.TrustedAddrs...),
		Idle:   cfg.IdleTimeout, Header: cfg.HeaderTimeout}, logger, reg)
	must("api metrics", err)
	return s
}

// must panics on a programming error found while building the server.
func must(what string, err error) {
	if err != nil {
		panic(fmt.Sprintf("%s: %v", what, err))
	}
}

// publicApp is the Fiber app of the public listener, behind the edge.
func (s *server) publicApp() *fiber.App {
	app := fiber.New(fiber.Config{
		AppName:               "seckill",
		BodyLimit:             BodyLimit,
		ErrorHandler:          errorHandler(s.logger),
		DisableStartupMessage: true,
		// No ReadTimeout: the edge's connections keep the idle, header and
		// body deadlines themselves (internal/edge); IdleTimeout is fasthttp's
		// wait for a keep-alive request's first byte.
		WriteTimeout: 20 * time.Second,
		IdleTimeout:  s.cfg.IdleTimeout,
	})
	srv := app.Server()
	// The edge caps connections itself (closing, not answering): fasthttp's
	// own cap, which answers a plain-text 503, must never be the lower one.
	srv.Concurrency = max(srv.Concurrency, int(s.edge.MaxConns())+1)
	srv.Handler = s.wrapHandler(srv.Handler)
	srv.ErrorHandler = s.transportError
	srv.HeaderReceived = s.headerReceived
	srv.ExpectHandler = s.expect
	// Event streams take their connections over (events.go) and close
	// them themselves.
	srv.KeepHijackedConns = true
	// Answers given while the server shuts down say Connection: close.
	srv.CloseOnShutdown = true
	app.Use(requestID)
	app.Use(s.observeRequests)
	if len(s.cfg.CORSOrigins) > 0 {
		app.Use(cors.New(cors.Config{
			AllowOrigins:  strings.Join(s.cfg.CORSOrigins, ","),
			AllowHeaders:  "Authorization, Content-Type, X-Request-Id",
			ExposeHeaders: "X-Request-Id",
			AllowMethods:  "GET,POST,PUT,DELETE",
		}))
	}
	return app
}

// goBackground runs fn as background work that shutdown waits for.
func (s *server) goBackground(fn func()) {
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		fn()
	}()
}

// routes registers every route of the API but the operators' (adminRoutes).
// A route is traced (s.traced) only past its filters: a refusal, a probe
// or a scrape makes no span.
func (s *server) routes(app *fiber.App) {
	user := s.authenticate(false)
	t := s.traced

	app.Get("/healthz", func(c *fiber.Ctx) error { return c.JSON(fiber.Map{"status": "ok"}) })
	app.Get("/readyz", s.readyz)
	app.Get("/openapi.yaml", s.limitReads, func(c *fiber.Ctx) error {
		c.Set(fiber.HeaderContentType, "application/yaml")
		return c.Send(openAPI)
	})

	app.Get("/api/v1/sales", t(s.limitReads, s.listStorefront)...)
	app.Get("/api/v1/sales/:sale_id", t(s.limitReads, s.getSale)...)
	app.Post("/api/v1/sales/:sale_id/reservations", t(user, s.admitReservation, s.reserve)...)
	app.Get("/api/v1/reservations/:token", t(user, s.limitReads, s.getReservation)...)
	app.Get("/api/v1/reservations/:token/events", t(user, s.limitReads, s.reservationEvents)...)
	app.Post("/api/v1/reservations/:token/payment", t(user, s.limitWrites, s.pay)...)
	app.Post("/api/v1/reservations/:token/cancel", t(user, s.limitWrites, s.cancel)...)
	app.Get("/api/v1/me/reservations", t(user, s.limitReads, s.listReservations)...)
	app.Get("/api/v1/sales/:sale_id/challenge", t(user, s.limitReads, s.getChallenge)...)
	app.Post("/api/v1/sales/:sale_id/challenge", t(user, s.limitWrites, s.redeemChallenge)...)
	app.Post("/api/v1/sales/:sale_id/waitlist", t(user, s.limitWrites, s.joinWaitlist)...)
	app.Get("/api/v1/sales/:sale_id/waitlist", t(user, s.limitReads, s.getWaitlistPosition)...)
	app.Delete("/api/v1/sales/:sale_id/waitlist", t(user, s.limitWrites, s.leaveWaitlist)...)
	app.Post("/api/v1/appeals", t(user, s.limitWrites, s.fileAppeal)...)

	// The payment provider signs its calls (no bearer token).
	app.Post("/webhooks/payments", t(s.paymentWebhook)...)

	app.Get("/", s.limitReads, s.storefront)
	app.Get("/web/:file", s.limitReads, s.webAsset)
	if s.cfg.Dev() {
		app.Post("/dev/login", s.devLogin)
	}
}

// traced returns a route's handlers with the tracing middleware (otelfiber,
// named by route template) just before the last one, so the filters before
// it refuse without a span; the handlers unchanged with tracing off.
func (s *server) traced(handlers ...fiber.Handler) []fiber.Handler {
	if !s.cfg.Tracing {
		return handlers
	}
	last := len(handlers) - 1
	return append(append(handlers[:last:last], s.tracing), handlers[last])
}

// adminRoutes registers the operators' routes and /metrics: on the API's
// listener, or on ADMIN_ADDR's alone.
func (s *server) adminRoutes(app *fiber.App, reg *prometheus.Registry) {
	admin := s.authenticate(true)
	keyed := s.svc.Idempotency(func(c *fiber.Ctx) int64 { return operatorScope(principal(c)) }, adminTimeout).Wrap
	t := func(handlers ...fiber.Handler) []fiber.Handler {
		last := len(handlers) - 1
		handlers[last] = s.operatorLogged(handlers[last])
		return s.traced(handlers...)
	}
	a := s.audited
	app.Get("/metrics", adaptor.HTTPHandler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
	app.Get("/console", s.console)
	app.Get("/console/:file", s.console)
	app.Get("/admin/v1/sales", t(admin, s.listSales)...)
	app.Get("/admin/v1/sales/:sale_id", t(admin, s.saleDetail(reg))...)
	app.Post("/admin/v1/sales", t(admin, keyed(a("create_sale", s.createSale)))...)
	app.Post("/admin/v1/sales/:sale_id/warmup", t(admin, a("warmup", s.warmup))...)
	app.Post("/admin/v1/sales/:sale_id/pause", t(admin, a("pause", s.control(domain.ControlPaused)))...)
	app.Post("/admin/v1/sales/:sale_id/resume", t(admin, a("resume", s.control(domain.ControlActive)))...)
	app.Post("/admin/v1/sales/:sale_id/stop", t(admin, a("stop", s.control(domain.ControlStopped)))...)
	app.Post("/admin/v1/sales/:sale_id/stock", t(admin, keyed(a("adjust_stock", s.adjustStock)))...)
	app.Get("/admin/v1/sales/:sale_id/reconciliation", t(admin, s.reconciliation)...)
	app.Put("/admin/v1/blacklist/:user_id", t(admin, a("blacklist", s.blacklist(true)))...)
	app.Delete("/admin/v1/blacklist/:user_id", t(admin, a("unblacklist", s.blacklist(false)))...)
	app.Get("/admin/v1/refunds", t(admin, s.listRefunds)...)
	app.Post("/admin/v1/sales/:sale_id/allowlist", t(admin, a("allowlist", s.updateAllowlist))...)
	app.Put("/admin/v1/challenge-exemptions/:user_id", t(admin, a("exempt", s.exempt(true)))...)
	app.Delete("/admin/v1/challenge-exemptions/:user_id", t(admin, a("unexempt", s.exempt(false)))...)
	app.Get("/admin/v1/appeals", t(admin, s.listAppeals)...)
	app.Post("/admin/v1/appeals/:appeal_id/resolve", t(admin, a("resolve_appeal", s.resolveAppeal))...)
	app.Get("/admin/v1/audit", t(admin, s.listAudit)...)
}

// operatorLogged gives an operator's request to the services with its
// logger (the request id, the admin, the trace), so what they log names
// who asked.
func (s *server) operatorLogged(h fiber.Handler) fiber.Handler {
	return func(c *fiber.Ctx) error {
		c.SetUserContext(reqid.WithLogger(c.UserContext(), s.log(c)))
		return h(c)
	}
}

// routeLimit is a group of routes' buckets: one per user, once
// authenticated, and one per client address (trusted addresses exempt).
type routeLimit struct {
	user    *ratelimit.Keyed[int64]
	userRPS float64
	addr    *ratelimit.Keyed[netip.Addr]
	addrRPS float64
}

func newRouteLimit(userRPS float64, userBurst int, addrRPS float64, addrBurst int) routeLimit {
	return routeLimit{
		user: ratelimit.NewKeyed(userRPS, userBurst, 1<<20, time.Minute, ratelimit.HashUser), userRPS: userRPS,
		addr: ratelimit.NewKeyed(addrRPS, addrBurst, 1<<17, time.Minute, ratelimit.HashAddr), addrRPS: addrRPS,
	}
}

func (l *routeLimit) sweep(now time.Time) {
	l.user.Sweep(now)
	l.addr.Sweep(now)
}

// limitReads guards the read routes (the storefront, the sale view, the
// reservation reads). Health probes and /metrics are not read routes.
func (s *server) limitReads(c *fiber.Ctx) error { return s.limitRoute(c, &s.readLimit) }

// limitWrites guards payments, cancels and the other user writes before
// anything is read, so a loop of made-up tokens is refused before it
// reaches the database.
func (s *server) limitWrites(c *fiber.Ctx) error { return s.limitRoute(c, &s.writeLimit) }

func (s *server) limitRoute(c *fiber.Ctx, l *routeLimit) error {
	now := time.Now()
	if p, ok := c.Locals(principalKey).(auth.Principal); ok && !l.user.Allow(p.UserID, now) {
		return s.rateLimited(c, l.userRPS)
	}
	if !s.addrAllowed(c, l.addr, now) {
		return s.rateLimited(c, l.addrRPS)
	}
	return c.Next()
}

// observeRequests counts and times every answer by route template and
// status, in one pass over the request, from when the server handed the
// request on (its clock read once for both).
func (s *server) observeRequests(c *fiber.Ctx) error {
	start := c.Context().Time()
	if start.IsZero() { // a handler called without the server
		start = time.Now()
	}
	err := c.Next()
	route := "unmatched"
	if r := c.Route(); r != nil && r.Path != "/" {
		route = r.Path
	}
	status := c.Response().StatusCode()
	if err != nil {
		// The error handler writes the answer after the middleware.
		status = statusOf(domain.ErrorCode(err))
		var fe *fiber.Error
		if errors.As(err, &fe) {
			status = fe.Code
		}
	}
	s.m.request(route, status, time.Since(start))
	return err
}

// sweep drops the idle buckets of the API's limiters every 30 seconds.
func (s *server) sweep() {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case now := <-tick.C:
			if now.Second()%30 == 0 {
				s.perAddr.Sweep(now)
				s.readLimit.sweep(now)
				s.writeLimit.sweep(now)
			}
		}
	}
}

func (s *server) readyz(c *fiber.Ctx) error {
	if s.draining.Load() {
		return c.Status(fiber.StatusServiceUnavailable).JSON(wire.Readiness{Status: wire.NotReady, Missing: []string{wire.MissingDrained}})
	}
	if err := s.svc.Ping(c.UserContext()); err != nil {
		s.log(c).Warn("readiness: mysql", "err", err)
		return c.Status(fiber.StatusServiceUnavailable).JSON(wire.Readiness{Status: wire.NotReady, Missing: []string{wire.MissingMySQL}})
	}
	if s.svc.Fleet.CutOff() {
		// Redis answers the rest of the fleet but not this instance: a
		// load balancer should send its clients elsewhere.
		return c.Status(fiber.StatusServiceUnavailable).JSON(wire.Readiness{Status: wire.NotReady, Missing: []string{wire.MissingRedis}})
	}
	return c.JSON(wire.Readiness{Status: wire.Ready})
}
