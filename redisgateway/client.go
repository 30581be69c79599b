package redisgateway

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"github.com/redis/go-redis/v9/push"
)

// Client is the production code's one way to Redis. Packages other than
// redisgateway (and internal/conn, which dials) never import go-redis: they hold a
// *Client and call its typed operations, so the key layout, the value
// encodings and the scripts live here only (arch_test.go checks it).
// Test support may still reach Redis directly (Scripts, SaleKeys).
type Client struct {
	rdb      redis.UniversalClient
	scripts  *Scripts
	notes    notes                         // the change feed's throttle (NoteChange)
	noteErrs func(saleID int64, err error) // hears of failed notes; nil ignores them
}

// NewClient wraps a go-redis client (one server or a cluster).
func NewClient(rdb redis.UniversalClient) *Client {
	return &Client{rdb: rdb, scripts: New()}
}

// Fences reports whether ListenStatusEvents can call StatusEvents.Fence
// (one server, not a cluster).
func (c *Client) Fences() bool {
	_, cluster := c.rdb.(*redis.ClusterClient)
	return !cluster
}

// Close closes the connections.
func (c *Client) Close() error { return c.rdb.Close() }

// Ping checks that Redis answers.
func (c *Client) Ping(ctx context.Context) error { return c.rdb.Ping(ctx).Err() }

// asidePoolSize bounds the aside client's connections to each server:
// enough for a ping every 50 ms to overlap its unanswered predecessors
// while a server stalls.
const asidePoolSize = 8

// Aside returns a client to the same servers on connections of its own,
// for a caller that must not queue behind the shared pool: its answers
// time Redis, not this process's waiting calls. The caller closes it.
// Made from a Sentinel failover client (a *redis.Client whose dialer asks
// the sentinels for the master), it shares that discovery: each of its
// dials goes to the master the sentinels name, so it follows a failover
// once its connections to the old master fail (a killed master's at once,
// a demoted one's when the sentinels disconnect its clients). It must be
// closed before the client it was made from, whose Close ends the
// discovery.
func (c *Client) Aside() (*Client, error) {
	switch rdb := c.rdb.(type) {
	case *redis.Client:
		o := *rdb.Options()
		ownConnections(&o.PoolSize, &o.MinIdleConns, &o.MaxIdleConns, &o.ContextTimeoutEnabled, &o.PushNotificationProcessor, &o.MaintNotificationsConfig)
		return NewClient(redis.NewClient(&o)), nil
	case *redis.ClusterClient:
		o := *rdb.Options()
		ownConnections(&o.PoolSize, &o.MinIdleConns, &o.MaxIdleConns, &o.ContextTimeoutEnabled, &o.PushNotificationProcessor, &o.MaintNotificationsConfig)
		return NewClient(redis.NewClusterClient(&o)), nil
	}
	return nil, fmt.Errorf("aside client: unsupported redis client %T", c.rdb)
}

// IsTimeout reports a call that gave up waiting (its deadline, the pool,
// a socket's deadline), which a slow client and a slow Redis both cause;
// any other error came from the link or from Redis.
func IsTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, redis.ErrPoolTimeout) ||
		(errors.As(err, &ne) && ne.Timeout())
}

// ownConnections sets the fields an aside client's options (a copy of
// another client's) must not share: a small pool, deadlines from the
// context, and the push processor and maintenance config a client
// registers its handlers on.
func ownConnections(poolSize, minIdle, maxIdle *int, ctxTimeout *bool, push *push.NotificationProcessor, maint **maintnotifications.Config) {
	*poolSize, *minIdle, *maxIdle = asidePoolSize, 1, asidePoolSize
	*ctxTimeout = true
	*push = nil
	if *maint != nil {
		mc := **maint
		*maint = &mc
	}
}

// PingAll checks that every server answers: each master of a cluster, or
// the one server.
func (c *Client) PingAll(ctx context.Context) error {
	if cc, ok := c.rdb.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return m.Ping(ctx).Err() })
	}
	return c.Ping(ctx)
}

// InstrumentScripts times every script call on
// seckill_redis_script_duration_seconds (ScriptLatencyHook), registered on reg.
func (c *Client) InstrumentScripts(reg prometheus.Registerer) error {
	hook, err := c.scripts.ScriptLatencyHook(reg)
	if err != nil {
		return err
	}
	c.rdb.AddHook(hook)
	return nil
}

