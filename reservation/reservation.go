// Package reservation is the reservation's use cases behind the API's
// admission filters: the atomic Redis script behind the degraded mode's
// circuit breaker, the retry of a call this process stalled, the database
// path when the fleet loses Redis, the record of each Redis hold before
// its 202, and the cancel of a reservation that has no order yet. It
// speaks to its gateways and to the degraded mode's policy through small
// interfaces (Script, HoldRecorder, Starter, Cached, Degraded, Ledger,
// HoldIndex, Syncer, Fleet), so its decisions are tested without services
// and Reserve reads as one story in this file; the HTTP layer only
// decodes, calls the service and encodes the answer.
package reservation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"syscall"
	"time"

	"github.com/seckill/seckill/degraded"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/reqid"
	"github.com/seckill/seckill/internal/telemetry"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/store"
)

// The layers of the filter metric (seckill_filter_total) a reservation's
// outcome is counted under.
const (
	LayerRedis    = "redis"
	LayerDatabase = "database"
)

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

// readTimeout bounds reading a reservation's row.
const readTimeout = 5 * time.Second

var errCutOff = domain.Unavailable("this instance cannot reach Redis now; retry with the same request_id")

// Reserve takes a unit for r: the atomic script, or the database path when
// the sale is in database mode or the fleet has lost Redis. Either way the
// token is the same, so a retry on the other path reaches the same
// reservation. Refusals are *domain.Error (a 503's outcome is unknown:
// the client retries with the same request_id); Answer names the outcome
// either way.
func (s *Service) Reserve(ctx context.Context, r Request) (Answer, error) {
	if r.Sale.Mode == domain.ModeResync {
		return Answer{Layer: LayerRedis, Reason: "resync"}, domain.ErrSaleResyncing
	}
	token := s.tokens.Derive(r.SaleID, r.UserID, r.RequestID)
	if r.Sale.Mode == domain.ModeDatabase {
		return s.reserveInDatabase(ctx, r, token)
	}
	res, err := s.callScript(ctx, r, token)
	if degraded.IsBreakerRefusal(err) {
		if !s.degraded.RedisDown() {
			// Redis fails this instance alone (or the fleet has not
			// agreed yet): one instance never moves a sale.
			return Answer{Layer: LayerRedis, Reason: "cut_off"}, errCutOff
		}
		// Redis is failing: no call was made, so the database path is safe.
		return s.reserveInDatabase(ctx, r, token)
	}
	if err != nil {
		// The script may or may not have run: never retried on the other
		// path; the client retries with the same request_id.
		reason := "error"
		if degraded.IsClientStall(err) {
			reason = "client_stall"
		}
		s.log(ctx).WarnContext(ctx, "reserve: redis", "sale_id", r.SaleID, "err", err)
		return Answer{Layer: LayerRedis, Reason: reason}, domain.ErrOutcomeUnknown
	}
	if res.Outcome == redisgateway.OutcomeAsk {
		return s.replayFromDatabase(ctx, r, token)
	}
	return s.answerScript(ctx, r, token, res)
}

// callScript runs the script through the breaker, and once more after a
// client-side stall. Redis answered while the first call waited: the wait
// was this process's. Asking again is the client's retry, made here: the
// script's replay key answers the first call's outcome if it ran. It starts
// only while this instance still sees the sale on Redis at the same epoch,
// as a first call does, so the database path's hold-off covers it. Refused
// by the breaker, the first call's outcome stays unknown: never the
// database path after a call that may have run.
func (s *Service) callScript(ctx context.Context, r Request, token string) (redisgateway.ReserveResult, error) {
	call := func() (redisgateway.ReserveResult, error) { return s.reserveViaRedis(ctx, reserveArgs(r, token)) }
	res, err := s.degraded.Call(call)
	if degraded.IsClientStall(err) && r.Cached.OnRedis(r.Sale.ModeEpoch) {
		s.log(ctx).InfoContext(ctx, "reserve: asking Redis again after a client-side stall", "sale_id", r.SaleID, "err", err)
		if again, againErr := s.degraded.Call(call); !degraded.IsBreakerRefusal(againErr) {
			res, err = again, againErr
		}
	}
	return res, err
}

