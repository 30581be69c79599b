// Package redisgateway holds seckill's Redis scripts (embedded) and the key layout
// they work on. Every key of a sale carries the hash tag {sale:ID}, so all
// of a sale's keys live in one cluster slot and no script fails CROSSSLOT.
// KEYS.md lists each key with its bound and who trims it.
package redisgateway

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/domain"
)

var (
	//go:embed reserve.lua
	reserveSrc string
	//go:embed release.lua
	releaseSrc string
	//go:embed advance.lua
	advanceSrc string
	//go:embed warmup.lua
	warmupSrc string
	//go:embed adjust.lua
	adjustSrc string
	//go:embed snapshot.lua
	snapshotSrc string
	//go:embed repairstock.lua
	repairStockSrc string
	//go:embed rebuild.lua
	rebuildSrc string
	//go:embed restore.lua
	restoreSrc string
)

// InboxGroup is the consumer group of every sale's inbox stream.
const InboxGroup = "relay"

// Keys are the Redis keys of one sale.
type Keys struct {
	Meta     string // hash: starts_ms, ends_ms, control, epoch, mode
	Stock    string // units Redis may still hand out
	Buyers   string // set of users holding or having paid a unit
	Tokens   string // hash: token -> "state:user"
	Requests string // hash: "user:request_id" -> token (replays)
	Inbox    string // stream of reservations for the relay
	Dead     string // stream of inbox entries that failed too often
	Released string // counter bumped at every release
	Reserved string // counter of holds ever taken
	Started  string // set of tokens whose workflow is known started (of entries still in the inbox)
	Fence    string // counter bumped by every release's or advance's Redis step
	Journal  string // list: those steps, "fence|token|op", the last StepJournal
	Adjusts  string // set of stock-addition refs Redis's stock includes
	Status   string // hash: token -> status record (status.go)
	Mine     string // hash: user -> the user's tokens in hold order (at most MineCap, else '*'); _epoch, _holds (mine.go)
	Pool     string // sorted set: the opening lottery's entrants, user -> ticket (pool.go); expires PoolTTL after the last entry
	Waitlist string // sorted set: users waiting for a returned unit, user -> join number (waitlist.go)
	WaitSeq  string // the last join number (Redis's clock in µs, strictly increasing)
	Ended    string // sorted set: released tokens whose records are still here, token -> release time (ms); retire.lua empties it
	Retired  string // set of users some of whose ended reservations' records moved out to the database (retire.lua)
}

// keyNames are the names of a sale's keys after its hash tag, in Keys'
// field order.
var keyNames = [...]string{"meta", "stock", "buyers", "tokens", "requests", "inbox", "dead", "released", "reserved",
	"started", "fence", "journal", "adjusts", "status", "mine", "pool", "waitlist", "waitseq", "ended", "retired"}

// keyNamesLen is the length of keyNames together.
var keyNamesLen = func() int {
	n := 0
	for _, name := range keyNames {
		n += len(name)
	}
	return n
}()

// SaleKeys returns the keys of a sale, "{sale:ID}:name" each. They are
// built on every reservation and on every refresh of every sale due, so
// all are cut from one string: one allocation, not one a key.
func SaleKeys(saleID int64) Keys {
	var num [20]byte
	id := strconv.AppendInt(num[:0], saleID, 10)
	var b strings.Builder
	b.Grow(len(keyNames)*(len("{sale:}:")+len(id)) + keyNamesLen)
	var ends [len(keyNames)]int
	for i, name := range keyNames {
		b.WriteString("{sale:")
		b.Write(id)
		b.WriteString("}:")
		b.WriteString(name)
		ends[i] = b.Len()
	}
	all := b.String()
	var k [len(keyNames)]string
	start := 0
	for i, end := range ends {
		k[i], start = all[start:end], end
	}
	return Keys{Meta: k[0], Stock: k[1], Buyers: k[2], Tokens: k[3], Requests: k[4], Inbox: k[5], Dead: k[6], Released: k[7],
		Reserved: k[8], Started: k[9], Fence: k[10], Journal: k[11], Adjusts: k[12], Status: k[13], Mine: k[14], Pool: k[15],
		Waitlist: k[16], WaitSeq: k[17], Ended: k[18], Retired: k[19]}
}

