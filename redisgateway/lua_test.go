package redisgateway_test

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
)

func ctx(tb testing.TB) context.Context {
	tb.Helper()
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	tb.Cleanup(cancel)
	return c
}

// saleSeq gives each test its own sale id; ids far above the database's
// keep these Redis-only tests off real sales' keys.
var saleSeq = time.Now().UnixNano() % 1_000_000_000 * 1000

type fixture struct {
	rdb     redis.UniversalClient
	scripts *redisgateway.Scripts
	saleID  int64
	keys    redisgateway.Keys
}

func mustWarmSale(tb testing.TB, stock int64, edit ...func(*redisgateway.WarmupArgs)) *fixture {
	tb.Helper()
	saleSeq++
	f := &fixture{rdb: testenv.MustRedis(tb), scripts: redisgateway.New(), saleID: saleSeq, keys: redisgateway.SaleKeys(saleSeq)}
	now := time.Now()
	args := redisgateway.WarmupArgs{
		SaleID:   f.saleID,
		StartsMS: now.Add(-time.Minute).UnixMilli(),
		EndsMS:   now.Add(time.Hour).UnixMilli(),
		Control:  string(domain.ControlActive),
		Epoch:    1,
		Mode:     string(domain.ModeRedis),
		Stock:    stock,
	}
	for _, e := range edit {
		e(&args)
	}
	outcome, got, err := f.scripts.Warmup(ctx(tb), f.rdb, args)
	require.NoError(tb, err)
	require.Equal(tb, redisgateway.WarmupOK, outcome)
	require.Equal(tb, stock, got)
	tb.Cleanup(func() { f.rdb.Del(context.Background(), f.keys.All()...) })
	return f
}

func (f *fixture) reserve(tb testing.TB, user int64, req string) redisgateway.ReserveResult {
	tb.Helper()
	r, err := f.scripts.Reserve(ctx(tb), f.rdb, redisgateway.ReserveArgs{
		SaleID: f.saleID, UserID: user, RequestID: req,
		Token: domain.DeriveToken([]byte("k"), f.saleID, user, req), Epoch: 1,
	})
	require.NoError(tb, err)
	return r
}

// The first two defences: the check and the decrement are one script, and
// Redis runs scripts without interleaving, so concurrent callers can never
// take more than the stock.
func TestReserveLetsExactlyTheStockThrough(t *testing.T) {
	const stock, users = 50, 400
	f := mustWarmSale(t, stock)
	var wg sync.WaitGroup
	results := make([]redisgateway.ReserveResult, users*2)
	for i := 0; i < users*2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user := int64(i%users + 1) // every user twice, with different request ids
			results[i] = f.reserve(t, user, fmt.Sprintf("request-%06d", i))
		}()
	}
	wg.Wait()
	ok := map[int64]string{}
	counts := map[string]int{}
	for i, r := range results {
		counts[r.Outcome]++
		if r.Outcome == redisgateway.OutcomeOK {
			user := int64(i%users + 1)
			require.NotContains(t, ok, user, "user %d got two units", user)
			ok[user] = r.Token
		}
	}
	require.Equal(t, stock, counts[redisgateway.OutcomeOK])
	require.Equal(t, users*2-stock, counts[redisgateway.OutcomeSoldOut]+counts[redisgateway.OutcomeAlready])
	left, err := f.rdb.Get(ctx(t), f.keys.Stock).Int64()
	require.NoError(t, err)
	require.Zero(t, left)
	require.EqualValues(t, stock, f.rdb.SCard(ctx(t), f.keys.Buyers).Val())
	require.EqualValues(t, stock, f.rdb.XLen(ctx(t), f.keys.Inbox).Val())
	require.EqualValues(t, stock, f.rdb.HLen(ctx(t), f.keys.Tokens).Val())
}