func reserveArgs(r Request, token string) redisgateway.ReserveArgs {
	return redisgateway.ReserveArgs{SaleID: r.SaleID, UserID: r.UserID, RequestID: r.RequestID, Token: token, Epoch: r.Sale.ModeEpoch}
}

// reserveViaRedis is the one Redis call of the hot path, kept small so that
// the breaker and the database path can wrap it.
func (s *Service) reserveViaRedis(ctx context.Context, a redisgateway.ReserveArgs) (redisgateway.ReserveResult, error) {
	// The script takes nothing once Redis's clock passes the deadline, so
	// a call that outlives its timeout (a frozen Redis resuming) cannot
	// hold a unit the client was told nothing about; the skew keeps a
	// prompt call on a Redis whose clock runs ahead from being refused.
	a.Deadline = time.Now().Add(s.set.RedisTimeout + s.set.ClockSkew)
	ctx, cancel := context.WithTimeout(ctx, s.set.RedisTimeout)
	defer cancel()
	a.TraceParent = telemetry.TraceParent(ctx)
	a.HTTPRequestID = reqid.From(ctx)
	return s.script.Reserve(ctx, a)
}

// answerScript turns the reserve script's outcome into the answer.
func (s *Service) answerScript(ctx context.Context, r Request, token string, res redisgateway.ReserveResult) (Answer, error) {
	a := Answer{Layer: LayerRedis, Reason: res.Outcome}
	switch res.Outcome {
	case redisgateway.OutcomeOK:
		if s.set.FaultExit {
			// Fault suite: die like a SIGKILL between the hold and the start.
			_ = syscall.Kill(syscall.Getpid(), syscall.SIGKILL)
		}
		in := domain.RedisHoldInput(token, r.SaleID, r.UserID, r.RequestID)
		// The inbox relay starts the order (the script's XADD), and the
		// worker an order whose entry a Redis failover lost, from the
		// hold's record. The API's own start (SECKILL_API_STARTS_REDIS_ORDERS,
		// default off) does not wait for either; the second start of one
		// workflow id is refused, so it costs a call, not an order.
		if s.set.StartsRedisOrders {
			s.starter.Enqueue(ctx, in)
		}
		r.Cached.StockSeen(res.StockLeft)
		return s.promise(ctx, in, r.Sale.ModeEpoch, res.Seq, a)
	case redisgateway.OutcomeReplay:
		return s.promise(ctx, domain.RedisHoldInput(res.Token, r.SaleID, r.UserID, r.RequestID), r.Sale.ModeEpoch, 0, a)
	}
	refusal := res.Refusal()
	switch refusal {
	case nil:
		s.log(ctx).ErrorContext(ctx, "reserve: unexpected script outcome", "outcome", res.Outcome)
		return a, domain.ErrOutcomeUnknown
	case domain.ErrSoldOut:
		r.Cached.SoldOut()
	case domain.ErrAlreadyHolds:
		return s.answerBuyerMark(ctx, r, token, a)
	}
	return a, refusal
}