// Release releases a token's hold (Scripts.Release).
func (c *Client) Release(ctx context.Context, saleID, userID int64, token string, restore, keepBuyer bool) (bool, error) {
	defer c.NoteChange(saleID)
	return c.scripts.Release(ctx, c.rdb, saleID, userID, token, restore, keepBuyer)
}

// Advance moves a token's state (Scripts.Advance).
func (c *Client) Advance(ctx context.Context, saleID int64, token, to string, from ...string) (bool, error) {
	defer c.NoteChange(saleID)
	return c.scripts.Advance(ctx, c.rdb, saleID, token, to, from...)
}

// RestoreLive puts a live order's lost token state and buyer mark back
// (Scripts.RestoreLive).
func (c *Client) RestoreLive(ctx context.Context, saleID, userID int64, token, state string, fence int64) (bool, error) {
	return c.scripts.RestoreLive(ctx, c.rdb, saleID, userID, token, state, fence)
}

// ReadUserReservations reads a user's reservations of a sale from the
// user index (Scripts.ReadUserReservations).
func (c *Client) ReadUserReservations(ctx context.Context, saleID, userID int64) (UserReservations, error) {
	return c.scripts.ReadUserReservations(ctx, c.rdb, saleID, userID)
}

// ReadUsersReservations reads several users' reservations of a sale in
// one script (Scripts.ReadUsersReservations).
func (c *Client) ReadUsersReservations(ctx context.Context, saleID int64, userIDs []int64) ([]UserReservations, error) {
	return c.scripts.ReadUsersReservations(ctx, c.rdb, saleID, userIDs)
}

// Warmup loads a sale into Redis (Scripts.Warmup). Only a warm-up that
// changed Redis is noted in the change feed: a sale workflow's warm-up of
// a sale the operator warmed already costs the fleet nothing (noted, a
// live sale would be signalled and reconciled).
func (c *Client) Warmup(ctx context.Context, a WarmupArgs) (outcome string, stock int64, err error) {
	outcome, stock, changed, err := c.scripts.warmupRun(ctx, c.rdb, a)
	if err != nil || changed {
		c.NoteChange(a.SaleID) // a failed script may have written
	}
	return outcome, stock, err
}

// Adjust changes a sale's Redis stock (Scripts.Adjust).
func (c *Client) Adjust(ctx context.Context, saleID, delta int64, ref string) (outcome AdjustOutcome, stock int64, err error) {
	defer c.NoteChange(saleID)
	return c.scripts.Adjust(ctx, c.rdb, saleID, delta, ref)
}

// ReadSnapshot reads a sale's Redis state (Scripts.ReadSnapshot).
func (c *Client) ReadSnapshot(ctx context.Context, saleID int64, staleAfter time.Duration) (*Snapshot, error) {
	return c.scripts.ReadSnapshot(ctx, c.rdb, saleID, staleAfter)
}

// RepairStock repairs a sale's drifted Redis stock (Scripts.RepairStock).
func (c *Client) RepairStock(ctx context.Context, saleID, stockTotal int64, addedRefs, liveTokens []string) (StockRepair, error) {
	defer c.NoteChange(saleID)
	return c.scripts.RepairStock(ctx, c.rdb, saleID, stockTotal, addedRefs, liveTokens)
}

// ReadFence reads a sale's fence counter (Scripts.ReadFence).
func (c *Client) ReadFence(ctx context.Context, saleID int64) (int64, error) {
	return c.scripts.ReadFence(ctx, c.rdb, saleID)
}

// Rebuild loads a sale into Redis from the database (Scripts.Rebuild).
func (c *Client) Rebuild(ctx context.Context, saleID int64, d RebuildData) (int64, error) {
	defer c.NoteChange(saleID)
	return c.scripts.Rebuild(ctx, c.rdb, saleID, d)
}

// WriteStatus records a reservation's status (Scripts.WriteStatus).
func (c *Client) WriteStatus(ctx context.Context, saleID int64, token string, r StatusRecord) (bool, error) {
	return c.scripts.WriteStatus(ctx, c.rdb, saleID, token, r)
}

// ForgetStatus deletes a reservation's status record (Scripts.ForgetStatus).
func (c *Client) ForgetStatus(ctx context.Context, saleID int64, token string) error {
	return c.scripts.ForgetStatus(ctx, c.rdb, saleID, token)
}

