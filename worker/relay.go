package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/reqid"
	"github.com/seckill/seckill/internal/telemetry"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/store"
	"github.com/seckill/seckill/temporalgateway"
)

// Relay defaults, used when the matching field is zero.
const (
	defaultBatchSize    = 256
	defaultBlock        = time.Second
	defaultConcurrency  = 32
	defaultStartTimeout = 10 * time.Second
	defaultReclaimEvery = 5 * time.Second
	defaultRefreshEvery = time.Second
	defaultMinIdle      = 30 * time.Second
	defaultMaxDelivery  = 10

	// redisTimeout bounds every non-blocking Redis call of the relay.
	redisTimeout = 3 * time.Second
	// reclaimPages bounds the XAUTOCLAIM pages of one reclaim pass, so a huge
	// backlog of failures cannot starve the reading of new entries.
	reclaimPages = 4
)

// errNoInbox says the sale's inbox or its consumer group is gone (not warmed
// yet, or torn down); the sale's loop ends and the refresh starts it again.
var errNoInbox = redisgateway.ErrNoInbox

// Starter starts a reservation's order workflow; it must be idempotent.
type Starter func(ctx context.Context, in domain.OrderInput) error

// Relay hands every sale's Redis inbox over to Temporal. A Redis stream is an
// inbox, not a message queue: an entry leaves it (XACK) only after its order
// workflow is known started, so a crash anywhere re-delivers the entry and the
// idempotent start (workflow id order:<token>) makes the re-delivery harmless.
// An unacknowledged entry is the only record of a hold that has no workflow
// yet; the relay trims only acknowledged entries whose reservation the
// database has recorded (trim), so the inbox holds the holds not yet
// durable downstream, however often users cycle reserve and cancel.
type Relay struct {
	Redis    *redisgateway.Client
	Store    *store.Store
	Starter  Starter // temporalgateway.Start, timed (worker.go)
	Consumer string
	MinIdle  time.Duration // idle time before a pending entry is reclaimed
	// DeadAfter and MaxDelivery bound the retries of an entry whose start
	// Temporal refuses as invalid: it is dead-lettered once delivered more
	// than MaxDelivery times and older than DeadAfter. A start that fails
	// because Temporal is down or slow never condemns its entry.
	DeadAfter   time.Duration
	MaxDelivery int64
	Logger      *slog.Logger
	Metrics     *Metrics

	BatchSize    int64         // entries per read; 256 when zero
	Block        time.Duration // XREADGROUP BLOCK; 1s when zero
	Concurrency  int           // starts in flight per batch; 32 when zero
	StartTimeout time.Duration // per start; 10s when zero
	ReclaimEvery time.Duration // 5s when zero
	RetireAfter  time.Duration // redisgateway.RetireAfter when zero
	RefreshEvery time.Duration // open-sales refresh; 1s when zero
	// IdleAfter is how long a sale's loop runs without reading an entry,
	// retiring a record or holding a pending entry before it ends; the
	// change feed or the full pass starts it again. RetireAfter + 30s when
	// zero, so the records of its last releases retire first.
	IdleAfter time.Duration
	FullEvery time.Duration // the full pass over every open sale, spread over its ticks; relayFullEvery when zero

	watch   changeWatch
	touched sync.Map // sale id -> time.Time the feed last named it, for its running loop
	inHand  sync.Map // token -> struct{}: entries read and not yet acknowledged (InHand)
}

// InHand tells whether the relay holds the token's inbox entry: read, and
// its start or acknowledgement not yet done. The entry is in the current
// Redis's inbox, so the relay starts it (or retries it, pending).
func (r *Relay) InHand(token string) bool {
	_, ok := r.inHand.Load(token)
	return ok
}

