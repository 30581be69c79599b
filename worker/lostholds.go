package worker

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/store"
	"github.com/seckill/seckill/temporalgateway"
)

// The lost holds' starts.
const (
	// lostHoldsEvery is the tick while a window is open: a round whose
	// start failed is tried again, and holds recorded late are found.
	lostHoldsEvery = time.Second
	// recordsLand bounds how long after Redis answered a hold its record
	// may still land in the database (the API waits 3 s at most for it
	// before its 202, then answers 503): a window is read again until then.
	recordsLand = 5 * time.Second
	// lostHoldsPage is how many holds a read answers, started together.
	lostHoldsPage = 500
	// lostHoldsParallel bounds the starts in flight.
	lostHoldsParallel = 8
	// lostHoldStartTimeout bounds one start.
	lostHoldStartTimeout = 10 * time.Second
	// relayCatchUp bounds how long a window waits, after its change, for
	// the relay to deliver a sale's inbox through the window's end before
	// it starts the sale's holds anyway (the relay stuck or slow).
	relayCatchUp = 30 * time.Second
)

// LostHolds starts the order workflows of the Redis holds whose inbox
// entries a Redis that went (a restart, a failover to a lagging replica)
// may have lost. Each hold was recorded QUEUED in the database before its
// 202, but the inbox entry the relay starts it from was a Redis write like
// any other; without this, such a hold waits for reconciliation's repair
// of a QUEUED reservation without workflow (stale after 30 s, found at the
// sale workflow's next look), which stays the safety net.
//
// The resyncer tells it (Changed) when Redis changed identity, and at the
// worker's first look at Redis, which cannot know what happened before.
// It then starts, in pages with a bound on the starts in flight, every
// QUEUED Redis hold recorded from a bound before the change until the
// records in flight at the change have landed (later ones are in the new
// Redis's inbox: the relay's) whose workflow it has not started yet, and
// reads the window again each tick until those records have landed
// (recordsLand) and every start succeeded. The start is the relay's
// idempotent one: a hold whose workflow runs, or ran, costs a refused
// start, so a hold the relay has started since the change (its token in
// the sale's started set) is not started again. At a worker's start during
// a sale the window holds the relay's whole backlog, and without that
// check each of its holds would cost two starts; a hold whose entry the
// current inbox has not delivered yet is in neither, so a sale's holds
// wait (at most relayCatchUp) until the relay has delivered the sale's
// inbox through the window's end: then a hold in neither is one the
// current Redis does not have, or one another worker's relay has pending
// (a refused start).
type LostHolds struct {
	Store *store.Store
	// Redis, when set, is where the relay's started set is read; a hold
	// found there is not started again. A failed read starts the hold
	// anyway.
	Redis *redisgateway.Client
	// InRelay, when set, tells whether this process's relay has the hold's
	// inbox entry in hand (read, its start not yet acknowledged): the
	// current Redis has the entry, and the relay starts it.
	InRelay func(token string) bool
	// OpenSales lists the open sales.
	OpenSales func(ctx context.Context) ([]*domain.Sale, error)
	// Start starts a hold's workflow, or finds it started.
	Start  func(ctx context.Context, in domain.OrderInput) (temporalgateway.StartOutcome, error)
	Every  time.Duration // lostHoldsEvery when zero
	Logger *slog.Logger

	mu     sync.Mutex
	window *holdWindow
	wake   chan struct{}
}

// holdWindow is the holds to start: those recorded since since, read
// again until until; started names the tokens started from it.
type holdWindow struct {
	since, until time.Time
	changed      time.Time // the latest change, from which relayCatchUp runs
	started      map[string]bool
	gen          int // moves at each change, so a round does not close a window widened meanwhile
}

// Changed opens a window, or widens the open one, from since: Redis
// changed identity at now. It does not wait.
func (l *LostHolds) Changed(since, now time.Time) {
	l.mu.Lock()
	if l.window == nil {
		l.window = &holdWindow{since: since, started: map[string]bool{}}
	} else if since.Before(l.window.since) {
		l.window.since = since
	}
	l.window.until = now.Add(recordsLand)
	l.window.changed = now
	l.window.gen++
	wake := l.wakeLocked()
	l.mu.Unlock()
	select {
	case wake <- struct{}{}:
	default:
	}
}