// ReadStatus reads a token's hold and status record (Scripts.ReadStatus).
func (c *Client) ReadStatus(ctx context.Context, saleID int64, token string) (StatusRead, error) {
	return c.scripts.ReadStatus(ctx, c.rdb, saleID, token)
}

// ReadStatuses reads several tokens of one sale in one script (see
// Scripts.ReadStatuses).
func (c *Client) ReadStatuses(ctx context.Context, saleID int64, tokens []string) ([]StatusRead, error) {
	return c.scripts.ReadStatuses(ctx, c.rdb, saleID, tokens)
}

//go:embed control.lua
var controlSrc string

var controlScript = redis.NewScript(controlSrc)

// SetControl writes a sale's control (active, paused, stopped) into its
// Redis metadata, only when the sale is warmed, so it never creates half a
// sale; it reports whether the sale was there. Only a control it changed
// is noted in the change feed: repeating the database's control costs the
// fleet nothing.
func (c *Client) SetControl(ctx context.Context, saleID int64, control string) (bool, error) {
	n, err := controlScript.Run(ctx, c.rdb, []string{SaleKeys(saleID).Meta}, control).Int64()
	if err != nil {
		c.NoteChange(saleID) // it may have been written
		return false, fmt.Errorf("control script: %w", err)
	}
	if n == 2 {
		c.NoteChange(saleID)
	}
	return n >= 1, nil
}

// Stock reads a sale's Redis stock; ok is false when the sale is not in
// Redis (not warmed, torn down or lost).
func (c *Client) Stock(ctx context.Context, saleID int64) (stock int64, ok bool, err error) {
	n, err := c.rdb.Get(ctx, SaleKeys(saleID).Stock).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read stock of sale %d: %w", saleID, err)
	}
	return n, true, nil
}

// ErrMissing is the error of a counter read (Counter.Err) whose key does
// not exist.
var ErrMissing = redis.Nil

// Counter is one integer key as a pipelined read saw it; Err is ErrMissing
// when the key does not exist.
type Counter struct {
	N   int64
	Err error
}

// ReadCounters reads, in one pipeline, the stock of every sale of stockOf
// and the release counter of every sale of releasedOf. err is the
// pipeline's failure (a missing key is not one); on success every sale
// asked for has its Counter.
func (c *Client) ReadCounters(ctx context.Context, stockOf, releasedOf []int64) (stocks, released map[int64]Counter, err error) {
	stocks = make(map[int64]Counter, len(stockOf))
	released = make(map[int64]Counter, len(releasedOf))
	if len(stockOf)+len(releasedOf) == 0 {
		return stocks, released, nil
	}
	pipe := c.rdb.Pipeline()
	stockCmds := make([]*redis.StringCmd, len(stockOf))
	for i, id := range stockOf {
		stockCmds[i] = pipe.Get(ctx, SaleKeys(id).Stock)
	}
	relCmds := make([]*redis.StringCmd, len(releasedOf))
	for i, id := range releasedOf {
		relCmds[i] = pipe.Get(ctx, SaleKeys(id).Released)
	}
	// Exec reports the first command error, redis.Nil included; each
	// command is read below instead.
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, nil, fmt.Errorf("read counters: %w", err)
	}
	for i, id := range stockOf {
		n, err := stockCmds[i].Int64()
		stocks[id] = Counter{N: n, Err: err}
	}
	for i, id := range releasedOf {
		n, err := relCmds[i].Int64()
		released[id] = Counter{N: n, Err: err}
	}
	return stocks, released, nil
}

// SoldOut is a sold-out sale's picture taken in one MULTI/EXEC: while its
// release counter has not moved, no unit can be reserved, so the buyers
// and the replay map are exact. A retired user's request the replay map
// does not know may be an old one the database has (retire.lua).
type SoldOut struct {
	Released int64
	Buyers   map[int64]struct{}
	Retired  map[int64]struct{}
	requests map[string]string // RequestField -> token
}