func TestReservePrecedence(t *testing.T) {
	f := mustWarmSale(t, 1)
	first := f.reserve(t, 7, "request-a1")
	require.Equal(t, redisgateway.OutcomeOK, first.Outcome)
	require.EqualValues(t, 0, first.StockLeft)

	// A holder with a new request id: 409, not 410.
	require.Equal(t, redisgateway.OutcomeAlready, f.reserve(t, 7, "request-a2").Outcome)
	// Another user: sold out.
	require.Equal(t, redisgateway.OutcomeSoldOut, f.reserve(t, 8, "request-b1").Outcome)
	// A replay after sell-out gets its token.
	replay := f.reserve(t, 7, "request-a1")
	require.Equal(t, redisgateway.OutcomeReplay, replay.Outcome)
	require.Equal(t, first.Token, replay.Token)
	// Replays survive a pause too, while new requests do not.
	require.NoError(t, f.rdb.HSet(ctx(t), f.keys.Meta, "control", "paused").Err())
	require.Equal(t, redisgateway.OutcomeReplay, f.reserve(t, 7, "request-a1").Outcome)
	require.Equal(t, redisgateway.OutcomePaused, f.reserve(t, 9, "request-c1").Outcome)
	require.NoError(t, f.rdb.HSet(ctx(t), f.keys.Meta, "control", "stopped").Err())
	require.Equal(t, redisgateway.OutcomeEnded, f.reserve(t, 9, "request-c1").Outcome)
	require.EqualValues(t, 1, f.rdb.XLen(ctx(t), f.keys.Inbox).Val(), "only the one reservation reached the inbox")
}

func TestReserveWindowOnRedisClock(t *testing.T) {
	early := mustWarmSale(t, 5, func(a *redisgateway.WarmupArgs) { a.StartsMS = time.Now().Add(time.Hour).UnixMilli() })
	require.Equal(t, redisgateway.OutcomeNotStarted, early.reserve(t, 1, "request-01").Outcome)
	late := mustWarmSale(t, 5, func(a *redisgateway.WarmupArgs) {
		a.StartsMS = time.Now().Add(-2 * time.Hour).UnixMilli()
		a.EndsMS = time.Now().Add(-time.Hour).UnixMilli()
	})
	require.Equal(t, redisgateway.OutcomeEnded, late.reserve(t, 1, "request-01").Outcome)
	for _, f := range []*fixture{early, late} {
		left, err := f.rdb.Get(ctx(t), f.keys.Stock).Int64()
		require.NoError(t, err)
		require.EqualValues(t, 5, left)
	}
}

func TestReserveNotReady(t *testing.T) {
	f := mustWarmSale(t, 5)
	// A missing stock key is "not warmed", never "sold out".
	require.NoError(t, f.rdb.Del(ctx(t), f.keys.Stock).Err())
	require.Equal(t, redisgateway.OutcomeNotReady, f.reserve(t, 1, "request-01").Outcome)

	g := mustWarmSale(t, 5)
	// An epoch other than Redis's, or the database mode: Redis's copy is stale.
	r, err := g.scripts.Reserve(ctx(t), g.rdb, redisgateway.ReserveArgs{SaleID: g.saleID, UserID: 1, RequestID: "request-01", Token: "t", Epoch: 2})
	require.NoError(t, err)
	require.Equal(t, redisgateway.OutcomeNotReady, r.Outcome)
	require.NoError(t, g.rdb.HSet(ctx(t), g.keys.Meta, "mode", "database").Err())
	require.Equal(t, redisgateway.OutcomeNotReady, g.reserve(t, 1, "request-01").Outcome)
	require.EqualValues(t, 0, g.rdb.XLen(ctx(t), g.keys.Inbox).Val())
}

func TestReleaseIsIdempotentAndRestoresOnlyWhenAsked(t *testing.T) {
	f := mustWarmSale(t, 2)
	a := f.reserve(t, 1, "request-01")
	b := f.reserve(t, 2, "request-02")
	require.Equal(t, redisgateway.OutcomeOK, a.Outcome)
	require.Equal(t, redisgateway.OutcomeOK, b.Outcome)

	moved, err := f.scripts.Advance(ctx(t), f.rdb, f.saleID, a.Token, domain.TokenOrdered, domain.TokenHeld)
	require.NoError(t, err)
	require.True(t, moved)
	released, err := f.scripts.Release(ctx(t), f.rdb, f.saleID, 1, a.Token, true, false)
	require.NoError(t, err)
	require.True(t, released)
	again, err := f.scripts.Release(ctx(t), f.rdb, f.saleID, 1, a.Token, true, false)
	require.NoError(t, err)
	require.False(t, again, "a second release does nothing")
	left, _ := f.rdb.Get(ctx(t), f.keys.Stock).Int64()
	require.EqualValues(t, 1, left)

	// A hold whose order never took a unit: released without stock.
	released, err = f.scripts.Release(ctx(t), f.rdb, f.saleID, 2, b.Token, false, false)
	require.NoError(t, err)
	require.True(t, released)
	left, _ = f.rdb.Get(ctx(t), f.keys.Stock).Int64()
	require.EqualValues(t, 1, left)
	require.EqualValues(t, 0, f.rdb.SCard(ctx(t), f.keys.Buyers).Val())
	require.EqualValues(t, "2", f.rdb.Get(ctx(t), f.keys.Released).Val())

	// A released token cannot move forward again.
	moved, err = f.scripts.Advance(ctx(t), f.rdb, f.saleID, a.Token, domain.TokenPaid, domain.TokenOrdered)
	require.NoError(t, err)
	require.False(t, moved)
	state, user, ok := redisgateway.TokenState(f.rdb.HGet(ctx(t), f.keys.Tokens, a.Token).Val())
	require.True(t, ok)
	require.Equal(t, domain.TokenReleased, state)
	require.EqualValues(t, 1, user)

	// The user may buy again with a new request id.
	require.Equal(t, redisgateway.OutcomeOK, f.reserve(t, 1, "request-03").Outcome)
}