func orDefault[T int | int64 | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// Run relays the inboxes of the open sales with work until stop is
// cancelled: a sale's loop starts when the change feed names the sale (a
// hold, a release, a hand-over noted it) or a full pass finds entries
// waiting in its inbox, and ends once idle (IdleAfter). Reads stop at once
// on stop; the batch in flight finishes under work, which bounds the calls
// that hand entries over (cancel it when the shutdown deadline passes).
func (r *Relay) Run(stop, work context.Context) {
	l := &saleLoops{r: r, stop: stop, work: work, running: map[int64]context.CancelFunc{}}
	everyTick(stop, orDefault(r.RefreshEvery, defaultRefreshEvery), true, func() {
		if began, ok := l.refresh(); ok {
			r.watch.done(began)
		}
	})
	l.wg.Wait()
}

// saleLoops are the relay's running sale loops.
type saleLoops struct {
	r          *Relay
	stop, work context.Context
	mu         sync.Mutex
	running    map[int64]context.CancelFunc
	wg         sync.WaitGroup
}

// refresh ends the loops of sales no longer open and starts those of the
// sales with work; ok says every sale due was looked at.
func (l *saleLoops) refresh() (began time.Time, ok bool) {
	r := l.r
	lctx, cancel := context.WithTimeout(l.work, 5*time.Second)
	defer cancel()
	open, err := r.Store.OpenSales(lctx)
	if err != nil {
		r.Logger.Warn("relay: list open sales", "err", err)
		return began, false
	}
	began = time.Now()
	r.watch.Redis, r.watch.Every, r.watch.FullEvery = r.Redis, orDefault(r.RefreshEvery, defaultRefreshEvery), orDefault(r.FullEvery, relayFullEvery)
	due, err := r.watch.due(lctx)
	if err != nil {
		r.Logger.Warn("relay: change feed", "err", err)
	}
	for id := range due.changed {
		r.touched.Store(id, began) // a running loop stays while its sale changes
	}
	l.mu.Lock()
	for id, cancel := range l.running {
		if _, ok := open.Get(id); !ok {
			cancel()
		}
	}
	var candidates []int64
	for _, s := range due.of(open, nil) {
		if l.running[s.ID] == nil {
			candidates = append(candidates, s.ID)
		}
	}
	l.mu.Unlock()
	for _, id := range candidates {
		busy, err := r.hasWork(lctx, id, due.named(id))
		if err != nil {
			r.Logger.Warn("relay: check inbox", "sale_id", id, "err", err)
			return began, false // the next refresh looks again
		}
		if busy {
			l.start(id)
		}
	}
	return began, true
}

// start runs a sale's loop until it ends, idle or stopped.
func (l *saleLoops) start(id int64) {
	sctx, cancel := context.WithCancel(l.stop)
	l.mu.Lock()
	l.running[id] = cancel
	l.mu.Unlock()
	l.wg.Go(func() {
		defer cancel()
		l.r.runSale(sctx, l.work, id)
		l.mu.Lock()
		delete(l.running, id) // only this loop's: no other starts while it is listed
		l.mu.Unlock()
		l.r.touched.Delete(id)
		label := strconv.FormatInt(id, 10)
		l.r.Metrics.Lag.DeleteLabelValues(label)
		l.r.Metrics.Pending.DeleteLabelValues(label)
		l.r.Metrics.OldestAge.DeleteLabelValues(label)
	})
}

// hasWork reports whether a sale's loop should run: its inbox holds an
// entry not yet delivered or not yet acknowledged, or (a sale the feed
// named: a release) records of released reservations wait to retire. A
// note that brought neither (a warm-up, a control write) starts no loop.
func (r *Relay) hasWork(ctx context.Context, saleID int64, named bool) (bool, error) {
	g, err := r.Redis.InboxGroupState(ctx, saleID)
	if errors.Is(err, errNoInbox) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if g.Pending > 0 || g.Lag != 0 || !named {
		return g.Pending > 0 || g.Lag != 0, nil
	}
	ended, err := r.Redis.EndedTokens(ctx, saleID, time.Now().Add(time.Hour), 1)
	if err != nil {
		return false, fmt.Errorf("ended reservations of sale %d: %w", saleID, err)
	}
	return len(ended) > 0, nil
}

// runSale reads one sale's inbox until stop is cancelled or the inbox goes.
// Entries left pending by failed starts come before new ones: they are
// retried (oldest first, with a growing pause while starts keep failing)
// until none is left, and only then are new entries read, so after an
// outage the backlog starts in the order it was reserved, at the rate
// Temporal takes it.
func (r *Relay) runSale(stop, work context.Context, saleID int64) {
	log := r.Logger.With("sale_id", saleID)
	log.Info("relay: sale started")
	r.Metrics.seeSale(saleID)
	defer log.Info("relay: sale stopped")
	reclaimEvery := orDefault(r.ReclaimEvery, defaultReclaimEvery)
	idleAfter := orDefault(r.IdleAfter, orDefault(r.RetireAfter, redisgateway.RetireAfter)+30*time.Second)
	var lastReclaim time.Time
	lastBusy := time.Now()
	backoff := time.Duration(0)
	retryOwn := false
	for stop.Err() == nil {
		if time.Since(lastReclaim) >= reclaimEvery {
			lastReclaim = time.Now()
			if r.maintain(work, log, saleID) {
				retryOwn = true
			}
		}
		// The read is bounded but not cancelled by stop: entries Redis hands
		// this consumer are processed, never left behind by the shutdown.
		// With retryOwn: this consumer's pending entries, oldest first.
		read, failed, err := r.readBatch(work, saleID, retryOwn)
		if errors.Is(err, errNoInbox) {
			log.Debug("relay: inbox gone")
			return
		}
		if read > 0 || retryOwn {
			lastBusy = time.Now()
		}
		if retryOwn && read == 0 && err == nil {
			retryOwn = false
			continue
		}
		if failed > 0 {
			retryOwn = true
		}
		if err != nil || failed > 0 {
			backoff = min(max(2*backoff, 250*time.Millisecond), 5*time.Second)
			if err != nil {
				log.Warn("relay: read inbox", "err", err, "retry_in", backoff)
			}
			select {
			case <-stop.Done():
				return
			case <-time.After(backoff):
			}
			continue
		}
		backoff = 0
		if t, ok := r.touched.Load(saleID); ok && t.(time.Time).After(lastBusy) {
			lastBusy = t.(time.Time)
		}
		if time.Since(lastBusy) >= idleAfter && time.Since(lastReclaim) < reclaimEvery/2 {
			// Idle since well before the last maintenance, which left
			// nothing to retry: the change feed or the full pass starts
			// the loop again.
			log.Debug("relay: sale idle")
			return
		}
	}
}

// maintain reclaims entries pending too long, observes the inbox's lag and
// trims and retires what it may; it answers whether this consumer has
// entries to retry.
func (r *Relay) maintain(work context.Context, log *slog.Logger, saleID int64) (retry bool) {
	n, failed, err := r.reclaim(work, saleID)
	if err != nil && !errors.Is(err, errNoInbox) {
		log.Warn("relay: reclaim", "err", err)
	}
	if n > 0 {
		// Operators (and the chaos run) see a takeover happen.
		log.Info("relay: reclaimed pending inbox entries", "entries", n)
	}
	if err := r.ObserveLag(work, saleID); err != nil && !errors.Is(err, errNoInbox) {
		log.Warn("relay: observe lag", "err", err)
	}
	if _, err := r.Trim(work, saleID); err != nil && !errors.Is(err, errNoInbox) {
		log.Warn("relay: trim inbox", "err", err)
	}
	if _, err := r.Retire(work, saleID); err != nil {
		log.Warn("relay: retire ended reservations' records", "err", err)
	}
	return failed > 0
}

// trimPages bounds the pages of one trim pass.
const trimPages = 16

// Trim deletes the inbox's acknowledged entries from its head up to the
// first whose reservation the database has not recorded (a workflow that
// started but has not written yet), a page at a time. A recorded
// reservation is in every rebuild's database snapshot, so the entry is
// needed no more. It answers how many entries it deleted.
func (r *Relay) Trim(ctx context.Context, saleID int64) (int, error) {
	page := orDefault(r.BatchSize, defaultBatchSize)
	return eachPage(trimPages, func() (int, bool, error) { return r.trimPage(ctx, saleID, page) })
}

// eachPage runs step up to pages times, while each step reports a full
// page, and answers the sum of what the steps did.
func eachPage(pages int, step func() (n int, full bool, err error)) (int, error) {
	done := 0
	for range pages {
		n, full, err := step()
		done += n
		if err != nil || !full {
			return done, err
		}
	}
	return done, nil
}

// trimPage trims one page of the acknowledged head; full says every entry
// of a full page went, so the next page may go too.
func (r *Relay) trimPage(ctx context.Context, saleID, page int64) (n int, full bool, err error) {
	tctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	head, err := r.Redis.AckedHead(tctx, saleID, page)
	if err != nil || len(head) == 0 {
		return 0, false, err
	}
	tokens := make([]string, 0, len(head))
	for _, e := range head {
		if e.Malformed == nil {
			tokens = append(tokens, e.Token)
		}
	}
	recorded, err := r.Store.RecordedTokens(tctx, tokens)
	if err != nil {
		return 0, false, err
	}
	gone := 0
	for gone < len(head) && (head[gone].Malformed != nil || recorded[head[gone].Token]) {
		gone++ // a malformed entry was dead-lettered before its ack
	}
	if gone == 0 {
		return 0, false, nil
	}
	keepFrom, err := redisgateway.NextEntryID(head[gone-1].ID)
	if err != nil {
		return 0, false, err
	}
	drop := make([]string, 0, gone)
	for _, e := range head[:gone] {
		if e.Malformed == nil {
			drop = append(drop, e.Token)
		}
	}
	if err := r.Redis.TrimInbox(tctx, saleID, keepFrom, drop); err != nil {
		return 0, false, err
	}
	return gone, gone == len(head) && int64(gone) == page, nil
}

// retirePage bounds the tokens of one retire step (one script: about 10
// Redis operations a token), retirePages the steps of one relay tick.
const (
	retirePage  = 100
	retirePages = 50
)

// Retire moves the Redis records of reservations that ended over
// redisgateway.RetireAfter ago, and that the database has ended, out of Redis
// (redisgateway.Client.Retire), a page at a time: a sale's per-token structures
// stay bounded by its live holds however long its users churn. It answers
// how many reservations it retired.
func (r *Relay) Retire(ctx context.Context, saleID int64) (int, error) {
	return eachPage(retirePages, func() (int, bool, error) { return r.retirePage(ctx, saleID) })
}

// retirePage retires one page of ended tokens; full says the page was full
// and some went, so the next page may go too.
func (r *Relay) retirePage(ctx context.Context, saleID int64) (n int, full bool, err error) {
	tctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	before := time.Now().Add(-orDefault(r.RetireAfter, redisgateway.RetireAfter))
	tokens, err := r.Redis.EndedTokens(tctx, saleID, before, retirePage)
	if err != nil || len(tokens) == 0 {
		return 0, false, err
	}
	ended, err := r.Store.EndedReservations(tctx, tokens)
	if err != nil {
		return 0, false, err
	}
	records := make([]redisgateway.RetiredRecord, 0, len(ended))
	var others []string
	for _, t := range tokens {
		if e, ok := ended[t]; ok {
			records = append(records, redisgateway.RetiredRecord{Token: t, UserID: e.UserID, RequestID: e.RequestID})
		} else {
			others = append(others, t)
		}
	}
	n, err = r.Redis.Retire(tctx, saleID, before, records, others)
	return n, len(tokens) == retirePage && n > 0, err
}

// ReadOnce reads one batch of new entries (blocking up to Block) and hands
// it over. It answers how many entries it read.
func (r *Relay) ReadOnce(ctx context.Context, saleID int64) (int, error) {
	n, _, err := r.readBatch(ctx, saleID, false)
	return n, err
}

// readBatch reads one batch, of new entries (blocking up to Block) or,
// with own, of this consumer's pending ones, and hands it over. It answers
// how many entries it read and how many starts failed.
func (r *Relay) readBatch(ctx context.Context, saleID int64, own bool) (read, failed int, err error) {
	block := orDefault(r.Block, defaultBlock)
	rctx, cancel := context.WithTimeout(ctx, block+2*time.Second)
	msgs, err := r.Redis.ReadInbox(rctx, saleID, r.Consumer, own, orDefault(r.BatchSize, defaultBatchSize), block)
	cancel()
	if err != nil {
		return 0, 0, err
	}
	if len(msgs) == 0 {
		return 0, 0, nil
	}
	var deliveries map[string]int64
	if own {
		if deliveries, err = r.deliveries(ctx, saleID, msgs); err != nil {
			return len(msgs), 0, err
		}
	}
	failed, err = r.process(ctx, saleID, msgs, deliveries)
	return len(msgs), failed, err
}

// Reclaim takes over entries pending longer than MinIdle — from consumers
// that died, or this one's own failed starts — and hands them over again.
// It answers how many entries it claimed.
func (r *Relay) Reclaim(ctx context.Context, saleID int64) (int, error) {
	n, _, err := r.reclaim(ctx, saleID)
	return n, err
}

func (r *Relay) reclaim(ctx context.Context, saleID int64) (claimed, failed int, err error) {
	cursor := ""
	for range reclaimPages {
		cctx, cancel := context.WithTimeout(ctx, redisTimeout)
		msgs, next, err := r.Redis.ClaimInbox(cctx, saleID, r.Consumer, orDefault(r.MinIdle, defaultMinIdle), cursor, orDefault(r.BatchSize, defaultBatchSize))
		cancel()
		if err != nil {
			return claimed, failed, err
		}
		if len(msgs) > 0 {
			claimed += len(msgs)
			deliveries, err := r.deliveries(ctx, saleID, msgs)
			if err != nil {
				return claimed, failed, err
			}
			f, err := r.process(ctx, saleID, msgs, deliveries)
			failed += f
			if err != nil {
				return claimed, failed, err
			}
		}
		if next == "" {
			break
		}
		cursor = next
	}
	return claimed, failed, nil
}

// deliveries reads the delivery counts of freshly claimed entries (XAUTOCLAIM
// has just counted this delivery too).
func (r *Relay) deliveries(ctx context.Context, saleID int64, msgs []redisgateway.InboxEntry) (map[string]int64, error) {
	pctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	return r.Redis.Deliveries(pctx, saleID, r.Consumer, msgs)
}

type inboxEntry struct {
	msg redisgateway.InboxEntry
	in  domain.OrderInput
}

// parseEntry is the order input of an inbox entry (an error when the
// entry is malformed).
func parseEntry(saleID int64, m redisgateway.InboxEntry) (domain.OrderInput, error) {
	if m.Malformed != nil {
		return domain.OrderInput{}, m.Malformed
	}
	return domain.RedisHoldInput(m.Token, saleID, m.UserID, m.RequestID), nil
}

// process hands a batch over: entries already in the started set are only
// acknowledged, the others are started (bounded concurrency) and acknowledged
// only when their start succeeded. A failed start leaves its entry pending
// for a later reclaim. deliveries is nil for first deliveries.
//
// Only an entry that can never start is dead-lettered: a malformed one at
// once, and one whose start Temporal refused for good (an invalid request)
// on more than MaxDelivery deliveries and older than DeadAfter. A start that
// failed because Temporal was unavailable, slow or overloaded leaves its
// entry pending however long that lasts. It answers how many starts failed.
func (r *Relay) process(ctx context.Context, saleID int64, msgs []redisgateway.InboxEntry, deliveries map[string]int64) (int, error) {
	entries, dead := sortEntries(saleID, msgs, deliveries)
	var errs []error
	if len(dead) > 0 {
		if err := r.deadLetter(ctx, saleID, dead); err != nil {
			errs = append(errs, err)
		}
	}
	if len(entries) == 0 {
		return 0, errors.Join(errs...)
	}
	for _, e := range entries {
		r.inHand.Store(e.in.Token, struct{}{})
	}
	defer func() {
		for _, e := range entries {
			r.inHand.Delete(e.in.Token)
		}
	}()
	known, err := r.startedBefore(ctx, saleID, entries)
	if err != nil {
		// Nothing is acknowledged; the entries stay pending and come back.
		errs = append(errs, err)
		return len(entries), errors.Join(errs...)
	}
	b := r.startAll(ctx, entries, known, deliveries)
	if b.failed > 0 {
		// One line per batch, not per entry: a Temporal outage fails them all.
		r.Logger.Warn("relay: workflow starts failed; entries stay pending and are retried, oldest first",
			"sale_id", saleID, "failed", b.failed, "batch", len(entries), "err", b.firstErr)
	}
	if len(b.refused) > 0 {
		if err := r.deadLetter(ctx, saleID, b.refused); err != nil {
			errs = append(errs, err)
		}
	}
	if err := r.ack(ctx, saleID, b.ackIDs, b.newTokens); err != nil {
		errs = append(errs, err)
	}
	return b.failed, errors.Join(errs...)
}

// sortEntries parses a batch into the entries to start and the malformed
// ones, which retrying cannot fix.
func sortEntries(saleID int64, msgs []redisgateway.InboxEntry, deliveries map[string]int64) (entries []inboxEntry, dead []redisgateway.DeadLetter) {
	for _, m := range msgs {
		in, err := parseEntry(saleID, m)
		if err != nil {
			dead = append(dead, redisgateway.DeadLetter{Entry: m, Reason: "malformed entry: " + err.Error(), Delivered: deliveries[m.ID]})
			continue
		}
		entries = append(entries, inboxEntry{msg: m, in: in})
	}
	return entries, dead
}

// startedBefore reads which entries' tokens are in the started set.
func (r *Relay) startedBefore(ctx context.Context, saleID int64, entries []inboxEntry) ([]bool, error) {
	tokens := make([]string, len(entries))
	for i, e := range entries {
		tokens[i] = e.in.Token
	}
	sctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	return r.Redis.Started(sctx, saleID, tokens)
}

// batchStarts is what a batch's starts came to.
type batchStarts struct {
	mu        sync.Mutex
	ackIDs    []string                  // started now or before: acknowledged
	newTokens []string                  // started now: into the started set
	refused   []redisgateway.DeadLetter // refused for good: dead-lettered
	failed    int                       // failed for now: left pending
	firstErr  error
}

// startAll starts the entries not started before, oldest first, with
// bounded concurrency. A few goroutines take the entries in turn, rather
// than one goroutine an entry: a start's payload walk in the SDK grows its
// goroutine's stack, which a fresh goroutine pays for on every start.
func (r *Relay) startAll(ctx context.Context, entries []inboxEntry, known []bool, deliveries map[string]int64) *batchStarts {
	b := &batchStarts{}
	todo := make([]inboxEntry, 0, len(entries))
	for i, e := range entries {
		if known[i] {
			b.ackIDs = append(b.ackIDs, e.msg.ID)
		} else {
			todo = append(todo, e)
		}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(orDefault(r.Concurrency, defaultConcurrency), len(todo)) {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(todo)); i = next.Add(1) - 1 {
				e := todo[i]
				r.startEntry(ctx, e, deliveries[e.msg.ID], b)
			}
		})
	}
	wg.Wait()
	return b
}