// ReadSoldOut reads a sale's sold-out picture; nil when the sale is not in
// Redis or has units left.
func (c *Client) ReadSoldOut(ctx context.Context, saleID int64) (*SoldOut, error) {
	k := SaleKeys(saleID)
	var released, stock *redis.StringCmd
	var buyers, retired *redis.StringSliceCmd
	var requests *redis.MapStringStringCmd
	_, err := c.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		released = p.Get(ctx, k.Released)
		stock = p.Get(ctx, k.Stock)
		buyers = p.SMembers(ctx, k.Buyers)
		retired = p.SMembers(ctx, k.Retired)
		requests = p.HGetAll(ctx, k.Requests)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("read sold-out picture: %w", err)
	}
	n, err := stock.Int64()
	if err != nil || n > 0 {
		return nil, nil // not warmed, or units are back
	}
	rel, err := released.Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("release counter: %w", err)
	}
	m := &SoldOut{Released: rel, requests: requests.Val()}
	if m.Buyers, err = userSet(buyers.Val()); err != nil {
		return nil, fmt.Errorf("buyers: %w", err)
	}
	if m.Retired, err = userSet(retired.Val()); err != nil {
		return nil, fmt.Errorf("retired users: %w", err)
	}
	return m, nil
}

// userSet parses a Redis set of user ids.
func userSet(members []string) (map[int64]struct{}, error) {
	out := make(map[int64]struct{}, len(members))
	for _, b := range members {
		u, err := strconv.ParseInt(b, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("bad user id %q", b)
		}
		out[u] = struct{}{}
	}
	return out, nil
}

// Replay answers the token a user's request already reserved, without
// allocating (it runs on the hot path).
func (m *SoldOut) Replay(userID int64, requestID string) (string, bool) {
	var buf [96]byte
	k := AppendRequestField(buf[:0], userID, requestID)
	tok, ok := m.requests[string(k)]
	return tok, ok
}

// TokenHold reads a token's state and owner; found is false when Redis
// does not know the token.
func (c *Client) TokenHold(ctx context.Context, saleID int64, token string) (state string, userID int64, found bool, err error) {
	v, err := c.rdb.HGet(ctx, SaleKeys(saleID).Tokens, token).Result()
	if errors.Is(err, redis.Nil) {
		return "", 0, false, nil
	}
	if err != nil {
		return "", 0, false, fmt.Errorf("read token state: %w", err)
	}
	state, userID, ok := TokenState(v)
	if !ok {
		return "", 0, false, fmt.Errorf("read token state: bad value %q", v)
	}
	return state, userID, true, nil
}

// Identity names the lineage of what the Redis servers hold: each master's
// run id (new at every restart) and replication id (new at every
// promotion of a replica). It changes whenever a server may have come back
// with less than it had acknowledged.
func (c *Client) Identity(ctx context.Context) (string, error) {
	read := func(ctx context.Context, rdb *redis.Client) (string, error) {
		info, err := rdb.Info(ctx, "server", "replication").Result()
		if err != nil {
			return "", fmt.Errorf("redis identity: %w", err)
		}
		var id []string
		for _, line := range strings.Split(info, "\n") {
			line = strings.TrimSpace(line)
			if strings.HasPrefix(line, "run_id:") || strings.HasPrefix(line, "master_replid:") {
				id = append(id, line)
			}
		}
		return strings.Join(id, ","), nil
	}
	switch rdb := c.rdb.(type) {
	case *redis.Client:
		return read(ctx, rdb)
	case *redis.ClusterClient:
		var mu sync.Mutex
		var ids []string
		err := rdb.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			id, err := read(ctx, m)
			mu.Lock()
			ids = append(ids, id)
			mu.Unlock()
			return err
		})
		slices.Sort(ids)
		return strings.Join(ids, ";"), err
	}
	return "", fmt.Errorf("redis identity: unsupported redis client %T", c.rdb)
}

// HoldCounters reads a sale's counter of holds (each hold's number, see
// reserve.lua) and its last waitlist join number; 0 for a missing key.
func (c *Client) HoldCounters(ctx context.Context, saleID int64) (holds, lastJoin int64, err error) {
	k := SaleKeys(saleID)
	for _, r := range []struct {
		key string
		to  *int64
	}{{k.Reserved, &holds}, {k.WaitSeq, &lastJoin}} {
		v, err := c.rdb.Get(ctx, r.key).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return 0, 0, fmt.Errorf("hold counters of sale %d: %w", saleID, err)
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("hold counters of sale %d: %s %q: %w", saleID, r.key, v, err)
		}
		*r.to = int64(f)
	}
	return holds, lastJoin, nil
}

// SaleKeysLost reports whether Redis lacks a sale's metadata or stock, the
// two keys the reserve script needs.
func (c *Client) SaleKeysLost(ctx context.Context, saleID int64) (bool, error) {
	k := SaleKeys(saleID)
	// One command: both keys share the sale's hash slot.
	n, err := c.rdb.Exists(ctx, k.Meta, k.Stock).Result()
	if err != nil {
		return false, fmt.Errorf("check keys of sale %d: %w", saleID, err)
	}
	return n < 2, nil
}