func TestWarmupRefusedOnceLive(t *testing.T) {
	f := mustWarmSale(t, 3)
	again := redisgateway.WarmupArgs{SaleID: f.saleID, StartsMS: 0, EndsMS: time.Now().Add(time.Hour).UnixMilli(), Control: "active", Epoch: 1, Mode: "redis", Stock: 3}
	outcome, _, err := f.scripts.Warmup(ctx(t), f.rdb, again)
	require.NoError(t, err)
	require.Equal(t, redisgateway.WarmupOK, outcome, "repeatable before the first reservation")
	require.Equal(t, redisgateway.OutcomeOK, f.reserve(t, 1, "request-01").Outcome)
	again.Stock = 100
	outcome, stock, err := f.scripts.Warmup(ctx(t), f.rdb, again)
	require.NoError(t, err)
	require.Equal(t, redisgateway.WarmupAlreadyLive, outcome)
	require.EqualValues(t, 2, stock, "what Redis holds is not reset")
	groups, err := f.rdb.XInfoGroups(ctx(t), f.keys.Inbox).Result()
	require.NoError(t, err)
	require.Len(t, groups, 1)
	require.Equal(t, redisgateway.InboxGroup, groups[0].Name)
}

// A warm-up repeated on a sale Redis holds as it would write it changes
// nothing and is not noted in the change feed (a sale workflow's warm-up of
// a sale the operator warmed would have every live sale signalled and
// reconciled); one that changes the sale is noted.
func TestWarmupRepeatedUnchangedIsNotNoted(t *testing.T) {
	f := mustWarmSale(t, 3)
	c := redisgateway.NewClient(f.rdb)
	args := redisgateway.WarmupArgs{SaleID: f.saleID, StartsMS: 1000, EndsMS: time.Now().Add(time.Hour).UnixMilli(),
		Control: "active", Epoch: 1, Mode: "redis", Stock: 3, Buyers: []int64{7, 9}}
	noted := func() bool {
		_, ok, err := c.LastChange(ctx(t), f.saleID)
		require.NoError(t, err)
		return ok
	}
	forget := func() {
		time.Sleep(300 * time.Millisecond) // past the note's throttle
		require.NoError(t, f.rdb.ZRem(ctx(t), redisgateway.ChangesKey, f.saleID).Err())
	}
	_, _, err := c.Warmup(ctx(t), args)
	require.NoError(t, err)
	require.Eventually(t, noted, 5*time.Second, 20*time.Millisecond, "the first warm-up changed the sale")
	forget()
	outcome, stock, err := c.Warmup(ctx(t), args)
	require.NoError(t, err)
	require.Equal(t, redisgateway.WarmupOK, outcome)
	require.EqualValues(t, 3, stock)
	time.Sleep(500 * time.Millisecond)
	require.False(t, noted(), "the same warm-up again is not noted")
	for _, edit := range []func(*redisgateway.WarmupArgs){
		func(a *redisgateway.WarmupArgs) { a.Stock = 4 },
		func(a *redisgateway.WarmupArgs) { a.Epoch = 2 },
		func(a *redisgateway.WarmupArgs) { a.Buyers = []int64{7} },
		func(a *redisgateway.WarmupArgs) { a.Buyers = []int64{7, 8} },
	} {
		forget()
		edit(&args)
		_, _, err := c.Warmup(ctx(t), args)
		require.NoError(t, err)
		require.Eventually(t, noted, 5*time.Second, 20*time.Millisecond, "a changed warm-up is noted: %+v", args)
	}
	forget()
	require.NoError(t, f.rdb.Del(ctx(t), f.keys.Inbox).Err())
	_, _, err = c.Warmup(ctx(t), args)
	require.NoError(t, err)
	require.Eventually(t, noted, 5*time.Second, 20*time.Millisecond, "the inbox group made again is noted")
	groups, err := f.rdb.XInfoGroups(ctx(t), f.keys.Inbox).Result()
	require.NoError(t, err)
	require.Len(t, groups, 1)
}