// All lists every key of the sale, for tear-down.
func (k Keys) All() []string {
	return []string{k.Meta, k.Stock, k.Buyers, k.Tokens, k.Requests, k.Inbox, k.Dead, k.Released, k.Reserved, k.Started, k.Fence, k.Journal, k.Adjusts, k.Status, k.Mine, k.Pool, k.Waitlist, k.WaitSeq, k.Ended, k.Retired}
}

// StepJournal is how many release and advance steps a sale's journal
// keeps: a rebuild applies those that ran after its snapshot, and starts
// over only when more than this ran meanwhile.
const StepJournal = 4096

// Scripts run seckill's scripts with EVALSHA, loading them on NOSCRIPT.
type Scripts struct {
	reserve *redis.Script
	release *redis.Script
	advance *redis.Script
	warmup  *redis.Script
	adjust  *redis.Script

	snapshot    *redis.Script
	repairStock *redis.Script
	rebuild     *redis.Script
	restore     *redis.Script

	handOver     *redis.Script
	waitlistJoin *redis.Script
}

// New prepares the scripts.
func New() *Scripts {
	return &Scripts{
		reserve: redis.NewScript(reserveSrc),
		release: redis.NewScript(releaseSrc),
		advance: redis.NewScript(advanceSrc),
		warmup:  redis.NewScript(warmupSrc),
		adjust:  redis.NewScript(adjustSrc),

		snapshot:    redis.NewScript(snapshotSrc),
		repairStock: redis.NewScript(repairStockSrc),
		rebuild:     redis.NewScript(rebuildSrc),
		restore:     redis.NewScript(restoreSrc),

		handOver:     redis.NewScript(handOverSource()),
		waitlistJoin: redis.NewScript(waitlistJoinSrc),
	}
}

// Release releases a token's hold (see release.lua). restore returns the
// unit to Redis's stock; pass false when no order ever took the unit.
// keepBuyer keeps the user's buyer mark: the database knows another live
// reservation of the user in this sale.
func (s *Scripts) Release(ctx context.Context, rdb redis.Scripter, saleID, userID int64, token string, restore, keepBuyer bool) (bool, error) {
	keys, args := releaseCall(saleID, userID, token, restore, keepBuyer)
	n, err := s.release.Run(ctx, rdb, keys, args...).Int64()
	if err != nil {
		return false, fmt.Errorf("release script: %w", err)
	}
	return n == 1, nil
}

// releaseCall is release.lua's keys and arguments.
func releaseCall(saleID, userID int64, token string, restore, keepBuyer bool) ([]string, []any) {
	k := SaleKeys(saleID)
	return []string{k.Stock, k.Buyers, k.Tokens, k.Released, k.Fence, k.Mine, k.Journal, k.Ended},
		[]any{token, strconv.FormatInt(userID, 10), flag(restore), flag(keepBuyer), StepJournal}
}

// Advance moves a token's Redis state to `to` if it is in one of `from`.
func (s *Scripts) Advance(ctx context.Context, rdb redis.Scripter, saleID int64, token, to string, from ...string) (bool, error) {
	keys, args := advanceCall(saleID, token, to, from)
	n, err := s.advance.Run(ctx, rdb, keys, args...).Int64()
	if err != nil {
		return false, fmt.Errorf("advance script: %w", err)
	}
	return n == 1, nil
}

// advanceCall is advance.lua's keys and arguments.
func advanceCall(saleID int64, token, to string, from []string) ([]string, []any) {
	k := SaleKeys(saleID)
	args := make([]any, 0, 3+len(from))
	args = append(args, token, to, StepJournal)
	for _, f := range from {
		args = append(args, f)
	}
	return []string{k.Tokens, k.Fence, k.Journal}, args
}

// RestoreLive puts a live order's token state (ordered or paid) and its
// buyer mark back where a fault lost them (see restore.lua); fence is the
// sale's fence as read before the order was read from the database. It
// reports whether Redis changed; ErrFenceMoved when a release ran since
// fence was read.
func (s *Scripts) RestoreLive(ctx context.Context, rdb redis.Scripter, saleID, userID int64, token, state string, fence int64) (bool, error) {
	k := SaleKeys(saleID)
	n, err := s.restore.Run(ctx, rdb, []string{k.Meta, k.Tokens, k.Buyers, k.Fence},
		token, strconv.FormatInt(userID, 10), state, strconv.FormatInt(fence, 10)).Int64()
	if err != nil {
		return false, fmt.Errorf("restore script: %w", err)
	}
	if n < 0 {
		return false, ErrFenceMoved
	}
	return n == 1, nil
}