// answerBuyerMark answers a request the script refused for its user's
// buyer mark. The mark may be this very request's hold, put back without
// its replay key: a Redis that lost writes (a failover to a lagging
// replica, an AOF missing its tail) lost both, and a repair restored the
// mark of the live reservation. The database has every promised hold, so
// a reservation it has under the request's token makes this a replay,
// answered as the first time (and its replay key put back); otherwise the
// user holds another unit. While the database cannot tell, the outcome is
// unknown.
func (s *Service) answerBuyerMark(ctx context.Context, r Request, token string, a Answer) (Answer, error) {
	row, err := s.recorded(ctx, token)
	if err != nil {
		s.log(ctx).WarnContext(ctx, "reserve: ask the database whether a refused request is a replay", "sale_id", r.SaleID, "err", err)
		return Answer{Layer: LayerRedis, Reason: "error"}, domain.ErrOutcomeUnknown
	}
	if row == nil {
		return a, domain.ErrAlreadyHolds
	}
	in := domain.RedisHoldInput(token, r.SaleID, r.UserID, r.RequestID)
	ans, err := s.promise(ctx, in, r.Sale.ModeEpoch, 0, Answer{Layer: LayerRedis, Reason: redisgateway.OutcomeReplay})
	if err == nil {
		s.recorder.restoreHolderReplay(ctx, in, &store.LiveHold{Token: token, RequestID: r.RequestID})
	}
	return ans, err
}

// promise answers a Redis hold (new, numbered seq by Redis, or a replay of
// one): 202 once the database has recorded and granted it where the
// database path counts it; the database's refusal (409, 410) when it
// overruled Redis; else 503.
func (s *Service) promise(ctx context.Context, in domain.OrderInput, epoch, seq int64, a Answer) (Answer, error) {
	if err := s.holds.Promise(ctx, in, epoch, seq); err != nil {
		if !errors.Is(err, domain.ErrOutcomeUnknown) {
			a.Reason = "overruled"
		}
		return a, err
	}
	a.Token = in.Token
	return a, nil
}

// AcceptHold answers a replay of a Redis hold the caller found without the
// script (the sold-out mark's replay map): 202 once the hold is recorded.
func (s *Service) AcceptHold(ctx context.Context, r Request, token string) (Answer, error) {
	return s.promise(ctx, domain.RedisHoldInput(token, r.SaleID, r.UserID, r.RequestID), r.Sale.ModeEpoch, 0, Answer{})
}

// replayFromDatabase answers a request the replay map does not know from a
// user whose ended reservations' records moved out of Redis
// (redisgateway.OutcomeAsk): a row in the database is this request's (the token
// derives from it), so it is a replay, answered as the first time (a hold
// the database refused is refused again); else the script runs again,
// told that the database has none.
func (s *Service) replayFromDatabase(ctx context.Context, r Request, token string) (Answer, error) {
	row, err := s.recorded(ctx, token)
	if err != nil {
		s.log(ctx).WarnContext(ctx, "reserve: ask the database for a replay", "sale_id", r.SaleID, "err", err)
		return Answer{Layer: LayerRedis, Reason: "error"}, domain.ErrOutcomeUnknown
	}
	if row != nil {
		if refused := domain.RefusalOf(row.Status, row.FailReason); refused != nil {
			return Answer{Layer: LayerRedis, Reason: "overruled"}, refused
		}
		return Answer{Token: token, Layer: LayerRedis, Reason: redisgateway.OutcomeReplay}, nil
	}
	res, err := s.degraded.Call(func() (redisgateway.ReserveResult, error) {
		args := reserveArgs(r, token)
		args.NotInDatabase = true
		return s.reserveViaRedis(ctx, args)
	})
	if err == nil && res.Outcome == redisgateway.OutcomeAsk {
		err = errors.New("the script asked the database again")
	}
	if err != nil {
		s.log(ctx).WarnContext(ctx, "reserve: redis after asking the database", "sale_id", r.SaleID, "err", err)
		return Answer{Layer: LayerRedis, Reason: "error"}, domain.ErrOutcomeUnknown
	}
	return s.answerScript(ctx, r, token, res)
}

// recorded reads the database's reservation of token: nil when there is
// none.
func (s *Service) recorded(ctx context.Context, token string) (*domain.Reservation, error) {
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	row, err := s.ledger.GetReservation(ctx, token)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read reservation: %w", err)
	}
	return row, nil
}

