package reservation

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/degraded"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/store"
)

// fakeScript answers each call with the next of answers (the last one
// repeats) and keeps the calls' arguments.
type fakeScript struct {
	mu      sync.Mutex
	answers []scriptAnswer
	calls   []redisgateway.ReserveArgs
}

type scriptAnswer struct {
	res redisgateway.ReserveResult
	err error
}

func (f *fakeScript) Reserve(_ context.Context, a redisgateway.ReserveArgs) (redisgateway.ReserveResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, a)
	next := f.answers[min(len(f.calls), len(f.answers))-1]
	return next.res, next.err
}

func (f *fakeScript) called() []redisgateway.ReserveArgs {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]redisgateway.ReserveArgs(nil), f.calls...)
}

func answers(a ...scriptAnswer) *fakeScript { return &fakeScript{answers: a} }

func outcome(o string) scriptAnswer {
	return scriptAnswer{res: redisgateway.ReserveResult{Outcome: o, StockLeft: 7}}
}

// fakeLedger is the database: reserve answers the database path, switched
// the mode switch, row a reservation read, holdErr a hold's record.
type fakeLedger struct {
	mu       sync.Mutex
	reserve  func(in domain.OrderInput) (*domain.Reservation, bool, error)
	switched func(saleID int64) (*domain.Sale, error)
	row      func(token string) (*domain.Reservation, error)
	holdErr  error
	holds    []domain.OrderInput
	// The cancel's: end answers EndQueued (nil: the row ends as asked),
	// recordErr RecordReservation.
	end       func(token string) (*domain.Reservation, error)
	recordErr error
	recorded  []domain.OrderInput
	outbox    []string
	reserved  []domain.OrderInput
	holdOffs  []time.Duration
	// decide, when set, is the database's decision on a hold (else every
	// hold is promised); wentBack lists the sales marked for a rebuild.
	decide   func(in domain.OrderInput, seq int64) store.HoldRecord
	wentBack []int64
	// wait, when set, is how long a hold's record takes (or until its
	// context ends); progress answers HoldProgress (nil: none yet).
	wait     time.Duration
	progress func() (time.Time, time.Duration)
}

func (l *fakeLedger) HoldProgress() (time.Time, time.Duration) {
	if l.progress == nil {
		return time.Time{}, 0
	}
	return l.progress()
}

func (l *fakeLedger) RecordRedisHold(ctx context.Context, in domain.OrderInput, _, seq int64, _ bool) (store.HoldRecord, error) {
	if l.wait > 0 {
		select {
		case <-time.After(l.wait):
		case <-ctx.Done():
			return store.HoldRecord{}, ctx.Err()
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.holdErr != nil {
		return store.HoldRecord{}, l.holdErr
	}
	if l.decide != nil {
		rec := l.decide(in, seq)
		if rec.Promised() {
			l.holds = append(l.holds, in)
		}
		return rec, nil
	}
	l.holds = append(l.holds, in)
	return store.HoldRecord{Counted: true}, nil
}

func (l *fakeLedger) MarkRedisWentBack(_ context.Context, saleID int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.wentBack = append(l.wentBack, saleID)
	return nil
}

func (l *fakeLedger) Ping(context.Context) error { return l.holdErr }

func (l *fakeLedger) ReserveInDBWithSkew(_ context.Context, in domain.OrderInput, _ time.Duration) (*domain.Reservation, bool, error) {
	l.mu.Lock()
	l.reserved = append(l.reserved, in)
	l.mu.Unlock()
	return l.reserve(in)
}

// SwitchToDatabaseAfterDwell is the degraded mode's ModeStore.
func (l *fakeLedger) SwitchToDatabaseAfterDwell(_ context.Context, saleID int64, holdOff, _ time.Duration) (*domain.Sale, error) {
	l.mu.Lock()
	l.holdOffs = append(l.holdOffs, holdOff)
	l.mu.Unlock()
	return l.switched(saleID)
}

func (l *fakeLedger) GetReservation(_ context.Context, token string) (*domain.Reservation, error) {
	if l.row == nil {
		return nil, store.ErrNotFound
	}
	return l.row(token)
}

func (l *fakeLedger) RecordReservation(_ context.Context, in domain.OrderInput) (*domain.Reservation, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.recordErr != nil {
		return nil, l.recordErr
	}
	l.recorded = append(l.recorded, in)
	return &domain.Reservation{Token: in.Token, SaleID: in.SaleID, UserID: in.UserID, RequestID: in.RequestID, Status: domain.StatusQueued}, nil
}

func (l *fakeLedger) EndQueued(_ context.Context, token string, to domain.ReservationStatus, _ string) (*domain.Reservation, error) {
	if l.end == nil {
		return &domain.Reservation{Token: token, SaleID: 42, UserID: 1001, Status: to}, nil
	}
	return l.end(token)
}

func (l *fakeLedger) EnqueueStart(_ context.Context, token string, _ int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.outbox = append(l.outbox, token)
	return nil
}

// reservedInDB answers the database path's transaction with a new
// reservation of in.
func reservedInDB(in domain.OrderInput) (*domain.Reservation, bool, error) {
	return &domain.Reservation{Token: in.Token}, false, nil
}

type fakeStarter struct {
	mu      sync.Mutex
	started []domain.OrderInput
}

func (f *fakeStarter) Enqueue(_ context.Context, in domain.OrderInput) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.started = append(f.started, in)
}

func (f *fakeStarter) inputs() []domain.OrderInput {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]domain.OrderInput(nil), f.started...)
}