// WarmupArgs describe the sale to load.
type WarmupArgs struct {
	SaleID   int64
	StartsMS int64
	EndsMS   int64
	Control  string
	Epoch    int64
	Mode     string
	Stock    int64
	Buyers   []int64
}

// Warmup outcomes.
const (
	WarmupOK          = "ok"
	WarmupAlreadyLive = "already_live"
)

// WarmupRefusal is the domain's refusal a warm-up's outcome means; nil
// when the sale was loaded.
func WarmupRefusal(outcome string) error {
	if outcome == WarmupAlreadyLive {
		return domain.ErrAlreadyLive
	}
	return nil
}

// Warmup loads a sale into Redis; it answers WarmupAlreadyLive and changes
// nothing once the sale has taken a reservation.
func (s *Scripts) Warmup(ctx context.Context, rdb redis.Scripter, a WarmupArgs) (outcome string, stock int64, err error) {
	outcome, stock, _, err = s.warmupRun(ctx, rdb, a)
	return outcome, stock, err
}

// warmupRun is Warmup, also answering whether the script changed Redis
// (false for a repeated warm-up that found the sale as it would write it,
// or one refused as already live).
func (s *Scripts) warmupRun(ctx context.Context, rdb redis.Scripter, a WarmupArgs) (outcome string, stock int64, changed bool, err error) {
	k := SaleKeys(a.SaleID)
	args := []any{a.StartsMS, a.EndsMS, a.Control, a.Epoch, a.Mode, a.Stock, InboxGroup}
	for _, b := range a.Buyers {
		args = append(args, b)
	}
	v, err := s.warmup.Run(ctx, rdb, []string{k.Meta, k.Stock, k.Buyers, k.Reserved, k.Inbox, k.Mine, EventChannel(a.SaleID)}, args...).Slice()
	if err != nil {
		return "", 0, false, fmt.Errorf("warmup script: %w", err)
	}
	if len(v) != 3 {
		return "", 0, false, fmt.Errorf("warmup script: unexpected reply %v", v)
	}
	outcome, _ = v[0].(string)
	stock, _ = v[1].(int64)
	n, _ := v[2].(int64)
	return outcome, stock, n != 0, nil
}

// AdjustOutcome is what adjust.lua did, parsed from its reply here so
// that callers compare values, not the script's words.
type AdjustOutcome int

// Adjust outcomes.
const (
	// AdjustOK: the stock changed by delta.
	AdjustOK AdjustOutcome = iota + 1
	// AdjustInsufficient: a withdrawal beyond the stock; nothing taken.
	AdjustInsufficient
	// AdjustNotReady: the sale is not in Redis; nothing changed.
	AdjustNotReady
	// AdjustAlready: the ref's addition is in the stock already.
	AdjustAlready
)

var adjustOutcomes = map[string]AdjustOutcome{
	"ok": AdjustOK, "insufficient": AdjustInsufficient, "not_ready": AdjustNotReady, "already": AdjustAlready,
}

func (o AdjustOutcome) String() string {
	for word, v := range adjustOutcomes {
		if v == o {
			return word
		}
	}
	return "unknown"
}

// Adjust adds delta to the sale's Redis stock, never below zero. With a
// ref, an addition is applied once: not again, and not at all when a stock
// repair or rebuild already set the stock from a database snapshot that
// included it (AdjustAlready).
func (s *Scripts) Adjust(ctx context.Context, rdb redis.Scripter, saleID, delta int64, ref string) (outcome AdjustOutcome, stock int64, err error) {
	k := SaleKeys(saleID)
	v, err := s.adjust.Run(ctx, rdb, []string{k.Stock, k.Released, k.Adjusts}, delta, ref).Slice()
	if err != nil {
		return 0, 0, fmt.Errorf("adjust script: %w", err)
	}
	if len(v) != 2 {
		return 0, 0, fmt.Errorf("adjust script: unexpected reply %v", v)
	}
	word, _ := v[0].(string)
	if outcome = adjustOutcomes[word]; outcome == 0 {
		return 0, 0, fmt.Errorf("adjust script: unexpected outcome %q", word)
	}
	stock, _ = v[1].(int64)
	return outcome, stock, nil
}

