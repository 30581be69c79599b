// Package salecache is the API's in-process picture of the sales: each open
// sale, its stock as last seen, its waitlist's length, a sold-out sale's
// mark (its buyers and replays, so a sold-out answer costs no Redis call),
// and the blacklist, refreshed every second (Redis only for the sales the
// fleet's change feed names, and a share of the others each second, so
// every sale at least once a minute) and changed at
// once by this instance's own writes.
package salecache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/store"
)

// Entry is one sale in the in-process cache. The entry lives as long as
// the sale is cached; its fields are swapped atomically, so the hot path
// reads them without locks.
type Entry struct {
	sale      atomic.Pointer[domain.Sale]
	stockLeft atomic.Int64 // Redis stock when warmed, else the database's
	waiting   atomic.Int64 // users on the sale's waitlist, as last read
	mark      atomic.Pointer[soldOutMark]
	loading   atomic.Bool // one sold-out mark load at a time
	// putAt is when this instance last wrote the sale it had just changed
	// (put): a read that began before it is older and must not replace it.
	putAt atomic.Int64
	id    int64
	cache *Cache // loads the sold-out mark (SoldOut)
}

// storeWritten stores a sale this instance has just changed in the database.
func (e *Entry) storeWritten(sale *domain.Sale) {
	e.sale.Store(sale)
	e.putAt.Store(time.Now().UnixNano())
}

// storeRead stores a sale read from the database at readAt, unless this
// instance wrote a newer one since the read began.
func (e *Entry) storeRead(sale *domain.Sale, readAt time.Time) {
	if e.putAt.Load() < readAt.UnixNano() {
		e.sale.Store(sale)
	}
}

// soldOutMark is an immutable picture of a sold-out sale taken in one
// MULTI/EXEC (redisgateway.SoldOut): while the release counter has not moved, no
// unit can be reserved, so the buyers and the replay map are exact.
type soldOutMark = redisgateway.SoldOut

// View renders the sale as the cache last saw it.
func (e *Entry) View(now time.Time) domain.SaleView {
	return e.sale.Load().View(now, e.stockLeft.Load(), e.waiting.Load())
}

// Sale is the sale as last stored.
func (e *Entry) Sale() *domain.Sale { return e.sale.Load() }

// StockLeft is the sale's stock as last seen: Redis's when warmed, else
// the database's.
func (e *Entry) StockLeft() int64 { return e.stockLeft.Load() }

// Waiting is the length of the sale's waitlist as last read.
func (e *Entry) Waiting() int64 { return e.waiting.Load() }

// SetStock stores a stock just read.
func (e *Entry) SetStock(n int64) { e.stockLeft.Store(n) }

// Warmed stores a sale's stock after a warm-up, which leaves it no
// sold-out mark.
func (e *Entry) Warmed(stock int64) {
	e.stockLeft.Store(stock)
	e.mark.Store(nil)
}

// Marked reports whether the sale has a sold-out mark.
func (e *Entry) Marked() bool { return e.mark.Load() != nil }

// StockSeen records a stock seen by a script answer; concurrent answers
// arrive out of order, so only a lower value wins (the refresher raises it).
func (e *Entry) StockSeen(n int64) {
	for {
		cur := e.stockLeft.Load()
		if n < 0 || n >= cur || e.stockLeft.CompareAndSwap(cur, n) {
			return
		}
	}
}

// OnRedis reports whether the cached sale is in Redis mode at epoch: what
// a Redis call must see when it starts.
func (e *Entry) OnRedis(epoch int64) bool {
	sale := e.sale.Load()
	return sale.Mode == domain.ModeRedis && sale.ModeEpoch == epoch
}

// SoldOut records a script's "sold out": no stock, and the sold-out mark
// loading.
func (e *Entry) SoldOut() {
	e.stockLeft.Store(0)
	e.cache.markSoldOutAsync(e.id, e)
}

// Moved stores the sale this instance has just moved to the database
// path; the sold-out mark, a picture of Redis, goes.
func (e *Entry) Moved(sale *domain.Sale) {
	e.storeWritten(sale)
	e.mark.Store(nil)
}

// MarkAnswer is what a sold-out mark says about a request.
type MarkAnswer int

const (
	MarkNone    MarkAnswer = iota // no mark: go on to the script
	MarkReplay                    // a replay: answer its token from memory
	MarkScript                    // the user holds a unit, or has retired records (maybe a replay the database knows): the script answers
	MarkSoldOut                   // anyone else: 410 at once
)