func TestAdjust(t *testing.T) {
	f := mustWarmSale(t, 3)
	outcome, stock, err := f.scripts.Adjust(ctx(t), f.rdb, f.saleID, -4, "")
	require.NoError(t, err)
	require.Equal(t, redisgateway.AdjustInsufficient, outcome)
	require.EqualValues(t, 3, stock)
	outcome, stock, err = f.scripts.Adjust(ctx(t), f.rdb, f.saleID, 5, "")
	require.NoError(t, err)
	require.Equal(t, redisgateway.AdjustOK, outcome)
	require.EqualValues(t, 8, stock)
	require.Equal(t, "1", f.rdb.Get(ctx(t), f.keys.Released).Val(), "adding stock clears sold-out marks")
}

func TestKeysShareOneSlot(t *testing.T) {
	k := redisgateway.SaleKeys(42)
	for _, key := range k.All() {
		require.Contains(t, key, "{sale:42}")
	}
}

// Each key is its sale's hash tag and its name, whatever the id's length,
// and all of them cost one allocation (a reservation builds them).
func TestSaleKeysAreNamedByTheirSaleAndCheap(t *testing.T) {
	names := []string{"meta", "stock", "buyers", "tokens", "requests", "inbox", "dead", "released", "reserved",
		"started", "fence", "journal", "adjusts", "status", "mine", "pool", "waitlist", "waitseq", "ended", "retired"}
	for _, id := range []int64{0, 7, 42, -3, 8_000_000_000_123, math.MaxInt64} {
		got := redisgateway.SaleKeys(id).All()
		require.Len(t, got, len(names))
		for i, name := range names {
			require.Equal(t, "{sale:"+strconv.FormatInt(id, 10)+"}:"+name, got[i])
		}
	}
	var k redisgateway.Keys
	allocs := testing.AllocsPerRun(100, func() { k = redisgateway.SaleKeys(8_000_000_000_123) })
	require.LessOrEqual(t, allocs, 1.0, "allocations per SaleKeys")
	require.Equal(t, "{sale:8000000000123}:retired", k.Retired)
}

// A script that runs after its caller's deadline (a frozen Redis resuming
// with the call still queued) takes nothing: no unit, no buyer mark, no
// replay key, no inbox entry. A prompt one with the same arguments does.
func TestReserveAfterItsDeadlineTakesNothing(t *testing.T) {
	f := mustWarmSale(t, 3)
	args := redisgateway.ReserveArgs{SaleID: f.saleID, UserID: 77, RequestID: "late-0001", Token: "tok-late", Epoch: 1,
		Deadline: time.Now().Add(-time.Millisecond)}
	res, err := f.scripts.Reserve(ctx(t), f.rdb, args)
	require.NoError(t, err)
	require.Equal(t, redisgateway.OutcomeLate, res.Outcome)
	stock, err := f.rdb.Get(ctx(t), f.keys.Stock).Int64()
	require.NoError(t, err)
	require.EqualValues(t, 3, stock)
	require.False(t, f.rdb.SIsMember(ctx(t), f.keys.Buyers, 77).Val())
	require.Zero(t, f.rdb.HLen(ctx(t), f.keys.Requests).Val())
	require.Zero(t, f.rdb.XLen(ctx(t), f.keys.Inbox).Val())

	args.Deadline = time.Now().Add(5 * time.Second)
	res, err = f.scripts.Reserve(ctx(t), f.rdb, args)
	require.NoError(t, err)
	require.Equal(t, redisgateway.OutcomeOK, res.Outcome)
	require.EqualValues(t, 2, res.StockLeft)
}