// TokenState splits a tokens-hash value "state:user".
func TokenState(v string) (state string, userID int64, ok bool) {
	for i := 0; i < len(v); i++ {
		if v[i] == ':' {
			u, err := strconv.ParseInt(v[i+1:], 10, 64)
			if err != nil {
				return "", 0, false
			}
			return v[:i], u, true
		}
	}
	return "", 0, false
}

// Snapshot is a sale's Redis state read at one instant.
type Snapshot struct {
	Exists   bool // the stock key exists (the sale is warmed)
	Stock    int64
	Buyers   map[int64]bool
	Tokens   map[string]TokenEntry
	Pending  int64 // inbox entries delivered but not acknowledged
	Lag      int64 // inbox entries not yet delivered; -1 when unknown
	Dead     int64 // dead-lettered inbox entries
	Released int64
	Reserved int64
	Stale    int64 // pending entries idle longer than asked (at most 1000)
	// StatusRanks: the rank of each token's status record of the sale's
	// current epoch (what status reads serve).
	StatusRanks map[string]int64
	// Waiting: the tokens of the inbox entries not acknowledged yet
	// (undelivered or pending); nil when they are unknown (no consumer
	// group, or more than 1000 undelivered or pending).
	Waiting map[string]bool
}

// TokenEntry is a token's Redis state and owner.
type TokenEntry struct {
	State  string
	UserID int64
}

// ReadSnapshot reads the sale's Redis state in one script.
// Pending inbox entries idle longer than staleAfter are counted as stale.
func (s *Scripts) ReadSnapshot(ctx context.Context, rdb redis.Scripter, saleID int64, staleAfter time.Duration) (*Snapshot, error) {
	k := SaleKeys(saleID)
	v, err := s.snapshot.Run(ctx, rdb, []string{k.Stock, k.Buyers, k.Tokens, k.Inbox, k.Dead, k.Released, k.Reserved, k.Status, k.Meta},
		InboxGroup, staleAfter.Milliseconds()).Slice()
	if err != nil {
		return nil, fmt.Errorf("snapshot script: %w", err)
	}
	if len(v) != 11 {
		return nil, fmt.Errorf("snapshot script: unexpected reply of %d items", len(v))
	}
	num := func(x any) int64 { n, _ := x.(int64); return n }
	snap := &Snapshot{
		Stock:    num(v[0]),
		Buyers:   map[int64]bool{},
		Tokens:   map[string]TokenEntry{},
		Pending:  num(v[3]),
		Lag:      num(v[4]),
		Dead:     num(v[5]),
		Released: num(v[6]),
		Reserved: num(v[7]),
		Stale:    num(v[8]),
	}
	snap.Exists = snap.Stock >= 0
	buyers, _ := v[1].([]any)
	for _, b := range buyers {
		str, _ := b.(string)
		id, err := strconv.ParseInt(str, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("snapshot script: bad buyer %q", str)
		}
		snap.Buyers[id] = true
	}
	flat, _ := v[2].([]any)
	for i := 0; i+1 < len(flat); i += 2 {
		token, _ := flat[i].(string)
		val, _ := flat[i+1].(string)
		state, user, ok := TokenState(val)
		if !ok {
			return nil, fmt.Errorf("snapshot script: bad token state %q", val)
		}
		snap.Tokens[token] = TokenEntry{State: state, UserID: user}
	}
	snap.StatusRanks = map[string]int64{}
	ranks, _ := v[9].([]any)
	for i := 0; i+1 < len(ranks); i += 2 {
		token, _ := ranks[i].(string)
		rank, _ := ranks[i+1].(string)
		n, err := strconv.ParseInt(rank, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("snapshot script: bad status rank %q of %s", rank, token)
		}
		snap.StatusRanks[token] = n
	}
	if waiting, ok := v[10].([]any); ok {
		snap.Waiting = make(map[string]bool, len(waiting))
		for _, t := range waiting {
			token, _ := t.(string)
			snap.Waiting[token] = true
		}
	}
	return snap, nil
}

// StockRepair is what RepairStock did.
type StockRepair struct {
	// Outcome: RepairSet, RepairRight or RepairRefused.
	Outcome int
	// From is the stock before; To the stock the repair computed (-1 when
	// refused before computing it; negative when more units are out of sale
	// than the total, which it refuses to write).
	From, To int64
}