// Check consults the mark without allocating.
func (e *Entry) Check(userID int64, requestID string) (MarkAnswer, string) {
	m := e.mark.Load()
	if m == nil {
		return MarkNone, ""
	}
	if tok, ok := m.Replay(userID, requestID); ok {
		return MarkReplay, tok
	}
	_, buyer := m.Buyers[userID]
	_, retired := m.Retired[userID]
	if buyer || retired {
		return MarkScript, ""
	}
	return MarkSoldOut, ""
}

// Cache holds sales, their stock and the blacklist, refreshed every second
// (Refresh): the database's open sales each time, Redis only for the sales
// the change feed names and a share of the others.
type Cache struct {
	st      *store.Store
	rdb     *redisgateway.Client
	timeout time.Duration
	logger  *slog.Logger

	mu      sync.RWMutex
	entries map[int64]*Entry
	misses  map[int64]time.Time // unknown ids, remembered for a second
	// known holds every sale id that exists (read once, then every open
	// sale the refresher sees and every sale created here), so an unknown
	// id is answered without a query; knownLoaded says it was read.
	known       map[int64]struct{}
	knownLoaded bool

	// discovery looks for sales created elsewhere since the last refresh
	// when an unknown id is asked for: one query finds them all, at most
	// discoverRate per second, so a flood of unknown ids costs no more.
	discoverMu sync.Mutex
	discovery  *rate.Limiter

	// refreshQueries counts the statements the refresher ran: its cost is
	// per second, whatever the traffic (RefreshQueries).
	refreshQueries atomic.Int64

	blacklist atomic.Pointer[map[int64]struct{}]
	// blacklistMu orders the blacklist's writers: an operator's change on
	// this instance and the refresher's snapshot. local keeps each change
	// until a read of the database that began after it, so a snapshot
	// read before the change committed cannot undo it here.
	blacklistMu sync.Mutex
	local       map[int64]blacklistChange

	// feedMu guards when the change feed was last read (lastFeed) and the
	// refreshes that read Redis (ticks: which share of the full pass is due).
	feedMu   sync.Mutex
	lastFeed time.Time
	ticks    int64
	// lastDir is the directory's picture the last refresh that read Redis
	// applied: while the next one holds the same sales, only the sales due
	// are stored again, not every open sale each second.
	lastDir *store.OpenSales
	// storedDir is the directory's picture the last refresh stored whole,
	// whether it read Redis or not; unanswered says the last refresh could
	// not read Redis, so the next asks it a PING before anything per sale.
	storedDir  *store.OpenSales
	unanswered bool
}

// blacklistChange is an operator's change of a user's blacklisting made on
// this instance, and when.
type blacklistChange struct {
	on bool
	at time.Time
}

// New is an empty cache; Refresh fills it.
func New(st *store.Store, rdb *redisgateway.Client, timeout time.Duration, logger *slog.Logger) *Cache {
	c := &Cache{st: st, rdb: rdb, timeout: timeout, logger: logger, entries: map[int64]*Entry{}, misses: map[int64]time.Time{}, known: map[int64]struct{}{},
		discovery: rate.NewLimiter(discoverRate, discoverBurst)}
	empty := map[int64]struct{}{}
	c.blacklist.Store(&empty)
	return c
}

// newEntry is a new entry of sale id.
func (c *Cache) newEntry(id int64) *Entry { return &Entry{id: id, cache: c} }

const missTTL = time.Second

// Sales is every cached sale as last loaded.
func (c *Cache) Sales() []*domain.Sale {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]*domain.Sale, 0, len(c.entries))
	for _, e := range c.entries {
		out = append(out, e.sale.Load())
	}
	return out
}

// EntriesWaiting lists the cached sales with someone on their waitlist and
// units in stock, as last read.
func (c *Cache) EntriesWaiting() []*Entry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []*Entry
	for _, e := range c.entries {
		if e.waiting.Load() > 0 && e.stockLeft.Load() > 0 {
			out = append(out, e)
		}
	}
	return out
}

// Discovery of sales created elsewhere between refreshes.
const (
	discoverRate  = 2
	discoverBurst = 3
)

var errUnknownSale = domain.Errorf(domain.ENotFound, "no such sale")

