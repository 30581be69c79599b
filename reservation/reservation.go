// Package reservation is the reservation's use cases behind the API's
// admission filters: the atomic Redis script behind the degraded mode's
// circuit breaker, the retry of a call this process stalled, the database
// path when the fleet loses Redis, the record of each Redis hold before
// its 202, and the cancel of a reservation that has no order yet. It
// speaks to its gateways and to the degraded mode's policy through small
// interfaces (Script, HoldIndex, Ledger, Syncer, Starter, Fleet,
// Degraded), so its decisions are tested without services; the HTTP layer
// only decodes, calls the service and encodes the answer.
package reservation

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/lua"
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

// Ledger is the database: the database path's transaction, a
// reservation's row and the record of Redis holds (StoreLedger).
type Ledger interface {
	HoldLedger
	ReserveInDBWithSkew(ctx context.Context, in domain.OrderInput, skew time.Duration) (*domain.Reservation, bool, error)
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

// Starter starts a reservation's order workflow soon, without waiting.
type Starter interface {
	Enqueue(ctx context.Context, in domain.OrderInput)
}

// Fleet is what the fleet's view tells of the workers (degraded.Observer):
// whether every worker places the order of a hold that took its unit when
// it was recorded (domain.HoldRecordVersion; not while an older release's
// worker runs).
type Fleet interface {
	HoldsTakeUnits() bool
}

// Degraded is the degraded mode's policy on this instance (degraded.Guard):
// the breaker every Redis reservation call goes through, the fleet's
// evidence that Redis is down, the switch of a sale to the database path
// (its hold-off and dwell) and the database path's limiter.
type Degraded interface {
	// Call runs a Redis call through the breaker
	// (degraded.IsBreakerRefusal, degraded.IsClientStall).
	Call(fn func() (lua.ReserveResult, error)) (lua.ReserveResult, error)
	// RedisDown reports whether most of the fleet finds Redis down.
	RedisDown() bool
	// SwitchToDatabase moves the sale to the database path; the sale
	// returned is still on Redis when it came back too recently.
	SwitchToDatabase(ctx context.Context, saleID int64) (*domain.Sale, error)
	// Admit admits a database-path transaction, or answers its 429.
	Admit(now time.Time) (release func(), refusal *domain.Error, refused string)
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
	Degraded  Degraded
	Logger    *slog.Logger
	// HoldOutcome counts each hold record's outcome.
	HoldOutcome func(outcome string)
}

// Service reserves units for admitted requests.
type Service struct {
	set       Settings
	script    Script
	holdIndex HoldIndex
	ledger    Ledger
	syncer    Syncer
	starter   Starter
	degraded  Degraded
	logger    *slog.Logger
	holds     *Holds
	tokens    *domain.Tokens
	// wentBack is when this instance last marked each sale whose Redis
	// went back in time (int64 -> time.Time): a mark a second is enough.
	wentBack sync.Map
}

// New builds the service.
func New(set Settings, d Deps) *Service {
	s := &Service{
		set: set, script: d.Script, holdIndex: d.HoldIndex, ledger: d.Ledger, syncer: d.Syncer,
		starter: d.Starter, degraded: d.Degraded, logger: d.Logger,
		holds:  newHolds(d.Ledger, d.Logger, d.HoldOutcome, nil),
		tokens: domain.NewTokens(set.TokenKey),
	}
	s.holds.wentBack = s.redisWentBack
	s.holds.refusedHolder = s.restoreHolderReplay
	s.holds.takeUnits = d.Fleet.HoldsTakeUnits
	return s
}

// Holds is the service's hold recorder (the waitlist's hand-overs record
// through it too).
func (s *Service) Holds() *Holds { return s.holds }