func (l *LostHolds) wakeLocked() chan struct{} {
	if l.wake == nil {
		l.wake = make(chan struct{}, 1)
	}
	return l.wake
}

// Run starts the windows' holds until ctx ends; with no window open it
// only waits for one.
func (l *LostHolds) Run(ctx context.Context) {
	l.mu.Lock()
	wake := l.wakeLocked()
	l.mu.Unlock()
	// A failing round (the database or Temporal down) is tried again each
	// tick; its outage is logged once, and its end.
	outage := outageLog{logger: l.Logger, what: "lost holds' starts"}
	for {
		var tick <-chan time.Time
		if l.open() {
			tick = time.After(orDefault(l.Every, lostHoldsEvery))
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-tick:
		}
		outage.note(ctx, l.Once(ctx, time.Now()))
	}
}

func (l *LostHolds) open() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.window != nil
}

// Once starts the open window's holds not started yet, and closes the
// window once every start succeeded, its records have landed and no sale's
// holds wait for the relay's delivery.
func (l *LostHolds) Once(ctx context.Context, now time.Time) error {
	l.mu.Lock()
	w := l.window
	var since, until, changed time.Time
	var gen int
	if w != nil {
		since, until, changed, gen = w.since, w.until, w.changed, w.gen
	}
	l.mu.Unlock()
	if w == nil {
		return nil
	}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	open, err := l.OpenSales(lctx)
	cancel()
	if err != nil {
		return fmt.Errorf("lost holds: %w", err)
	}
	var c startCounts
	var relayThrough time.Time // zero: past relayCatchUp, no wait
	if now.Sub(changed) < relayCatchUp {
		relayThrough = until
	}
	for _, s := range open {
		if !s.Warmed || now.Before(s.StartsAt) || s.EndsAt.Before(since) {
			continue // no hold of it was recorded in the window
		}
		if err := l.startSale(ctx, s.ID, since, now.Sub(until), relayThrough, w, &c); err != nil {
			l.logRound(since, &c, err)
			return err
		}
	}
	l.logRound(since, &c, nil)
	l.mu.Lock()
	if l.window == w && w.gen == gen && !now.Before(until) && c.deferred.Load() == 0 {
		l.window = nil
	}
	l.mu.Unlock()
	return nil
}

// startCounts are a round's holds: new workflows (holds that had none),
// those whose start found the workflow, and those the relay had started
// (no start); and the sales whose holds wait for the relay.
type startCounts struct{ started, existing, relayed, deferred atomic.Int64 }

func (l *LostHolds) logRound(since time.Time, c *startCounts, err error) {
	started, existing, relayed, deferred := c.started.Load(), c.existing.Load(), c.relayed.Load(), c.deferred.Load()
	switch {
	case started > 0:
		l.Logger.Warn("lost holds: started the workflows of holds recorded in the database that had none (an inbox entry Redis lost)",
			"since", since, "started", started, "found_started", existing, "relay_started", relayed, "sales_waiting_on_relay", deferred, "err", err)
	case existing+relayed > 0 && deferred == 0:
		l.Logger.Info("lost holds: every hold recorded since Redis changed has its workflow", "since", since,
			"found_started", existing, "relay_started", relayed)
	case deferred > 0:
		l.Logger.Debug("lost holds: waiting for the relay to deliver the inboxes", "since", since,
			"sales_waiting_on_relay", deferred, "found_started", existing, "relay_started", relayed)
	}
}