// fakeCached is the sale cache's entry.
type fakeCached struct {
	onRedis   bool
	stockSeen int64
	soldOut   bool
	moved     *domain.Sale
}

func (c *fakeCached) OnRedis(int64) bool          { return c.onRedis }
func (c *fakeCached) StockSeen(left int64)        { c.stockSeen = left }
func (c *fakeCached) SoldOut()                    { c.soldOut = true }
func (c *fakeCached) Moved(sale *domain.Sale)     { c.moved = sale }
func redisSale() *domain.Sale                     { return &domain.Sale{ID: 42, Mode: domain.ModeRedis, ModeEpoch: 3} }
func request(sale *domain.Sale, c Cached) Request { return newRequest(sale, c, "req-00000001") }

func newRequest(sale *domain.Sale, c Cached, requestID string) Request {
	return Request{SaleID: sale.ID, UserID: 1001, RequestID: requestID, Sale: sale, Cached: c}
}

// fakeHolds is Redis's index of holds: the request id of each token.
type fakeHolds struct {
	requests map[string]string
	err      error
}

func (f *fakeHolds) RequestID(_ context.Context, _, _ int64, token string) (string, bool, error) {
	req, ok := f.requests[token]
	return req, ok, f.err
}

func (f *fakeHolds) RestoreReplay(_ context.Context, _, _ int64, requestID, token string) (bool, error) {
	if _, ok := f.requests[token]; ok {
		return false, f.err
	}
	f.requests[token] = requestID
	return true, f.err
}

// fakeSyncer records the tokens Redis was made to follow.
type fakeSyncer struct {
	synced []string
	err    error
}

func (f *fakeSyncer) SyncToken(_ context.Context, token string) (bool, error) {
	f.synced = append(f.synced, token)
	return f.err == nil, f.err
}

// rig is a service on fakes, with the degraded mode's guard on them.
type rig struct {
	svc     *Service
	guard   *degraded.Guard
	script  *fakeScript
	ledger  *fakeLedger
	starter *fakeStarter
	holds   *fakeHolds
	syncer  *fakeSyncer
	down    bool // the fleet's view: Redis down
}

var testSettings = Settings{
	TokenKey: []byte("reservation-test"), RedisTimeout: 50 * time.Millisecond, ClockSkew: 10 * time.Millisecond,
	StartsRedisOrders: true,
}

var testDegraded = config.Degraded{ModeMinDwell: time.Second, FallbackRPS: 1000, FallbackInFlight: 4}

func newRig(t *testing.T, script *fakeScript, ledger *fakeLedger, set Settings) *rig {
	t.Helper()
	return newRigOf(t, script, ledger, set, testDegraded)
}

// newRigOf is a rig whose degraded mode has the settings dset.
func newRigOf(t *testing.T, script *fakeScript, ledger *fakeLedger, set Settings, dset config.Degraded) *rig {
	t.Helper()
	if ledger == nil {
		ledger = &fakeLedger{}
	}
	r := &rig{script: script, ledger: ledger, starter: &fakeStarter{}, holds: &fakeHolds{requests: map[string]string{}}, syncer: &fakeSyncer{}}
	logger := slog.New(slog.DiscardHandler)
	r.guard = degraded.NewGuard(dset, degraded.GuardDeps{
		RedisTimeout: set.RedisTimeout, ClockSkew: set.ClockSkew, Heartbeat: degraded.NewHeartbeat(set.RedisTimeout),
		Fleet: fleetFunc(func() bool { return r.down }), Store: ledger,
		BreakerState: prometheus.NewGauge(prometheus.GaugeOpts{Name: "breaker_state"}), Logger: logger,
	})
	r.svc = New(set, Deps{
		Script: script, HoldIndex: r.holds, Ledger: ledger, Syncer: r.syncer, Starter: r.starter,
		Fleet: fleetFunc(func() bool { return r.down }), Degraded: r.guard,
		Logger: logger, HoldOutcome: func(string) {},
	})
	return r
}

// token is the token the service derives for a request.
func (r *rig) token(req Request) string {
	return domain.DeriveToken(testSettings.TokenKey, req.SaleID, req.UserID, req.RequestID)
}

// watch runs the guard's heartbeat and probe on a Redis that answers
// every ping, until the test ends.
func (r *rig) watch(t *testing.T) {
	t.Helper()
	stop, done := make(chan struct{}), make(chan struct{})
	answer := func(context.Context) error { return nil }
	go func() {
		defer close(done)
		r.guard.Watch(stop, answer, answer)
	}()
	t.Cleanup(func() { close(stop); <-done })
}

// fleetFunc is a Fleet of a function, in a fleet of this release only.
type fleetFunc func() bool

func (f fleetFunc) RedisDown() bool      { return f() }
func (f fleetFunc) HoldsTakeUnits() bool { return true }
