package sales_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/degraded"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/sales"
	"github.com/seckill/seckill/store"
	"github.com/seckill/seckill/temporalgateway"
	"github.com/seckill/seckill/test/testsale"
)

var tokenKey = []byte("sales-test-token-key")

type fixture struct {
	t       testing.TB
	ctx     context.Context
	st      *store.Store
	rdb     redis.UniversalClient
	scripts *redisgateway.Scripts
	client  *redisgateway.Client
	sale    *domain.Sale
	keys    redisgateway.Keys
}

func mustFixture(t testing.TB, stock int64) *fixture {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	f := &fixture{t: t, ctx: ctx, st: testenv.MustStore(t), rdb: testenv.MustRedis(t), scripts: redisgateway.New()}
	f.client = redisgateway.NewClient(f.rdb)
	f.sale = testenv.MustSale(t, f.st, stock)
	testsale.MustWarm(t, f.st, f.rdb, f.sale)
	f.keys = redisgateway.SaleKeys(f.sale.ID)
	return f
}

// within gives the fixture's calls d in all, not the minute a fixture
// has (tests of thousands of orders).
func (f *fixture) within(d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	f.t.Cleanup(cancel)
	f.ctx = ctx
}

func (f *fixture) epoch() int64 {
	s, err := f.st.GetSale(f.ctx, f.sale.ID)
	require.NoError(f.t, err)
	return s.ModeEpoch
}

// redisHold reserves in Redis as the API does, records it and, with
// place, places its order as the workflow does (token then ordered).
func (f *fixture) redisHold(user int64, place bool) string {
	req := fmt.Sprintf("req-%d", user)
	tok := domain.DeriveToken(tokenKey, f.sale.ID, user, req)
	res, err := f.scripts.Reserve(f.ctx, f.rdb, redisgateway.ReserveArgs{SaleID: f.sale.ID, UserID: user, RequestID: req, Token: tok, Epoch: f.epoch()})
	require.NoError(f.t, err)
	require.Equal(f.t, redisgateway.OutcomeOK, res.Outcome)
	_, err = f.st.RecordReservation(f.ctx, domain.OrderInput{Token: tok, SaleID: f.sale.ID, UserID: user, RequestID: req, Path: domain.PathRedis})
	require.NoError(f.t, err)
	if place {
		_, err = f.st.PlaceOrder(f.ctx, tok)
		require.NoError(f.t, err)
		_, err = f.scripts.Advance(f.ctx, f.rdb, f.sale.ID, tok, domain.TokenOrdered, domain.TokenHeld)
		require.NoError(f.t, err)
	}
	return tok
}

// freshBuyers lets n new users reserve once each and counts the 202s.
func (f *fixture) freshBuyers(n int) int {
	sold := 0
	for range n {
		u := testenv.UniqueUser()
		r, err := f.scripts.Reserve(f.ctx, f.rdb, redisgateway.ReserveArgs{SaleID: f.sale.ID, UserID: u, RequestID: "fresh-1",
			Token: domain.DeriveToken(tokenKey, f.sale.ID, u, "fresh-1"), Epoch: f.epoch()})
		require.NoError(f.t, err)
		if r.Outcome == redisgateway.OutcomeOK {
			sold++
		}
	}
	return sold
}

func (f *fixture) toDatabaseMode() {
	stock, err := f.rdb.Get(f.ctx, f.keys.Stock).Int64()
	require.NoError(f.t, err)
	require.NoError(f.t, f.st.RecordRedisStock(f.ctx, f.sale.ID, stock, time.Now()))
	_, err = f.st.SwitchToDatabase(f.ctx, f.sale.ID, 0)
	require.NoError(f.t, err)
}

func (f *fixture) dbOrder(user int64) string {
	req := fmt.Sprintf("db-req-%d", user)
	in := domain.OrderInput{Token: domain.DeriveToken(tokenKey, f.sale.ID, user, req), SaleID: f.sale.ID, UserID: user,
		RequestID: req, Path: domain.PathDatabase, Deducted: true}
	_, _, err := f.st.ReserveInDB(f.ctx, in)
	require.NoError(f.t, err)
	require.NoError(f.t, f.st.MarkDispatched(f.ctx, in.Token))
	return in.Token
}