// A live order whose token and buyer mark a fault lost is restored, so its
// user cannot buy twice; a release that ran since the caller read the fence
// (here on the missing token) makes the restore refuse instead of undoing it.
func TestRestoreLiveOrder(t *testing.T) {
	f := mustWarmSale(t, 3)
	a := f.reserve(t, 1, "request-01")
	require.Equal(t, redisgateway.OutcomeOK, a.Outcome)
	require.NoError(t, f.rdb.HDel(ctx(t), f.keys.Tokens, a.Token).Err())
	require.NoError(t, f.rdb.SRem(ctx(t), f.keys.Buyers, 1).Err())
	require.Equal(t, redisgateway.OutcomeOK, f.reserve(t, 1, "request-02").Outcome, "without its mark the user could buy twice")
	require.NoError(t, f.rdb.SRem(ctx(t), f.keys.Buyers, 1).Err())

	fence, err := f.scripts.ReadFence(ctx(t), f.rdb, f.saleID)
	require.NoError(t, err)
	_, err = f.scripts.Release(ctx(t), f.rdb, f.saleID, 1, a.Token, true, false) // finds nothing, moves the fence
	require.NoError(t, err)
	_, err = f.scripts.RestoreLive(ctx(t), f.rdb, f.saleID, 1, a.Token, domain.TokenOrdered, fence)
	require.ErrorIs(t, err, redisgateway.ErrFenceMoved)
	require.False(t, f.rdb.HExists(ctx(t), f.keys.Tokens, a.Token).Val(), "a refused restore writes nothing")
	require.False(t, f.rdb.SIsMember(ctx(t), f.keys.Buyers, 1).Val())

	fence, err = f.scripts.ReadFence(ctx(t), f.rdb, f.saleID)
	require.NoError(t, err)
	restored, err := f.scripts.RestoreLive(ctx(t), f.rdb, f.saleID, 1, a.Token, domain.TokenPaid, fence)
	require.NoError(t, err)
	require.True(t, restored)
	state, user, ok := redisgateway.TokenState(f.rdb.HGet(ctx(t), f.keys.Tokens, a.Token).Val())
	require.True(t, ok)
	require.Equal(t, domain.TokenPaid, state)
	require.EqualValues(t, 1, user)
	require.Equal(t, redisgateway.OutcomeAlready, f.reserve(t, 1, "request-03").Outcome)

	fence, err = f.scripts.ReadFence(ctx(t), f.rdb, f.saleID)
	require.NoError(t, err)
	again, err := f.scripts.RestoreLive(ctx(t), f.rdb, f.saleID, 1, a.Token, domain.TokenPaid, fence)
	require.NoError(t, err)
	require.False(t, again, "nothing left to restore")

	// A released token is never brought back.
	require.NoError(t, f.rdb.HSet(ctx(t), f.keys.Tokens, a.Token, domain.TokenOrdered+":1").Err())
	released, err := f.scripts.Release(ctx(t), f.rdb, f.saleID, 1, a.Token, false, false)
	require.NoError(t, err)
	require.True(t, released)
	fence, err = f.scripts.ReadFence(ctx(t), f.rdb, f.saleID)
	require.NoError(t, err)
	restored, err = f.scripts.RestoreLive(ctx(t), f.rdb, f.saleID, 1, a.Token, domain.TokenOrdered, fence)
	require.NoError(t, err)
	require.False(t, restored)
	// The user's request-02 hold is still live: the mark stays for it.
	require.True(t, f.rdb.SIsMember(ctx(t), f.keys.Buyers, 1).Val())
}

// The stock repair counts a unit out of sale where Redis holds its token,
// or where the snapshot has it live and Redis does not know it; released
// tokens are on sale. It refuses outside Redis mode and when Redis applied
// a stock addition the snapshot's total lacks.
func TestRepairStock(t *testing.T) {
	f := mustWarmSale(t, 10)
	held := f.reserve(t, 1, "req-00000001")
	f.reserve(t, 2, "req-00000002")
	released, err := f.scripts.Release(ctx(t), f.rdb, f.saleID, 1, held.Token, true, false)
	require.NoError(t, err)
	require.True(t, released)
	f.reserve(t, 3, "req-00000003")
	require.NoError(t, f.rdb.Set(ctx(t), f.keys.Stock, 99, 0).Err()) // the drift

	// 10 units: users 2 and 3 hold, one live order Redis lost, one live
	// order Redis knows (user 2's token, placed since).
	tok2, _ := f.rdb.HGet(ctx(t), f.keys.Requests, "2:req-00000002").Result()
	rep, err := f.scripts.RepairStock(ctx(t), f.rdb, f.saleID, 10, nil, []string{"tok-lost", tok2})
	require.NoError(t, err)
	require.Equal(t, redisgateway.StockRepair{Outcome: redisgateway.RepairSet, From: 99, To: 7}, rep)
	rep, err = f.scripts.RepairStock(ctx(t), f.rdb, f.saleID, 10, nil, []string{"tok-lost", tok2})
	require.NoError(t, err)
	require.Equal(t, redisgateway.RepairRight, rep.Outcome)

	_, _, err = f.scripts.Adjust(ctx(t), f.rdb, f.saleID, 2, "add-1")
	require.NoError(t, err)
	rep, err = f.scripts.RepairStock(ctx(t), f.rdb, f.saleID, 10, nil, nil)
	require.NoError(t, err)
	require.Equal(t, redisgateway.RepairRefused, rep.Outcome, "an addition the snapshot lacks")
	rep, err = f.scripts.RepairStock(ctx(t), f.rdb, f.saleID, 12, []string{"add-1"}, []string{"tok-lost"})
	require.NoError(t, err)
	require.Equal(t, redisgateway.StockRepair{Outcome: redisgateway.RepairRight, From: 9, To: 9}, rep)

	require.NoError(t, f.rdb.HSet(ctx(t), f.keys.Meta, "mode", string(domain.ModeDatabase)).Err())
	rep, err = f.scripts.RepairStock(ctx(t), f.rdb, f.saleID, 100, []string{"add-1"}, nil)
	require.NoError(t, err)
	require.Equal(t, redisgateway.RepairRefused, rep.Outcome, "database mode")
	stock, err := f.rdb.Get(ctx(t), f.keys.Stock).Int64()
	require.NoError(t, err)
	require.EqualValues(t, 9, stock, "refusals change nothing")
}

