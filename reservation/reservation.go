// Package reservation is the reservation's use cases behind the API's
// admission filters: the atomic Redis script behind a circuit breaker, the
// retry of a call this process stalled, the database path when the fleet
// loses Redis, the record of each Redis hold before its 202, and the
// cancel of a reservation that has no order yet. It speaks to its gateways
// through small interfaces (Script, HoldIndex, Ledger, Syncer, Starter,
// Fleet), so its decisions are tested without services; the HTTP layer
// only decodes, calls the service and encodes the answer.
package reservation

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/sales"
	"github.com/seckill/seckill/store"
)

// The layers of the filter metric (seckill_filter_total) a reservation's
// outcome is counted under.
const (
	LayerRedis    = "redis"
	LayerDatabase = "database"
)

// Script is the sale's stock in Redis: the atomic reserve script
// (lua.Client).
type Script interface {
	Reserve(ctx context.Context, a lua.ReserveArgs) (lua.ReserveResult, error)
}

// Ledger is the database: the database path's transaction, the mode
// switch, a reservation's row and the record of Redis holds (StoreLedger).
type Ledger interface {
	HoldLedger
	ReserveInDBWithSkew(ctx context.Context, in domain.OrderInput, skew time.Duration) (*domain.Reservation, bool, error)
	SwitchToDatabase(ctx context.Context, saleID int64, holdOff, minDwell time.Duration) (*domain.Sale, error)
	// GetReservation answers store.ErrNotFound for no row.
	GetReservation(ctx context.Context, token string) (*domain.Reservation, error)
	RecordReservation(ctx context.Context, in domain.OrderInput) (*domain.Reservation, error)
	EndQueued(ctx context.Context, token string, to domain.ReservationStatus, reason string) (*domain.Reservation, error)
	EnqueueStart(ctx context.Context, token string, saleID int64) error
	// MarkRedisWentBack asks the worker to rebuild the sale in Redis from
	// the database (store.MarkRedisWentBack).
	MarkRedisWentBack(ctx context.Context, saleID int64) error
}

// StoreLedger is the Ledger of a store.
type StoreLedger struct{ *store.Store }

// SwitchToDatabase moves the sale to the database path (sales.SwitchToDatabase).
func (l StoreLedger) SwitchToDatabase(ctx context.Context, saleID int64, holdOff, minDwell time.Duration) (*domain.Sale, error) {
	return sales.SwitchToDatabase(ctx, l.Store, saleID, holdOff, minDwell)
}

// Starter starts a reservation's order workflow soon, without waiting.
type Starter interface {
	Enqueue(ctx context.Context, in domain.OrderInput)
}

// Fleet is the fleet's view of Redis (fleet.Observer): only Redis down
// for most of the fleet moves a sale to the database path; and whether
// every worker places the order of a hold that took its unit when it was
// recorded (domain.HoldRecordVersion; not while an older release's worker
// runs).
type Fleet interface {
	RedisDown() bool
	HoldsTakeUnits() bool
}

// Cached is this instance's picture of a sale (the API's sale cache),
// which a reservation reads and corrects.
type Cached interface {
	// OnRedis reports whether the sale is on Redis at epoch.
	OnRedis(epoch int64) bool
	// StockSeen records the stock a script answer saw.
	StockSeen(left int64)
	// SoldOut records that the script found no unit left.
	SoldOut()
	// Moved stores the sale this instance has just moved to the database
	// path.
	Moved(sale *domain.Sale)
}

// Request is a reservation request the admission filters let through.
type Request struct {
	SaleID, UserID int64
	RequestID      string
	Sale           *domain.Sale // as cached when admitted
	Cached         Cached
}

// Answer is a reservation's outcome: the token of a 202 when Reserve's
// error is nil. Layer and Reason name the outcome in the filter metric,
// with or without an error.
type Answer struct {
	Token         string
	Layer, Reason string
}

// Settings are the use case's knobs (config.Config's).
type Settings struct {
	TokenKey     []byte
	RedisTimeout time.Duration
	ClockSkew    time.Duration
	ModeMinDwell time.Duration
	// FallbackRPS and FallbackInFlight bound the database path;
	// FallbackRetryAfter is its 429's Retry-After in seconds.
	FallbackRPS        float64
	FallbackInFlight   int
	FallbackRetryAfter int
	// StartsRedisOrders: a new Redis hold also starts its workflow from
	// here (the inbox relay starts it anyway).
	StartsRedisOrders bool
	// FaultExit (fault suite only): die like a SIGKILL between a hold and
	// its workflow start.
	FaultExit bool
}

// Deps are the gateways and the process's parts the service uses.
type Deps struct {
	Script    Script
	HoldIndex HoldIndex
	Ledger    Ledger
	Syncer    Syncer
	Starter   Starter
	Fleet     Fleet
	Logger    *slog.Logger
	// BreakerState receives the breaker's state (0 closed, 1 half-open,
	// 2 open); HoldOutcome counts each hold record's outcome.
	BreakerState prometheus.Gauge
	HoldOutcome  func(outcome string)
}

// Service reserves units for admitted requests.
type Service struct {
	set       Settings
	script    Script
	holdIndex HoldIndex
	ledger    Ledger
	syncer    Syncer
	starter   Starter
	fleet     Fleet
	logger    *slog.Logger
	breaker   *breaker
	holds     *Holds
	admission *admission
	errRate   *domain.Error
	tokens    *domain.Tokens
	// wentBack is when this instance last marked each sale whose Redis
	// went back in time (int64 -> time.Time): a mark a second is enough.
	wentBack sync.Map
}

// New builds the service. Run its breaker's probe and heartbeat with
// Watch.
func New(set Settings, d Deps) *Service {
	s := &Service{
		set: set, script: d.Script, holdIndex: d.HoldIndex, ledger: d.Ledger, syncer: d.Syncer,
		starter: d.Starter, fleet: d.Fleet, logger: d.Logger,
		breaker:   newBreaker(d.Logger, d.BreakerState, newHeartbeat(set.RedisTimeout)),
		holds:     newHolds(d.Ledger, d.Logger, d.HoldOutcome, nil),
		admission: newAdmission(set.FallbackRPS, set.FallbackInFlight),
		errRate:   &domain.Error{Code: domain.ERateLimited, Message: "too many requests", RetryAfter: max(set.FallbackRetryAfter, 1)},
		tokens:    domain.NewTokens(set.TokenKey),
	}
	s.holds.wentBack = s.redisWentBack
	s.holds.refusedHolder = s.restoreHolderReplay
	s.holds.takeUnits = d.Fleet.HoldsTakeUnits
	return s
}

// Holds is the service's hold recorder (the waitlist's hand-overs record
// through it too).
func (s *Service) Holds() *Holds { return s.holds }

// Watch pings Redis until stop: the heartbeat on aside connections
// (pingAll, every server) that tells a stalled process from a silent
// Redis, and the breaker's probe (ping) while it is not closed.
func (s *Service) Watch(stop <-chan struct{}, ping, pingAll func(context.Context) error) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.breaker.probe(stop, ping)
	}()
	s.breaker.heartbeat.run(stop, pingAll)
	<-done
}

// RedisAnswered reports whether Redis answered this instance's heartbeat
// within d (the fleet observer's view of this instance).
func (s *Service) RedisAnswered(d time.Duration) bool { return s.breaker.heartbeat.upWithin(d) }

// BreakerState is the breaker's state now.
func (s *Service) BreakerState() gobreaker.State { return s.breaker.cb.State() }

// InFlight is how many database-path transactions are running.
func (s *Service) InFlight() int { return len(s.admission.slots) }