// startEntry starts one entry's workflow and records the outcome in b. A
// start Temporal refused for good is dead-lettered only after more than
// MaxDelivery deliveries and DeadAfter.
func (r *Relay) startEntry(ctx context.Context, e inboxEntry, delivered int64, b *batchStarts) {
	// The start joins the reservation request's trace and names its
	// request id.
	startCtx := reqid.With(telemetry.WithTraceParent(ctx, e.msg.TraceParent), e.msg.HTTPRequestID)
	stctx, cancel := context.WithTimeout(startCtx, orDefault(r.StartTimeout, defaultStartTimeout))
	err := r.Starter(stctx, e.in)
	cancel()
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil {
		r.Metrics.StartErrors.Inc()
		if temporalgateway.StartRefused(err) && delivered > orDefault(r.MaxDelivery, defaultMaxDelivery) && redisgateway.EntryAge(e.msg.ID) >= r.DeadAfter {
			b.refused = append(b.refused, redisgateway.DeadLetter{Entry: e.msg, Reason: fmt.Sprintf("workflow start refused in %d deliveries: %v", delivered, err), Delivered: delivered})
			return
		}
		b.failed++
		if b.firstErr == nil {
			b.firstErr = err
		}
		return
	}
	r.Metrics.Started.Inc()
	b.ackIDs = append(b.ackIDs, e.msg.ID)
	b.newTokens = append(b.newTokens, e.in.Token)
}