// A user who holds another live token (restored by reconciliation, say)
// keeps the buyer mark when one of their tokens is released.
func TestReleaseKeepsTheBuyerMarkWhileTheUserHoldsAnotherToken(t *testing.T) {
	f := mustWarmSale(t, 3)
	a := f.reserve(t, 1, "request-01")
	require.Equal(t, redisgateway.OutcomeOK, a.Outcome)
	// A second live token of the same user, as a restore after a fault
	// would leave it: ordered, and in the user's index.
	const other = "other-token-of-user-1"
	require.NoError(t, f.rdb.HSet(ctx(t), f.keys.Tokens, other, "ordered:1").Err())
	require.NoError(t, f.rdb.HSet(ctx(t), f.keys.Mine, "1", a.Token+","+other).Err())

	released, err := f.scripts.Release(ctx(t), f.rdb, f.saleID, 1, a.Token, true, false)
	require.NoError(t, err)
	require.True(t, released)
	require.True(t, f.rdb.SIsMember(ctx(t), f.keys.Buyers, "1").Val(), "the user still holds a unit: the mark stays")
	require.Equal(t, redisgateway.OutcomeAlready, f.reserve(t, 1, "request-02").Outcome, "a user holding a unit cannot buy another")

	// Once the other token ends too, the mark goes and the user may buy.
	released, err = f.scripts.Release(ctx(t), f.rdb, f.saleID, 1, other, true, false)
	require.NoError(t, err)
	require.True(t, released)
	require.False(t, f.rdb.SIsMember(ctx(t), f.keys.Buyers, "1").Val())
	require.Equal(t, redisgateway.OutcomeOK, f.reserve(t, 1, "request-03").Outcome)
}

// A release of a token Redis lost (a write-losing fault) still takes the
// user's buyer mark, which a later hold of the user set again, unless the
// user holds another live unit: else the user is locked out for good.
func TestReleaseOfALostTokenTakesAStrandedMark(t *testing.T) {
	f := mustWarmSale(t, 3)
	require.NoError(t, f.rdb.SAdd(ctx(t), f.keys.Buyers, "5").Err())
	released, err := f.scripts.Release(ctx(t), f.rdb, f.saleID, 5, "token-redis-lost", true, true)
	require.NoError(t, err)
	require.False(t, released, "nothing to release")
	require.True(t, f.rdb.SIsMember(ctx(t), f.keys.Buyers, "5").Val(), "the database knows another live unit of the user")
	left, _ := f.rdb.Get(ctx(t), f.keys.Stock).Int64()
	require.EqualValues(t, 3, left, "no unit comes back for a token Redis did not hold")

	released, err = f.scripts.Release(ctx(t), f.rdb, f.saleID, 5, "token-redis-lost", true, false)
	require.NoError(t, err)
	require.False(t, released)
	require.False(t, f.rdb.SIsMember(ctx(t), f.keys.Buyers, "5").Val(), "the stranded mark goes")
	require.Equal(t, redisgateway.OutcomeOK, f.reserve(t, 5, "request-05").Outcome, "the user may buy again")
}