// requireReleased checks a released reservation everywhere: token end
// state and buyer mark in Redis, and Redis's stock equal to the buckets'.
func (f *fixture) requireReleased(token string, user int64) {
	f.t.Helper()
	require.Equal(f.t, "released:"+fmt.Sprint(user), f.rdb.HGet(f.ctx, f.keys.Tokens, token).Val(), "token %s", token)
	require.False(f.t, f.rdb.SIsMember(f.ctx, f.keys.Buyers, user).Val(), "buyer mark of %d", user)
}

func (f *fixture) requireStockAgrees() {
	f.t.Helper()
	redisStock, err := f.rdb.Get(f.ctx, f.keys.Stock).Int64()
	require.NoError(f.t, err)
	dbStock, err := f.st.DBStock(f.ctx, f.sale.ID)
	require.NoError(f.t, err)
	require.Equal(f.t, dbStock, redisStock, "Redis's stock and the buckets")
}

// Releases and a payment whose database writes commit after the resync's
// snapshot and whose Redis steps run before the rebuild script: the
// rebuild merges them in one pass (before, every such step made it start
// over, and under traffic it never finished). One Redis-path order (Redis
// holds its token) and one database-path order (Redis has never seen it)
// are released at that moment, and a third order is paid.
func TestRebuildMergesStepsThatRanAfterItsSnapshot(t *testing.T) {
	f := mustFixture(t, 5)
	redisUser, dbUser, payUser := testenv.UniqueUser(), testenv.UniqueUser(), testenv.UniqueUser()
	redisTok := f.redisHold(redisUser, true)
	payTok := f.redisHold(payUser, true)
	f.toDatabaseMode()
	dbTok := f.dbOrder(dbUser)

	snapshots := 0
	sales.SetAfterSnapshot(func() {
		snapshots++
		if snapshots > 1 {
			return
		}
		for _, tok := range []string{redisTok, dbTok} {
			_, err := f.st.ReleaseOrder(f.ctx, tok, domain.StatusCancelled)
			require.NoError(t, err)
			_, err = sales.SyncToken(f.ctx, f.st, f.client, tok)
			require.NoError(t, err)
		}
		_, err := f.st.MarkPaid(f.ctx, payTok, "pay-during-rebuild")
		require.NoError(t, err)
		_, err = sales.SyncToken(f.ctx, f.st, f.client, payTok)
		require.NoError(t, err)
	})
	t.Cleanup(func() { sales.SetAfterSnapshot(nil) })
	done, err := sales.Resync(f.ctx, f.st, f.client, nil, f.sale.ID)
	require.NoError(t, err)
	require.True(t, done)
	require.Equal(t, 1, snapshots, "the rebuild merged the steps without starting over")

	f.requireReleased(redisTok, redisUser)
	f.requireReleased(dbTok, dbUser)
	require.Equal(t, "paid:"+fmt.Sprint(payUser), f.rdb.HGet(f.ctx, f.keys.Tokens, payTok).Val(), "the payment is kept")
	require.True(t, f.rdb.SIsMember(f.ctx, f.keys.Buyers, payUser).Val())
	f.requireStockAgrees()
	require.EqualValues(t, 4, mustInt(t, f.rdb.Get(f.ctx, f.keys.Stock)), "both released units back on sale, the paid one not")
}

// More releases after the snapshot than the journal keeps: the rebuild
// cannot know them all and starts over from a new snapshot.
func TestRebuildStartsOverWhenTheJournalLostSteps(t *testing.T) {
	f := mustFixture(t, 5)
	user := testenv.UniqueUser()
	tok := f.redisHold(user, true)
	f.toDatabaseMode()
	snapshots := 0
	sales.SetAfterSnapshot(func() {
		snapshots++
		if snapshots > 1 {
			return
		}
		_, err := f.st.ReleaseOrder(f.ctx, tok, domain.StatusCancelled)
		require.NoError(t, err)
		_, err = sales.SyncToken(f.ctx, f.st, f.client, tok)
		require.NoError(t, err)
		require.NoError(t, f.rdb.Del(f.ctx, f.keys.Journal).Err(), "the journal lost its entries")
	})
	t.Cleanup(func() { sales.SetAfterSnapshot(nil) })
	done, err := sales.Resync(f.ctx, f.st, f.client, nil, f.sale.ID)
	require.NoError(t, err)
	require.True(t, done)
	require.Equal(t, 2, snapshots, "the rebuild started over once")
	f.requireReleased(tok, user)
	f.requireStockAgrees()
}