// startSale starts a sale's holds of the window, a page at a time; the
// first failed start ends it (Temporal down: the next tick tries again).
// The window's holds are those recorded from since to its until, which
// was untilAgo before now (negative: is still ahead): a hold recorded
// later was written to Redis after the change (recordsLand bounds the
// gap), into the inbox the relay reads, and starting it would only race
// the relay's start (at a worker's start during a burst, the whole
// burst's holds). The bound is taken on the database's clock, which
// recorded them, by the time elapsed here. With relayThrough set (the
// window's end), a sale with a hold to start whose inbox the relay has not
// delivered through it is left for a later round (counted deferred).
func (l *LostHolds) startSale(ctx context.Context, saleID int64, since time.Time, untilAgo time.Duration, relayThrough time.Time, w *holdWindow, c *startCounts) error {
	after := ""
	for {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		holds, err := l.Store.QueuedRedisHolds(rctx, saleID, since, untilAgo, after, lostHoldsPage)
		cancel()
		if err != nil {
			return fmt.Errorf("lost holds: %w", err)
		}
		if !relayThrough.IsZero() && l.anyToStart(holds, w) {
			if !l.relayDelivered(ctx, saleID, relayThrough) {
				c.deferred.Add(1)
				return nil
			}
			relayThrough = time.Time{}
		}
		if err := l.startPage(ctx, holds, w, c); err != nil {
			return fmt.Errorf("lost holds of sale %d: %w", saleID, err)
		}
		if len(holds) < lostHoldsPage {
			return nil
		}
		after = holds[len(holds)-1].Token
	}
}

// startPage starts the page's holds not started from w yet,
// lostHoldsParallel at a time, and notes those started.
func (l *LostHolds) startPage(ctx context.Context, holds []domain.OrderInput, w *holdWindow, c *startCounts) error {
	l.mu.Lock()
	todo := make([]domain.OrderInput, 0, len(holds))
	for _, in := range holds {
		if !w.started[in.Token] {
			todo = append(todo, in)
		}
	}
	l.mu.Unlock()
	done, err := eachParallel(ctx, len(todo), lostHoldsParallel, lostHoldStartTimeout, func(sctx context.Context, i int) error {
		in := todo[i]
		if l.relayStarted(sctx, in) {
			c.relayed.Add(1)
			return nil
		}
		outcome, err := l.Start(sctx, in)
		if temporalgateway.StartRefused(err) {
			// No retry changes it; reconciliation reports the hold.
			l.Logger.Error("lost holds: Temporal refused a hold's start", "sale_id", in.SaleID, "token", in.Token, "err", err)
			return nil
		}
		if err != nil {
			return err
		}
		if outcome == temporalgateway.StartedNew {
			c.started.Add(1)
		} else {
			c.existing.Add(1)
		}
		return nil
	})
	l.mu.Lock()
	for i, in := range todo {
		if done[i] {
			w.started[in.Token] = true
		}
	}
	l.mu.Unlock()
	return err
}

// anyToStart reports whether a hold of the page has not been started from
// the window yet.
func (l *LostHolds) anyToStart(holds []domain.OrderInput, w *holdWindow) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, in := range holds {
		if !w.started[in.Token] {
			return true
		}
	}
	return false
}

// relayDelivered reports whether the relay has delivered the sale's
// current inbox through the window's end, so that a hold of the window
// neither in the relay's hand nor in its started set is not in that inbox
// unread. Without Redis, or when the read fails, it answers true: the
// start is idempotent, a race with the relay costs a refused start.
func (l *LostHolds) relayDelivered(ctx context.Context, saleID int64, through time.Time) bool {
	if l.Redis == nil {
		return true
	}
	rctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	done, err := l.Redis.RelayDelivered(rctx, saleID, through)
	if err != nil {
		l.Logger.Debug("lost holds: read the relay's progress; starting the sale's holds", "sale_id", saleID, "err", err)
		return true
	}
	return done
}

// relayStarted reports whether the relay has the hold in hand (InRelay) or
// has started its workflow (its token is in the sale's started set,
// written only once Temporal confirmed the start). Checked just before the
// start: the relay works through its backlog meanwhile. A failed read
// answers false, as the start is idempotent and Redis may be what changed.
func (l *LostHolds) relayStarted(ctx context.Context, in domain.OrderInput) bool {
	if l.InRelay != nil && l.InRelay(in.Token) {
		return true
	}
	if l.Redis == nil {
		return false
	}
	rctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	known, err := l.Redis.Started(rctx, in.SaleID, []string{in.Token})
	if err != nil {
		l.Logger.Debug("lost holds: read the started set; starting the hold", "sale_id", in.SaleID, "err", err)
		return false
	}
	return len(known) == 1 && known[0]
}