// SalesKeysLost is SaleKeysLost for many sales in one pipeline (one
// round trip however many): the sales of saleIDs whose metadata or stock
// Redis lacks.
func (c *Client) SalesKeysLost(ctx context.Context, saleIDs []int64) (map[int64]bool, error) {
	if len(saleIDs) == 0 {
		return nil, nil
	}
	pipe := c.rdb.Pipeline()
	cmds := make([]*redis.IntCmd, len(saleIDs))
	for i, id := range saleIDs {
		k := SaleKeys(id)
		cmds[i] = pipe.Exists(ctx, k.Meta, k.Stock)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("check keys of %d sales: %w", len(saleIDs), err)
	}
	lost := map[int64]bool{}
	for i, id := range saleIDs {
		if cmds[i].Val() < 2 {
			lost[id] = true
		}
	}
	return lost, nil
}

// DeleteSale removes every key and stream of a sale, and announces it
// (SaleWide): views cached from its status records are void.
func (c *Client) DeleteSale(ctx context.Context, saleID int64) error {
	defer c.NoteChange(saleID)
	// One key at a time: DEL of several keys is fine in one slot, but the
	// per-key form also works across a cluster reshard.
	for _, k := range SaleKeys(saleID).All() {
		if err := c.rdb.Del(ctx, k).Err(); err != nil {
			return fmt.Errorf("delete %s: %w", k, err)
		}
	}
	if err := c.rdb.Publish(ctx, EventChannel(saleID), SaleWide).Err(); err != nil {
		return fmt.Errorf("delete sale %d: announce: %w", saleID, err)
	}
	return nil
}

// ErrEventsClosed: the status-event subscription closed.
var ErrEventsClosed = errors.New("status events: subscription closed")

// StatusEvents are ListenStatusEvents' callbacks, all called from one
// goroutine in the order Redis sent the events.
type StatusEvents struct {
	Token func(saleID int64, token string) // the token's status record changed
	Sale  func(saleID int64)               // a new epoch voided every record of the sale
	// Subscribed: the subscription is (re)established; what was published
	// while it was down is lost.
	Subscribed func()
	// Fence, when set, is called with the send time of a fence each time
	// one comes back (one is sent every FencePeriod while Wanted): every
	// event Redis executed before that time has been passed to the
	// callbacks above. A fence is a PING on the subscription's own
	// connection, which Redis answers behind everything it published to
	// that connection before; a cluster does not give that order (pub/sub
	// crosses nodes over the cluster bus), so there Fence is never called.
	Fence func(sentAt time.Time)
	// Wanted, when set, says whether fences are wanted now: a fence is
	// sent only on a tick where it answers true, so an instance whose
	// cache serves nobody sends none.
	Wanted func() bool
	// Resume, when set beside Wanted, receives when fences are wanted
	// again after a pause: while none are wanted the listener looks every
	// subscriptionIdleTick, not every FencePeriod, and a receive has it
	// send a fence at once.
	Resume <-chan struct{}
}

// FencePeriod is how often ListenStatusEvents sends a fence while wanted.
const FencePeriod = 10 * time.Millisecond

const (
	// subscriptionQuiet: a subscription that heard nothing this long is
	// pinged, so a silently dead connection is found.
	subscriptionQuiet = time.Second
	// subscriptionDead: a ping unanswered this long closes the connection
	// and subscribes again on a new one.
	subscriptionDead = 5 * time.Second
	// subscriptionIdleTick is the pinger's tick while no fence is wanted
	// (StatusEvents.Resume): fine enough for subscriptionQuiet and
	// subscriptionDead, and 4 wake-ups a second instead of 100.
	subscriptionIdleTick = 250 * time.Millisecond
	// fencePrefix marks a fence's PING payload (a health ping has none).
	fencePrefix = "f"
)

// ListenStatusEvents passes every status change announced on any sale's
// event channel (status.lua, warmup.lua, rebuild.lua, ForgetStatus) to ev,
// until stop is closed (nil). go-redis resubscribes after a link error; a
// connection that stops answering pings is replaced.
func (c *Client) ListenStatusEvents(stop <-chan struct{}, ev StatusEvents) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	fencing := ev.Fence != nil && c.Fences()
	for {
		err := c.listenOnce(ctx, ev, fencing)
		if ctx.Err() != nil {
			return nil
		}
		if !errors.Is(err, errSubscriptionDead) {
			return err
		}
	}
}