// The Redis step of a release restores a FAILED hold's unit only when the
// database kept it: already_purchased yes, no_stock no.
func TestSyncTokenRestoresOnlyWhatTheDatabaseKept(t *testing.T) {
	f := mustFixture(t, 4)
	kept, lost := testenv.UniqueUser(), testenv.UniqueUser()
	keptTok, lostTok := f.redisHold(kept, false), f.redisHold(lost, false)
	_, err := f.st.EndQueued(f.ctx, keptTok, domain.StatusFailed, domain.FailReasonAlreadyPurchased)
	require.NoError(t, err)
	_, err = f.st.EndQueued(f.ctx, lostTok, domain.StatusFailed, domain.FailReasonNoStock)
	require.NoError(t, err)
	for range 2 { // idempotent
		for _, tok := range []string{keptTok, lostTok} {
			_, err := sales.SyncToken(f.ctx, f.st, f.client, tok)
			require.NoError(t, err)
		}
	}
	f.requireReleased(keptTok, kept)
	f.requireReleased(lostTok, lost)
	require.EqualValues(t, 3, mustInt(t, f.rdb.Get(f.ctx, f.keys.Stock)), "4 - 2 holds + 1 restored")
}

func mustInt(t testing.TB, c *redis.StringCmd) int64 {
	t.Helper()
	n, err := c.Int64()
	require.NoError(t, err)
	return n
}

// A live sale whose keys Redis lost (all but its inbox) is rebuilt by
// warm-up's safe procedure: every recorded reservation and every hold that
// survives in the inbox keeps its unit and buyer mark, so no earlier buyer
// buys twice and no held unit is resold; with its keys present warm-up
// answers already_live. Before, warm-up reloaded buckets and live orders
// only (the reserved counter was gone too): the inbox's hold was resold.
func TestWarmupRebuildsALostSaleSafely(t *testing.T) {
	f := mustFixture(t, 5)
	ordered, queued, inboxOnly := testenv.UniqueUser(), testenv.UniqueUser(), testenv.UniqueUser()
	f.redisHold(ordered, true)
	f.redisHold(queued, false)
	// A hold Redis took whose workflow has not recorded it yet.
	req := fmt.Sprintf("req-%d", inboxOnly)
	res, err := f.scripts.Reserve(f.ctx, f.rdb, redisgateway.ReserveArgs{SaleID: f.sale.ID, UserID: inboxOnly, RequestID: req,
		Token: domain.DeriveToken(tokenKey, f.sale.ID, inboxOnly, req), Epoch: f.epoch()})
	require.NoError(t, err)
	require.Equal(t, redisgateway.OutcomeOK, res.Outcome)

	outcome, _, err := sales.Warmup(f.ctx, f.st, f.client, nil, f.sale.ID)
	require.NoError(t, err)
	require.Equal(t, redisgateway.WarmupAlreadyLive, outcome, "Redis holds the live sale")

	for _, k := range f.keys.All() {
		if k != f.keys.Inbox {
			require.NoError(t, f.rdb.Del(f.ctx, k).Err())
		}
	}
	lost, err := f.client.SaleKeysLost(f.ctx, f.sale.ID)
	require.NoError(t, err)
	require.True(t, lost)
	outcome, stock, err := sales.Warmup(f.ctx, f.st, f.client, nil, f.sale.ID)
	require.NoError(t, err)
	require.Equal(t, redisgateway.WarmupOK, outcome)
	require.EqualValues(t, 2, stock, "5 units - 1 order - 2 holds")

	for _, u := range []int64{ordered, queued, inboxOnly} {
		r, err := f.scripts.Reserve(f.ctx, f.rdb, redisgateway.ReserveArgs{SaleID: f.sale.ID, UserID: u, RequestID: "again-1",
			Token: domain.DeriveToken(tokenKey, f.sale.ID, u, "again-1"), Epoch: f.epoch()})
		require.NoError(t, err)
		require.Equal(t, redisgateway.OutcomeAlready, r.Outcome, "user %d cannot buy twice", u)
	}
	// The inbox-only hold replays to its token.
	r, err := f.scripts.Reserve(f.ctx, f.rdb, redisgateway.ReserveArgs{SaleID: f.sale.ID, UserID: inboxOnly, RequestID: req,
		Token: domain.DeriveToken(tokenKey, f.sale.ID, inboxOnly, req), Epoch: f.epoch()})
	require.NoError(t, err)
	require.Equal(t, redisgateway.OutcomeReplay, r.Outcome)
	require.Equal(t, 2, f.freshBuyers(4), "fresh users buy exactly what is left")
	got, err := f.st.GetSale(f.ctx, f.sale.ID)
	require.NoError(t, err)
	require.Equal(t, domain.ModeRedis, got.Mode)
}