// Get returns the sale's entry, loading it from the database on a miss.
func (c *Cache) Get(ctx context.Context, id int64) (*Entry, error) {
	c.mu.RLock()
	e := c.entries[id]
	if e != nil {
		c.mu.RUnlock()
		return e, nil
	}
	missAt, missed := c.misses[id]
	_, known := c.known[id]
	loaded := c.knownLoaded
	c.mu.RUnlock()
	if loaded && !known && !c.discover(ctx, id) {
		// Not a sale: answered without a query per id. A sale created
		// elsewhere reaches the set by discovery or the next refresh.
		return nil, errUnknownSale
	}
	if missed && time.Since(missAt) < missTTL {
		return nil, errUnknownSale
	}
	return c.load(ctx, id)
}

// Cached is the sale's entry when the cache holds it, else nil; unlike
// Get it never reads the database.
func (c *Cache) Cached(id int64) *Entry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.entries[id]
}

// discover reads the sale ids again, when the discovery budget allows, and
// reports whether id is among them. Concurrent callers wait for one read.
func (c *Cache) discover(ctx context.Context, id int64) bool {
	c.discoverMu.Lock()
	defer c.discoverMu.Unlock()
	c.mu.RLock()
	_, known := c.known[id]
	c.mu.RUnlock()
	if known || !c.discovery.Allow() {
		return known
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ids, err := c.st.SaleIDs(ctx)
	if err != nil {
		return true // cannot tell: let the lookup decide
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range ids {
		c.known[k] = struct{}{}
	}
	_, known = c.known[id]
	return known
}

// load reads one sale and its stock into the cache.
func (c *Cache) load(ctx context.Context, id int64) (*Entry, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	readAt := time.Now()
	sale, err := c.st.GetSale(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		c.mu.Lock()
		if len(c.misses) > 10000 {
			clear(c.misses) // bounded: a flood of unknown ids costs one query each per second at worst
		}
		c.misses[id] = time.Now()
		c.mu.Unlock()
		return nil, errUnknownSale
	}
	if err != nil {
		return nil, fmt.Errorf("load sale %d: %w", id, err)
	}
	stock := c.ReadStock(ctx, id)
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[id]
	if e == nil {
		e = c.newEntry(id)
		c.entries[id] = e
	}
	e.storeRead(sale, readAt)
	e.stockLeft.Store(stock)
	delete(c.misses, id)
	c.known[id] = struct{}{}
	return e, nil
}

// ReadStock is the Redis stock of a warmed sale, else the database's.
func (c *Cache) ReadStock(ctx context.Context, id int64) int64 {
	rctx, cancel := context.WithTimeout(ctx, c.timeout)
	n, ok, err := c.rdb.Stock(rctx, id)
	cancel()
	if err == nil && ok {
		return n
	}
	dctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	n, err = c.st.DBStock(dctx, id)
	if err != nil {
		return 0
	}
	return n
}

// Put replaces the cached sale at once (operator actions on this instance).
func (c *Cache) Put(sale *domain.Sale) *Entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[sale.ID]
	if e == nil {
		e = c.newEntry(sale.ID)
		c.entries[sale.ID] = e
	}
	e.storeWritten(sale)
	delete(c.misses, sale.ID)
	c.known[sale.ID] = struct{}{}
	return e
}

// DropMark forgets a sale's sold-out mark (units came back on this instance).
func (c *Cache) DropMark(id int64) {
	c.mu.RLock()
	e := c.entries[id]
	c.mu.RUnlock()
	if e != nil {
		e.mark.Store(nil)
	}
}

func (c *Cache) Blacklisted(userID int64) bool {
	_, ok := (*c.blacklist.Load())[userID]
	return ok
}

// SetBlacklisted applies an operator's change, committed in the database,
// on this instance at once.
func (c *Cache) SetBlacklisted(userID int64, on bool) {
	c.blacklistMu.Lock()
	defer c.blacklistMu.Unlock()
	if c.local == nil {
		c.local = map[int64]blacklistChange{}
	}
	c.local[userID] = blacklistChange{on: on, at: time.Now()}
	old := *c.blacklist.Load()
	next := make(map[int64]struct{}, len(old)+1)
	for k := range old {
		next[k] = struct{}{}
	}
	setBlacklisted(next, userID, on)
	c.blacklist.Store(&next)
}

func setBlacklisted(m map[int64]struct{}, userID int64, on bool) {
	if on {
		m[userID] = struct{}{}
	} else {
		delete(m, userID)
	}
}

// markSoldOutAsync starts loading the sale's sold-out mark in the
// background, unless a mark stands or a load is already running: after a
// sale sells out, every answer is "sold out" until the mark lands, and none
// of them should start a goroutine or a load of its own.
func (c *Cache) markSoldOutAsync(id int64, e *Entry) {
	if e.mark.Load() != nil || !e.loading.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer e.loading.Store(false)
		if err := c.MarkSoldOut(context.Background(), id, e); err != nil {
			c.logger.Warn("sold-out mark", "sale_id", id, "err", err)
		}
	}()
}