// errSubscriptionDead: the subscription's connection stopped answering.
var errSubscriptionDead = errors.New("status events: subscription stopped answering")

// listenOnce serves one subscription until ctx ends (nil), its connection
// stops answering (errSubscriptionDead) or it closes (ErrEventsClosed).
func (c *Client) listenOnce(ctx context.Context, ev StatusEvents, fencing bool) error {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ps := c.rdb.PSubscribe(lctx, EventChannelPattern)
	p := &subscriptionPinger{ps: ps, base: time.Now(), fencing: fencing, wanted: ev.Wanted, resume: ev.Resume}
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.run(lctx)
		_ = ps.Close() // ends the Receive below
	}()
	defer func() { <-done }()
	for fails := 0; ; {
		m, err := ps.Receive(lctx)
		if err != nil {
			switch {
			case ctx.Err() != nil:
				return nil
			case p.dead.Load():
				return errSubscriptionDead
			case errors.Is(err, redis.ErrClosed):
				return ErrEventsClosed
			}
			// A link error: the next Receive subscribes again.
			if fails++; fails > 1 {
				time.Sleep(100 * time.Millisecond)
			}
			continue
		}
		fails = 0
		p.heard.Store(p.since())
		c.dispatchEvent(m, ev, p)
	}
}

// dispatchEvent passes one subscription message to ev.
func (c *Client) dispatchEvent(m any, ev StatusEvents, p *subscriptionPinger) {
	switch m := m.(type) {
	case *redis.Subscription:
		if m.Kind == "psubscribe" && m.Channel == EventChannelPattern {
			ev.Subscribed()
		}
	case *redis.Pong:
		if ns, ok := strings.CutPrefix(m.Payload, fencePrefix); ok && p.fencing {
			if n, err := strconv.ParseInt(ns, 10, 64); err == nil {
				ev.Fence(p.base.Add(time.Duration(n)))
			}
		}
	case *redis.Message:
		sale, ok := SaleOfEventChannel(m.Channel)
		switch {
		case !ok:
		case m.Payload == SaleWide:
			ev.Sale(sale)
		default:
			ev.Token(sale, m.Payload)
		}
	}
}

// subscriptionPinger sends a subscription's fences and health pings and
// notices when its connection stops answering. Times are since base.
type subscriptionPinger struct {
	ps      *redis.PubSub
	base    time.Time
	fencing bool
	wanted  func() bool
	resume  <-chan struct{}
	heard   atomic.Int64 // the last message of any kind
	dead    atomic.Bool
}

func (p *subscriptionPinger) since() int64 { return int64(time.Since(p.base)) }

// tick is the wait for the next look: FencePeriod while fences are
// wanted, or may be wanted without a word (no Resume).
func (p *subscriptionPinger) tick() time.Duration {
	if p.resume == nil || (p.fencing && (p.wanted == nil || p.wanted())) {
		return FencePeriod
	}
	return subscriptionIdleTick
}

// run pings every FencePeriod while fences are wanted, else after
// subscriptionQuiet of silence, until ctx ends or a ping stays unanswered
// for subscriptionDead (dead). A failed ping is not retried: the next one
// is due soon.
func (p *subscriptionPinger) run(ctx context.Context) {
	tick := time.NewTimer(FencePeriod)
	defer tick.Stop()
	var lastPing, unanswered int64 = 0, -1 // unanswered: the first ping sent after the last message heard
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-p.resume:
		}
		tick.Reset(p.tick())
		now, heard := p.since(), p.heard.Load()
		if unanswered >= 0 && heard >= unanswered {
			unanswered = -1
		}
		if unanswered >= 0 && now-unanswered > int64(subscriptionDead) {
			p.dead.Store(true)
			return
		}
		payload := ""
		switch {
		case p.fencing && (p.wanted == nil || p.wanted()):
			payload = fencePrefix + strconv.FormatInt(now, 10)
		case now-max(heard, lastPing) < int64(subscriptionQuiet):
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		var err error
		if payload == "" {
			err = p.ps.Ping(pctx)
		} else {
			err = p.ps.Ping(pctx, payload)
		}
		cancel()
		lastPing = now
		if err == nil && unanswered < 0 {
			unanswered = now
		}
	}
}