// A 202 whose workflow runs but has not recorded its hold (the database was
// down) is nowhere but in Temporal once Redis loses the sale's keys and its
// inbox. The rebuild counts it: its unit stays out of sale, its buyer is
// marked, its request replays to its token. Before, the rebuild counted the
// database's reservations and what survived in Redis only: the unit was
// sold again and the 202 ended FAILED no_stock (chaos soak seed 7).
func TestRebuildCountsHoldsWhoseWorkflowsRunUnrecorded(t *testing.T) {
	f := mustFixture(t, 3)
	tc := testenv.MustTemporal(t)
	user := testenv.UniqueUser()
	req := fmt.Sprintf("req-%d", user)
	tok := domain.DeriveToken(tokenKey, f.sale.ID, user, req)
	res, err := f.scripts.Reserve(f.ctx, f.rdb, redisgateway.ReserveArgs{SaleID: f.sale.ID, UserID: user, RequestID: req, Token: tok, Epoch: f.epoch()})
	require.NoError(t, err)
	require.Equal(t, redisgateway.OutcomeOK, res.Outcome)
	// No worker polls this queue: the workflow runs and records nothing.
	queue := fmt.Sprintf("sales-test-unpolled-%d", user)
	require.NoError(t, temporalgateway.Start(f.ctx, tc, queue, domain.RedisHoldInput(tok, f.sale.ID, user, req)))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = tc.TerminateWorkflow(ctx, domain.OrderWorkflowID(tok), "", "test over")
	})
	require.Eventually(t, func() bool {
		running, err := temporalgateway.Running(f.ctx, tc, f.sale.ID)
		return err == nil && running[tok]
	}, 10*time.Second, 50*time.Millisecond, "the workflow is visible as running")

	require.NoError(t, f.rdb.Del(f.ctx, f.keys.All()...).Err())
	done, err := sales.RebuildLost(f.ctx, f.st, f.client, tc, f.sale.ID)
	require.NoError(t, err)
	require.True(t, done)

	require.EqualValues(t, 2, mustInt(t, f.rdb.Get(f.ctx, f.keys.Stock)), "3 units - 1 running hold")
	state, owner, ok, err := f.client.TokenHold(f.ctx, f.sale.ID, tok)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, domain.TokenHeld, state)
	require.Equal(t, user, owner)
	r, err := f.scripts.Reserve(f.ctx, f.rdb, redisgateway.ReserveArgs{SaleID: f.sale.ID, UserID: user, RequestID: req, Token: tok, Epoch: f.epoch()})
	require.NoError(t, err)
	require.Equal(t, redisgateway.OutcomeReplay, r.Outcome, "the 202's request replays to its token")
	r, err = f.scripts.Reserve(f.ctx, f.rdb, redisgateway.ReserveArgs{SaleID: f.sale.ID, UserID: user, RequestID: "again-1",
		Token: domain.DeriveToken(tokenKey, f.sale.ID, user, "again-1"), Epoch: f.epoch()})
	require.NoError(t, err)
	require.Equal(t, redisgateway.OutcomeAlready, r.Outcome, "its user cannot buy twice")
	require.Equal(t, 2, f.freshBuyers(3), "fresh users buy exactly what the running hold left")
}

// A resume committed while a resync rebuilds the sale (after the rebuild
// read the sale as paused, before its script wrote Redis) stays in force:
// the script wrote the control it had read over the resume's Redis write,
// and the sale stayed paused for good although the resume answered 200
// (soak seed 12).
func TestResyncKeepsAControlChangeCommittedDuringIt(t *testing.T) {
	f := mustFixture(t, 3)
	_, err := sales.SetControl(f.ctx, f.st, f.client, f.sale.ID, domain.ControlPaused)
	require.NoError(t, err)
	f.toDatabaseMode()
	resumed := false
	sales.SetAfterSnapshot(func() {
		if resumed {
			return
		}
		resumed = true
		_, err := sales.SetControl(f.ctx, f.st, f.client, f.sale.ID, domain.ControlActive)
		require.NoError(t, err)
	})
	t.Cleanup(func() { sales.SetAfterSnapshot(nil) })
	done, err := sales.Resync(f.ctx, f.st, f.client, nil, f.sale.ID)
	require.NoError(t, err)
	require.True(t, done)
	require.True(t, resumed)

	require.Equal(t, string(domain.ControlActive), f.rdb.HGet(f.ctx, f.keys.Meta, "control").Val(), "Redis's control after the resync")
	user := testenv.UniqueUser()
	req := fmt.Sprintf("req-%d", user)
	res, err := f.scripts.Reserve(f.ctx, f.rdb, redisgateway.ReserveArgs{SaleID: f.sale.ID, UserID: user, RequestID: req,
		Token: domain.DeriveToken(tokenKey, f.sale.ID, user, req), Epoch: f.epoch()})
	require.NoError(t, err)
	require.Equal(t, redisgateway.OutcomeOK, res.Outcome, "the resumed sale sells")
}