// ack records the newly started tokens and acknowledges the entries, in one
// MULTI (all of a sale's keys share a hash slot).
func (r *Relay) ack(ctx context.Context, saleID int64, ids []string, started []string) error {
	if len(ids) == 0 {
		return nil
	}
	actx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	acked, err := r.Redis.AckInbox(actx, saleID, ids, started)
	if err != nil {
		return err
	}
	r.Metrics.Acked.Add(float64(acked))
	return nil
}

// deadLetter copies entries to the dead-letter stream and acknowledges them,
// in one MULTI so that an entry is never both dead and pending.
func (r *Relay) deadLetter(ctx context.Context, saleID int64, dead []redisgateway.DeadLetter) error {
	dctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	if err := r.Redis.DeadLetterInbox(dctx, saleID, dead); err != nil {
		return err
	}
	r.Metrics.DeadLetters.WithLabelValues(strconv.FormatInt(saleID, 10)).Add(float64(len(dead)))
	for _, d := range dead {
		r.Logger.Error("relay: inbox entry dead-lettered", "sale_id", saleID, "entry", d.Entry.ID,
			"token", d.Entry.Token, "delivered", d.Delivered, "reason", d.Reason)
	}
	return nil
}

// ObserveLag updates the sale's lag and pending gauges from XINFO GROUPS.
func (r *Relay) ObserveLag(ctx context.Context, saleID int64) error {
	ictx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	g, err := r.Redis.InboxGroupState(ictx, saleID)
	if err != nil {
		return err
	}
	label := strconv.FormatInt(saleID, 10)
	r.Metrics.Pending.WithLabelValues(label).Set(float64(g.Pending))
	// -1: Redis cannot tell (entries were deleted mid-stream); keep the
	// last value rather than report a wrong one.
	if g.Lag >= 0 {
		r.Metrics.Lag.WithLabelValues(label).Set(float64(g.Lag))
	}
	age, err := r.oldestWaiting(ctx, saleID, g)
	if err != nil {
		return err
	}
	r.Metrics.OldestAge.WithLabelValues(label).Set(age.Seconds())
	return nil
}

// oldestWaiting is the age of the oldest inbox entry not yet acknowledged:
// the first one pending (delivered, its start not yet confirmed) or, when
// older, the first one not yet delivered; zero when none waits.
func (r *Relay) oldestWaiting(ctx context.Context, saleID int64, g redisgateway.InboxGroupInfo) (time.Duration, error) {
	var oldest time.Duration
	if g.Pending > 0 {
		pctx, cancel := context.WithTimeout(ctx, redisTimeout)
		lower, err := r.Redis.OldestPending(pctx, saleID)
		cancel()
		if err != nil {
			return 0, err
		}
		oldest = redisgateway.EntryAge(lower)
	}
	if g.Lag != 0 {
		xctx, cancel := context.WithTimeout(ctx, redisTimeout)
		next, err := r.Redis.FirstUndelivered(xctx, saleID, g.LastDeliveredID)
		cancel()
		if err != nil {
			return 0, err
		}
		if next != "" {
			oldest = max(oldest, redisgateway.EntryAge(next))
		}
	}
	return oldest, nil
}