// log is the logger of work done for a request, known by its context.
func (s *Service) log(ctx context.Context) *slog.Logger { return requestLog(ctx, s.logger) }

// requestLog is logger with the request's id and trace, known by ctx.
func requestLog(ctx context.Context, logger *slog.Logger) *slog.Logger {
	attrs := []any{reqid.LogKey, reqid.From(ctx)}
	for _, a := range telemetry.TraceAttrs(ctx) {
		attrs = append(attrs, a)
	}
	return logger.With(attrs...)
}

// The collaborators Reserve's steps call.

// Script is the sale's stock in Redis (redisgateway.Client): the atomic reserve
// script, which takes a unit, numbers the hold (Seq) and appends it to
// the sale's inbox in one step (redisgateway.OutcomeOK), answers a request it has
// seen with its token (OutcomeReplay), asks for the database when the
// user's ended reservations left Redis (OutcomeAsk), or refuses
// (ReserveResult.Refusal).
type Script interface {
	Reserve(ctx context.Context, a redisgateway.ReserveArgs) (redisgateway.ReserveResult, error)
}

// HoldRecorder records a Redis hold in the database, which decides it,
// before its 202 (Holds.Promise): nil when it may be answered 202, the
// database's refusal (domain.ErrAlreadyHolds, domain.ErrSoldOut) when it
// overruled Redis, domain.ErrOutcomeUnknown when it is not recorded.
type HoldRecorder interface {
	Promise(ctx context.Context, in domain.OrderInput, epoch, seq int64) error
}

// Starter starts a reservation's order workflow soon, without waiting
// (StartQueue.Enqueue).
type Starter interface {
	Enqueue(ctx context.Context, in domain.OrderInput)
}

// Degraded is the degraded mode's policy on this instance (degraded.Guard):
// the breaker every Redis reservation call goes through, the fleet's
// evidence that Redis is down, the switch of a sale to the database path
// (its hold-off and dwell) and the database path's limiter.
type Degraded interface {
	// Call runs a Redis call through the breaker
	// (degraded.IsBreakerRefusal, degraded.IsClientStall).
	Call(fn func() (redisgateway.ReserveResult, error)) (redisgateway.ReserveResult, error)
	// RedisDown reports whether most of the fleet finds Redis down.
	RedisDown() bool
	// SwitchToDatabase moves the sale to the database path; the sale
	// returned is still on Redis when it came back too recently.
	SwitchToDatabase(ctx context.Context, saleID int64) (*domain.Sale, error)
	// Acquire takes a database-path transaction's slot, or answers its 429.
	Acquire(now time.Time) (release func(), refusal *domain.Error, refused string)
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

// Fleet is what the fleet's view tells of the workers (degraded.Observer):
// whether every worker places the order of a hold that took its unit when
// it was recorded (domain.HoldRecordVersion; not while an older release's
// worker runs).
type Fleet interface {
	HoldsTakeUnits() bool
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
}

// StoreLedger is the Ledger of a store.
type StoreLedger struct{ *store.Store }

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
	holds     HoldRecorder
	recorder  *Holds
	tokens    *domain.Tokens
}

// New builds the service.
func New(set Settings, d Deps) *Service {
	holds := newHolds(d.Ledger, d.Logger, d.HoldOutcome)
	holds.index, holds.redisTimeout, holds.takeUnits = d.HoldIndex, set.RedisTimeout, d.Fleet.HoldsTakeUnits
	return &Service{
		set: set, script: d.Script, holdIndex: d.HoldIndex, ledger: d.Ledger, syncer: d.Syncer,
		starter: d.Starter, degraded: d.Degraded, logger: d.Logger,
		holds: holds, recorder: holds,
		tokens: domain.NewTokens(set.TokenKey),
	}
}

// Holds is the service's hold recorder (the waitlist's hand-overs record
// through it too).
func (s *Service) Holds() *Holds { return s.recorder }