// MarkSoldOut loads the sold-out picture of a sale in one MULTI/EXEC on its
// keys (one hash slot) and stores it unless units are left.
func (c *Cache) MarkSoldOut(ctx context.Context, id int64, e *Entry) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	m, err := c.rdb.ReadSoldOut(ctx, id)
	if err != nil {
		return fmt.Errorf("load sold-out mark of sale %d: %w", id, err)
	}
	if m == nil {
		return nil // not warmed, or units are back: no mark
	}
	e.mark.Store(m)
	return nil
}

// Feed timing of the refresher.
const (
	// fullShares is how many refreshes (seconds) the full pass is spread
	// over: each refresh reads one share of the open sales whatever the
	// change feed said, the backstop for a change whose note was lost.
	fullShares = 60
	// feedMargin is how far before its last read the refresher looks back
	// in the feed: clock skew between writers and a note's own delay.
	feedMargin = 3 * time.Second
)

// Refresh re-reads the open sales and the blacklist from the database,
// and the Redis stock, release counter and waitlist of the sales that
// changed: those the change feed names since the last refresh, those new
// to the cache, and those whose row moved (warmed, mode, epoch), and a
// share of the others, so each open sale is read at least once a minute;
// every open sale on the first refresh and whenever the feed cannot be
// read while Redis answers a PING; none while it does not (the database's
// changes are still stored). A moved release counter or stock above zero
// drops a sold-out mark, so released units sell again even if no one told
// us.
func (c *Cache) Refresh(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var errs []error
	c.refreshQueries.Add(2) // the blacklist and the open sales
	if err := c.refreshBlacklist(ctx); err != nil {
		errs = append(errs, err)
	}
	dir, err := c.st.OpenSales(ctx)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	// The directory's picture holds what was committed when its read
	// began: older than a write this instance made since.
	readAt := dir.At
	if err := c.loadKnown(ctx); err != nil {
		errs = append(errs, err)
	}
	open, due, whole, err := c.dueSales(ctx, dir, readAt)
	if err != nil {
		// Redis does not answer this instance: the database's changes
		// are stored, and the marks stay for the refresh that reaches it.
		c.apply(open, whole, readAt, nil, nil, false)
		c.refreshed(dir, whole, false)
		return errors.Join(append(errs, err)...)
	}
	stocks, counters, err := c.readRedis(ctx, due)
	if err != nil {
		errs = append(errs, fmt.Errorf("refresh redis stock: %w", err))
	}
	needDB := c.apply(open, whole, readAt, stocks, counters, err == nil)
	redisOK := err == nil
	if redisOK {
		if err := c.readWaitlists(ctx, due); err != nil {
			errs = append(errs, err)
			redisOK = false
		}
	}
	c.refreshed(dir, whole, redisOK)
	if err := c.showDBStock(ctx, needDB); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// refreshed records a refresh of the directory's picture dir, stored
// whole or not, that read Redis (redisOK) or not. A pass that could not
// read Redis leaves its marks where they were, so the next refresh reads
// the same changes (or every sale) again.
func (c *Cache) refreshed(dir *store.OpenSales, whole, redisOK bool) {
	c.feedMu.Lock()
	defer c.feedMu.Unlock()
	if whole {
		c.storedDir = dir
	}
	c.unanswered = !redisOK
	if redisOK {
		c.lastFeed = dir.At
		c.ticks++
		c.lastDir = dir
	}
}

// dueSales picks the open sales whose Redis state the refresh reads: all
// of them on the first refresh, when the feed is unreadable and when the
// last read is older than the feed keeps, else those the feed names since
// the last read, those new to the cache, those whose row moved and this
// refresh's share of the full pass. open is what the refresh stores: every
// open sale (whole) when the directory's picture changed since the last
// refresh, on the first tick of each full pass and whenever every sale is
// due, else only the due ones, so an idle sale costs the refresh nothing
// between its shares. When Redis does not answer this instance, err says
// so and nothing is due: reading each sale would fail as the feed did.
func (c *Cache) dueSales(ctx context.Context, dir *store.OpenSales, now time.Time) (open, due map[int64]*domain.Sale, whole bool, err error) {
	c.feedMu.Lock()
	since, ticks, same, stored, unanswered := c.lastFeed, c.ticks, dir.Same(c.lastDir), dir.Same(c.storedDir), c.unanswered
	c.feedMu.Unlock()
	all := func() (map[int64]*domain.Sale, map[int64]*domain.Sale, bool, error) {
		open := make(map[int64]*domain.Sale, dir.Len())
		for _, s := range dir.List() {
			open[s.ID] = s
		}
		return open, open, true, nil
	}
	cutOff := func(err error) (map[int64]*domain.Sale, map[int64]*domain.Sale, bool, error) {
		err = fmt.Errorf("sale cache: redis does not answer: %w", err)
		if stored {
			return nil, nil, false, err // no sale opened, closed or changed since the last store
		}
		open, _, _, _ := all()
		return open, nil, true, err
	}
	if unanswered {
		if err := c.ping(ctx); err != nil {
			return cutOff(err)
		}
	}
	if since.IsZero() || now.Sub(since) > redisgateway.ChangesKeep-feedMargin {
		return all() // first read, or the feed may have dropped notes since
	}
	share := ticks % fullShares
	if share == 0 {
		c.pruneFeed(ctx, now)
	}
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	changed, err := c.rdb.ChangedSince(rctx, since.Add(-feedMargin))
	cancel()
	if err != nil {
		if perr := c.ping(ctx); perr != nil {
			return cutOff(err)
		}
		c.logger.Warn("sale cache: change feed unreadable; reading every sale", "err", err)
		return all()
	}
	due = make(map[int64]*domain.Sale, len(changed))
	for _, id := range changed {
		if s, ok := dir.Get(id); ok {
			due[id] = s
		}
	}
	for _, s := range dir.Share(fullShares, share) {
		due[s.ID] = s // this tick's share of the full pass
	}
	if same && share != 0 {
		return due, due, false, nil // no sale opened, closed or changed since the last refresh
	}
	open, _, _, _ = all()
	c.mu.RLock()
	defer c.mu.RUnlock()
	for id, s := range open {
		e := c.entries[id]
		if e == nil {
			due[id] = s
			continue
		}
		if old := e.sale.Load(); old == nil || old.Warmed != s.Warmed || old.Mode != s.Mode || old.ModeEpoch != s.ModeEpoch {
			due[id] = s
		}
	}
	return open, due, true, nil
}

// ping asks Redis whether it answers this instance.
func (c *Cache) ping(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return c.rdb.Ping(pctx)
}

// pruneFeed keeps the change feed as long as its recent sales.
func (c *Cache) pruneFeed(ctx context.Context, now time.Time) {
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := c.rdb.PruneChanges(pctx, now); err != nil {
		c.logger.Warn("sale cache: prune the change feed", "err", err)
	}
}

func (c *Cache) refreshBlacklist(ctx context.Context) error {
	began := time.Now()
	ids, err := c.st.Blacklist(ctx)
	if err != nil {
		return err
	}
	c.storeBlacklist(ids, began)
	return nil
}

// storeBlacklist replaces the blacklist with ids, read from the database
// by a read that began at began, keeping this instance's changes made
// since (the read may not have seen them).
func (c *Cache) storeBlacklist(ids []int64, began time.Time) {
	m := make(map[int64]struct{}, len(ids))
	for _, id := range ids {
		m[id] = struct{}{}
	}
	c.blacklistMu.Lock()
	defer c.blacklistMu.Unlock()
	for uid, ch := range c.local {
		if ch.at.Before(began) {
			delete(c.local, uid) // the read began after it committed
			continue
		}
		setBlacklisted(m, uid, ch.on)
	}
	c.blacklist.Store(&m)
}

// loadKnown reads every sale id once.
func (c *Cache) loadKnown(ctx context.Context) error {
	c.mu.RLock()
	loaded := c.knownLoaded
	c.mu.RUnlock()
	if loaded {
		return nil
	}
	c.refreshQueries.Add(1)
	ids, err := c.st.SaleIDs(ctx)
	if err != nil {
		return err
	}
	c.mu.Lock()
	for _, id := range ids {
		c.known[id] = struct{}{}
	}
	c.knownLoaded = true
	c.mu.Unlock()
	return nil
}

// readRedis reads the stock of each open sale and the release counter of
// each marked one, in one round trip.
func (c *Cache) readRedis(ctx context.Context, open map[int64]*domain.Sale) (map[int64]redisgateway.Counter, map[int64]redisgateway.Counter, error) {
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	stockOf := make([]int64, 0, len(open))
	var marked []int64
	c.mu.RLock()
	for id := range open {
		stockOf = append(stockOf, id)
		if e := c.entries[id]; e != nil && e.mark.Load() != nil {
			marked = append(marked, id)
		}
	}
	c.mu.RUnlock()
	return c.rdb.ReadCounters(rctx, stockOf, marked)
}

// readWaitlists reads the waitlist length of each open sale, in one round
// trip.
func (c *Cache) readWaitlists(ctx context.Context, open map[int64]*domain.Sale) error {
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	ids := make([]int64, 0, len(open))
	for id := range open {
		ids = append(ids, id)
	}
	lengths, err := c.rdb.WaitlistLengths(rctx, ids)
	if err != nil {
		return fmt.Errorf("refresh waitlists: %w", err)
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	for id, n := range lengths {
		if e := c.entries[id]; e != nil {
			e.waiting.Store(n)
		}
	}
	return nil
}

// apply stores the open sales and what Redis said of them, drops entries
// of sales no longer open when open is every open sale (whole) and marks a
// moved counter voids; it answers the Sales whose Redis keys are missing.
func (c *Cache) apply(open map[int64]*domain.Sale, whole bool, readAt time.Time, stocks, counters map[int64]redisgateway.Counter, redisOK bool) (needDB []int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if whole {
		for id := range c.entries {
			if _, ok := open[id]; !ok {
				delete(c.entries, id) // finished or gone: reloaded on demand
			}
		}
	}
	for id, s := range open {
		e := c.entries[id]
		if e == nil {
			e = c.newEntry(id)
			c.entries[id] = e
		}
		e.storeRead(s, readAt)
		delete(c.misses, id)
		c.known[id] = struct{}{}
		if !redisOK {
			continue
		}
		cnt, read := stocks[id]
		if !read {
			continue // unchanged since the last read: the feed named it not
		}
		n, err := cnt.N, cnt.Err
		if err != nil {
			if errors.Is(err, redisgateway.ErrMissing) {
				needDB = append(needDB, id)
			}
			continue
		}
		e.stockLeft.Store(n)
		if m := e.mark.Load(); m != nil && (n > 0 || counterMoved(counters, id, m.Released)) {
			e.mark.CompareAndSwap(m, nil)
		}
	}
	return needDB
}

// counterMoved reports whether a sale's release counter moved since its
// sold-out mark was set (or vanished while it was not zero).
func counterMoved(counters map[int64]redisgateway.Counter, id, released int64) bool {
	cnt, ok := counters[id]
	if !ok {
		return false
	}
	return (cnt.Err == nil && cnt.N != released) || (errors.Is(cnt.Err, redisgateway.ErrMissing) && released != 0)
}

// showDBStock shows the database's unsold units for sales not in Redis,
// in one query.
func (c *Cache) showDBStock(ctx context.Context, needDB []int64) error {
	if len(needDB) == 0 {
		return nil
	}
	c.refreshQueries.Add(1)
	stocks, err := c.st.DBStocks(ctx, needDB)
	if err != nil {
		return err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, id := range needDB {
		if e := c.entries[id]; e != nil {
			e.stockLeft.Store(stocks[id])
		}
	}
	return nil
}

// RefreshQueries is how many statements the refresher has run.
func (c *Cache) RefreshQueries() int64 { return c.refreshQueries.Load() }

// DatabaseModeSales lists the cached sales off the Redis path: taking
// reservations on the database path or switching back.
func (c *Cache) DatabaseModeSales() []int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var ids []int64
	for id, e := range c.entries {
		if s := e.sale.Load(); s != nil && s.Mode != domain.ModeRedis {
			ids = append(ids, id)
		}
	}
	return ids
}

// Len is how many sales the cache holds: the open ones, and for a second
// at most a retired one a request asked for.
func (c *Cache) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.entries)
}