// A release keeps the buyer mark of a user the database knows to hold
// another live unit of the sale (one taken on the database path, which
// Redis's user index does not list): a Redis hold that failed because the
// user already had an order must not let them buy a third time.
func TestSyncTokenKeepsTheBuyerMarkOfAUserWhoHoldsAnotherUnit(t *testing.T) {
	f := mustFixture(t, 4)
	user := testenv.UniqueUser()
	held := f.redisHold(user, false)
	// The database keeps one live reservation per user: the held one ends
	// before the other is recorded.
	_, err := f.st.EndQueued(f.ctx, held, domain.StatusFailed, domain.FailReasonAlreadyPurchased)
	require.NoError(t, err)
	other := domain.DeriveToken(tokenKey, f.sale.ID, user, "db-path-1")
	_, err = f.st.RecordReservation(f.ctx, domain.OrderInput{Token: other, SaleID: f.sale.ID, UserID: user, RequestID: "db-path-1", Path: domain.PathDatabase})
	require.NoError(t, err)
	_, err = f.st.PlaceOrder(f.ctx, other)
	require.NoError(t, err)

	_, err = sales.SyncToken(f.ctx, f.st, f.client, held)
	require.NoError(t, err)
	state, _, ok := redisgateway.TokenState(f.rdb.HGet(f.ctx, f.keys.Tokens, held).Val())
	require.True(t, ok)
	require.Equal(t, domain.TokenReleased, state)
	require.True(t, f.rdb.SIsMember(f.ctx, f.keys.Buyers, user).Val(), "the user holds the database path's unit: the mark stays")
	r, err := f.scripts.Reserve(f.ctx, f.rdb, redisgateway.ReserveArgs{SaleID: f.sale.ID, UserID: user, RequestID: "again-1",
		Token: domain.DeriveToken(tokenKey, f.sale.ID, user, "again-1"), Epoch: f.epoch()})
	require.NoError(t, err)
	require.Equal(t, redisgateway.OutcomeAlready, r.Outcome)
}

// In database mode a change whose status record Redis does not let go of
// (Redis unreachable) is acknowledged only once every API instance reads
// the sale's statuses from the database (degraded.ModeLag after the
// switch): else an instance whose sale cache still said Redis would serve
// the old record after the 200.
func TestSyncTokenInDatabaseModeWaitsOutTheModeLagWhenRedisKeepsTheRecord(t *testing.T) {
	f := mustFixture(t, 4)
	tok := f.redisHold(testenv.UniqueUser(), false)
	switched, err := f.st.SwitchToDatabase(f.ctx, f.sale.ID, 0)
	require.NoError(t, err)
	_, err = f.st.EndQueued(f.ctx, tok, domain.StatusCancelled, "cancelled")
	require.NoError(t, err)
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { _ = dead.Close() })

	_, err = sales.SyncToken(f.ctx, f.st, redisgateway.NewClient(dead), tok)
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(switched.ModeChangedAt), degraded.ModeLag,
		"acknowledged before every instance could have learnt of the database mode")
}