// RepairStock outcomes.
const (
	RepairRefused = -1 // not in Redis mode, or an addition the snapshot lacks
	RepairRight   = 0  // the stock was right
	RepairSet     = 1  // the stock was set
)

// RepairStock sets a sale's Redis stock to stockTotal minus the units out
// of sale: Redis's unreleased tokens, plus the snapshot's live tokens Redis
// does not know (repairstock.lua). addedRefs are the stock additions
// stockTotal includes.
func (s *Scripts) RepairStock(ctx context.Context, rdb redis.Scripter, saleID, stockTotal int64, addedRefs, liveTokens []string) (StockRepair, error) {
	k := SaleKeys(saleID)
	args := make([]any, 0, 2+len(addedRefs)+len(liveTokens))
	args = append(args, stockTotal, len(addedRefs))
	for _, r := range addedRefs {
		args = append(args, r)
	}
	for _, t := range liveTokens {
		args = append(args, t)
	}
	v, err := s.repairStock.Run(ctx, rdb, []string{k.Stock, k.Tokens, k.Released, k.Adjusts, k.Meta}, args...).Int64Slice()
	if err != nil {
		return StockRepair{}, fmt.Errorf("repair stock script: %w", err)
	}
	if len(v) != 3 {
		return StockRepair{}, fmt.Errorf("repair stock script: unexpected reply of %d items", len(v))
	}
	return StockRepair{Outcome: int(v[0]), From: v[1], To: v[2]}, nil
}

// RebuildData is a sale's state as the database knows it, for Rebuild.
type RebuildData struct {
	Stock    int64             `json:"stock"`
	Epoch    int64             `json:"epoch"`
	StartsMS int64             `json:"starts_ms"`
	EndsMS   int64             `json:"ends_ms"`
	Control  string            `json:"control"`
	Group    string            `json:"group"`
	Fence    int64             `json:"fence"` // ReadFence before the database snapshot
	Added    []string          `json:"added"` // stock additions Stock includes
	Buyers   []string          `json:"buyers"`
	Tokens   map[string]string `json:"tokens"`
	Requests map[string]string `json:"requests"`
	Retired  map[string]bool   `json:"retired"` // users of ended reservations not written back (retire.lua)
	// Seq is the highest hold number the database recorded: the rebuilt
	// counter of holds starts past it, so no later hold reuses a number.
	Seq int64 `json:"seq"`
}

// ErrFenceMoved: more releases ran in Redis after the rebuild's fence was
// read than the journal keeps (or, for a restore, any release ran); the
// database snapshot may be stale, so take a new one.
var ErrFenceMoved = errors.New("a release ran since the snapshot")

// ReadFence reads the sale's fence counter (0 when never bumped).
func (s *Scripts) ReadFence(ctx context.Context, rdb redis.Cmdable, saleID int64) (int64, error) {
	n, err := rdb.Get(ctx, SaleKeys(saleID).Fence).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read fence: %w", err)
	}
	return n, nil
}

// Rebuild loads a sale into Redis from the database after an outage (see
// rebuild.lua) and returns the stock it set; ErrFenceMoved when a release
// ran in Redis since d.Fence was read.
func (s *Scripts) Rebuild(ctx context.Context, rdb redis.Scripter, saleID int64, d RebuildData) (int64, error) {
	if d.Buyers == nil {
		d.Buyers = []string{}
	}
	if d.Tokens == nil {
		d.Tokens = map[string]string{}
	}
	if d.Requests == nil {
		d.Requests = map[string]string{}
	}
	if d.Added == nil {
		d.Added = []string{}
	}
	if d.Retired == nil {
		d.Retired = map[string]bool{}
	}
	d.Group = InboxGroup
	body, err := json.Marshal(d)
	if err != nil {
		return 0, fmt.Errorf("rebuild script: %w", err)
	}
	k := SaleKeys(saleID)
	n, err := s.rebuild.Run(ctx, rdb, []string{k.Meta, k.Stock, k.Buyers, k.Tokens, k.Requests, k.Reserved, k.Released, k.Inbox, k.Fence, k.Adjusts,
		EventChannel(saleID), k.Journal, k.Retired, k.Ended}, string(body)).Int64()
	if err != nil {
		return 0, fmt.Errorf("rebuild script: %w", err)
	}
	if n < 0 {
		return 0, ErrFenceMoved
	}
	return n, nil
}

// flag is a script's boolean argument.
func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