// A rebuild writes back the ended reservations Redis still names (a token
// state, or an inbox entry: a rebuild keeps an entry whose token Redis
// does not know as a live hold), and for the others only their users, as
// retired: their records stay out of Redis (redisgateway.Client.Retire), and a
// replay of theirs is referred to the database.
func TestRebuildWritesBackOnlyEndedTokensRedisStillNames(t *testing.T) {
	f := mustFixture(t, 5)
	gone, named := testenv.UniqueUser(), testenv.UniqueUser()
	goneTok, namedTok := f.redisHold(gone, false), f.redisHold(named, false)
	for _, tok := range []string{goneTok, namedTok} {
		_, err := f.st.EndQueued(f.ctx, tok, domain.StatusCancelled, "user")
		require.NoError(t, err)
		_, err = sales.SyncToken(f.ctx, f.st, f.client, tok)
		require.NoError(t, err)
	}
	entries, err := f.rdb.XRange(f.ctx, f.keys.Inbox, "-", "+").Result()
	require.NoError(t, err)
	require.Len(t, entries, 2)
	require.NoError(t, f.rdb.XDel(f.ctx, f.keys.Inbox, entries[0].ID).Err(), "the first hold's entry was trimmed")
	for _, k := range f.keys.All() {
		if k != f.keys.Inbox {
			require.NoError(t, f.rdb.Del(f.ctx, k).Err())
		}
	}
	done, err := sales.RebuildLost(f.ctx, f.st, f.client, testenv.MustTemporal(t), f.sale.ID)
	require.NoError(t, err)
	require.True(t, done)

	require.Equal(t, map[string]string{namedTok: fmt.Sprintf("released:%d", named)}, f.rdb.HGetAll(f.ctx, f.keys.Tokens).Val())
	require.Equal(t, []string{fmt.Sprint(gone)}, f.rdb.SMembers(f.ctx, f.keys.Retired).Val())
	require.Equal(t, []string{namedTok}, f.rdb.ZRange(f.ctx, f.keys.Ended, 0, -1).Val(), "the written-back token retires later")
	reserve := func(user int64, req string, notInDB bool) string {
		r, err := f.scripts.Reserve(f.ctx, f.rdb, redisgateway.ReserveArgs{SaleID: f.sale.ID, UserID: user, RequestID: req,
			Token: domain.DeriveToken(tokenKey, f.sale.ID, user, req), Epoch: f.epoch(), NotInDatabase: notInDB})
		require.NoError(t, err)
		return r.Outcome
	}
	require.Equal(t, redisgateway.OutcomeAsk, reserve(gone, fmt.Sprintf("req-%d", gone), false))
	require.Equal(t, redisgateway.OutcomeReplay, reserve(named, fmt.Sprintf("req-%d", named), false))
	require.Equal(t, redisgateway.OutcomeOK, reserve(gone, "again-0001", true), "the retired user buys again")
	require.EqualValues(t, 4, mustInt(t, f.rdb.Get(f.ctx, f.keys.Stock)))
}

// Waitlist joins answered 200 survive a Redis that lost the sale's keys
// (or went back in time): the rebuild puts every join the database kept
// back at its place, but not a join a hand-over served, nor one of a user
// who left or holds a unit now.
func TestRebuildPutsBackTheWaitlist(t *testing.T) {
	f := mustFixture(t, 1)
	tc := testenv.MustTemporal(t)
	holder := testenv.UniqueUser()
	f.redisHold(holder, false)
	base := testenv.UniqueUser() * 1000
	joined := map[int64]int64{}
	for i := range 4 {
		user := base + int64(i)
		_, n, err := f.client.JoinWaitlist(f.ctx, f.sale.ID, user)
		require.NoError(t, err)
		require.NoError(t, testsale.ErrOf(f.st.RecordWaitlistJoin(f.ctx, f.sale.ID, store.WaitJoin{UserID: user, Joined: n})))
		joined[user] = n
	}
	// base+1 left; base+2 was served by a hand-over whose reservation the
	// database has (it ended, so the user is free, and waits no more).
	require.NoError(t, f.client.LeaveWaitlist(f.ctx, f.sale.ID, base+1))
	require.NoError(t, f.st.ForgetWaitlistJoin(f.ctx, f.sale.ID, base+1, 0))
	served := domain.RedisHoldInput(domain.DeriveToken(tokenKey, f.sale.ID, base+2, domain.WaitlistRequestID(joined[base+2])), f.sale.ID, base+2, domain.WaitlistRequestID(joined[base+2]))
	testenv.MustLegacyHold(t, f.st, served)
	_, err := f.st.EndQueued(f.ctx, served.Token, domain.StatusCancelled, "test")
	require.NoError(t, err)

	require.NoError(t, f.rdb.Del(f.ctx, f.keys.All()...).Err())
	done, err := sales.RebuildLost(f.ctx, f.st, f.client, tc, f.sale.ID)
	require.NoError(t, err)
	require.True(t, done)

	head, err := f.client.WaitlistHead(f.ctx, f.sale.ID, 10)
	require.NoError(t, err)
	require.Equal(t, []redisgateway.Waiter{{UserID: base, Joined: joined[base]}, {UserID: base + 3, Joined: joined[base+3]}}, head)
}
