package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/redisnode"
	"github.com/seckill/seckill/test/grants"
)

// TestRedisSentinelFailoverWithLostWrites: every 202 survives a Redis
// Sentinel failover that loses writes. 16 clients buy; the replica's link
// is cut while they buy, so the holds of that while reach the master alone
// (each 202 recorded in MySQL), and the master is killed: the sentinels
// promote the replica, which never saw those holds. The users whose holds
// Redis lost ask again with a new request_id and are refused (409
// already_purchased, never a second 202); two in three re-send their first
// request_id and get their token back. The old master rejoins as a
// replica. Afterwards every 202 has reached PENDING_PAYMENT, no user holds
// two units or got two tokens, nothing is oversold, the units sell
// exactly, the sale is back on Redis and reconciliation is clean.
//
// Clients buying through the failover meet it: the API's breaker moves
// the sale to the database path, or the worker finds the promoted replica
// behind the database first; either way the sale comes back rebuilt from
// the database. A failover that no call noticed, with the worker frozen,
// leaves the sale on Redis, where the returning holders meet the promoted
// replica: the database decides their holds, and the first hold numbered
// as one it recorded marks the sale, which the worker rebuilds once it
// runs again.
func TestRedisSentinelFailoverWithLostWrites(t *testing.T) {
	t.Run("clients_through_failover", func(t *testing.T) {
		sentinelFailover(t, "13e sentinel failover, replica lagged (writes lost)", false)
	})
	t.Run("failover_unnoticed", func(t *testing.T) {
		sentinelFailover(t, "13f sentinel failover unnoticed by the API (writes lost)", true)
	})
}

// sentinelFailover runs one failover; quiet: no request is in flight from
// the master's kill until its replica's promotion, and the worker is
// frozen until the returning holders have asked.
func sentinelFailover(t *testing.T, scenario string, quiet bool) {
	const stock = 200
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	g, err := redisnode.StartSentinelGroup(ctx, redisnode.SentinelOptions{Dir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(g.Stop)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(g.Logs())
		}
	})
	s := MustStack(t, stackOpts{sentinels: g, apiEnv: map[string]string{
		"SECKILL_REDIS_TIMEOUT": "250ms", "SECKILL_FALLBACK_RPS": "200", "SECKILL_PER_ADDR_RPS": "100000", "SECKILL_PER_ADDR_BURST": "100000",
	}})
	s.openWindows = true
	s.MustSale(stock, 600)
	waitStockSeen(t, s)

	f := newFailover(t, s, g)
	t.Cleanup(func() { f.stopCrowd() })
	f.startCrowd()
	f.failOver(ctx, quiet)
	if quiet {
		f.returnHolders(true)
		s.worker.Thaw(t)
		f.startCrowd()
	} else {
		f.returnHolders(false)
	}
	require.True(t, f.grants.WaitGiven(t, phasePromoted, 16, 60*time.Second), "the crowd buys again after the promotion")
	if quiet {
		f.waitWentBackRebuild()
	}
	f.stopCrowd()
	f.rejoinOldMaster(ctx)
	f.judge(scenario, stock)
}

// The phases of the failover, in order.
const (
	phaseReplicated = iota // the replica follows the master
	phaseCut               // the replica's link is cut: holds reach the master alone
	phaseKilled            // the master is killed, no replica promoted yet
	phasePromoted          // the sentinels promoted the replica
	phases
)

var phaseNames = [phases]string{"before the cut", "during the cut", "after the kill", "after the promotion"}

// cutPhases are the phases whose 202s' users return after the promotion:
// the cut's and the kill's.
var cutPhases = []int{phaseCut, phaseKilled}

// failover drives the fault and keeps what the clients were given.
type failover struct {
	t       *testing.T
	s       *stack
	g       *redisnode.SentinelGroup
	master  string        // the node started as the master, killed
	replica *redis.Client // the node started as the replica, promoted

	// grants are the 202s the clients were given, by phase, and the users
	// whose holds the master had and the replica had not; the promotion's
	// phase begins when every sentinel named the promoted replica.
	grants *grants.Ledger

	mu       sync.Mutex
	returned struct{ refused, replayed int } // answers to the returning holders
	epoch    int64                           // the sale's mode epoch before the failover
	// stopCrowd stops the running crowd and waits for its clients.
	stopCrowd func()
}

// startCrowd starts 16 clients buying, each for fresh users, until
// stopCrowd. They are paced, so that the stock outlasts the failover
// whichever path sells.
func (f *failover) startCrowd() {
	crowd := &outageClients{s: f.s, tokens: map[int64]string{}, start: time.Now(), pause: 300 * time.Millisecond, on202: f.accepted}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		crowd.run(stop, math.MaxInt)
	}()
	f.stopCrowd = sync.OnceFunc(func() {
		close(stop)
		<-done
	})
}

func newFailover(t *testing.T, s *stack, g *redisnode.SentinelGroup) *failover {
	master, replica := g.Nodes()
	rc := redis.NewClient(&redis.Options{Addr: replica, ReadTimeout: 3 * time.Second, WriteTimeout: 3 * time.Second, MaxRetries: -1})
	t.Cleanup(func() { _ = rc.Close() })
	f := &failover{t: t, s: s, g: g, master: master, replica: rc, grants: grants.New(phaseNames[:]...), stopCrowd: func() {}}
	f.epoch = f.sale().ModeEpoch
	return f
}

// accepted hears of each of the crowd's 202s, which answer the request
// "outage-<user>".
func (f *failover) accepted(user int64, token string) {
	f.grants.Accepted(user, fmt.Sprintf("outage-%d", user), token)
}

// failOver: holds replicate, then the replica's link is cut while the
// crowd buys, the master is killed and the sentinels promote the replica.
// The holds the replica missed are lost.
func (f *failover) failOver(ctx context.Context, quiet bool) {
	t := f.t
	require.True(t, f.grants.WaitGiven(t, phaseReplicated, 20, 90*time.Second), "202s before the cut")
	grants.WaitMarked(t, f.replica, f.s.saleID, f.grants.Users())
	require.NoError(t, f.g.CutReplication(ctx))
	f.grants.SetPhase(phaseCut)
	// Kept short: a replica whose link has been down for about ten
	// down-after periods is not promoted.
	f.grants.WaitGiven(t, phaseCut, 20, 5*time.Second)
	if quiet {
		// Nothing meets the promoted replica before the API does: no call
		// is in flight to notice the failover, and the worker, which would
		// find the replica behind at its next look, is frozen.
		f.stopCrowd()
		f.s.worker.Freeze(t)
	}
	// The replica's copy has not moved since the cut; the master's holds
	// that it lacks are lost with the master.
	onReplica, err := grants.ReadMarks(ctx, f.replica, f.s.saleID)
	require.NoError(t, err)
	onMaster, err := grants.ReadMarks(ctx, f.s.rdb, f.s.saleID)
	require.NoError(t, err)
	require.NoError(t, f.g.Kill(f.master))
	f.grants.SetPhase(phaseKilled)
	killed := time.Now()
	pctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	promoted, err := f.g.WaitForPromotion(pctx, f.master)
	require.NoError(t, err)
	f.grants.SetPhase(phasePromoted)
	_, replicaAddr := f.g.Nodes()
	require.Equal(t, replicaAddr, promoted, "the sentinels promote the replica")
	lost, err := onMaster.Lost(onReplica)
	require.NoError(t, err)
	f.grants.Lose(lost)
	t.Logf("failover: %d 202s before the cut, %d during it, %d after the kill; promoted %s after the kill; "+
		"the master had counted %d holds, the replica %d; %d users' holds lost (%d given a 202 during the cut or after the kill)",
		f.grants.Given(phaseReplicated), f.grants.Given(phaseCut), f.grants.Given(phaseKilled),
		f.grants.Began(phasePromoted).Sub(killed).Round(time.Millisecond), onMaster.Reserved, onReplica.Reserved,
		len(lost), len(f.grants.UsersIn(cutPhases...)))
	require.NotEmpty(t, lost, "the promoted replica lost holds that were answered 202")
}

// returnHolders: right after the promotion, each returning holder asks
// once more with a new request_id, which must be refused (409
// already_purchased, never a second 202); two in three also re-send their
// first request_id, after the new one or before it, which must answer 202
// with their first token.
//
// quiet: no call noticed the failover, so the sale must still be on Redis
// at its first epoch, and the holders meet the promoted replica.
func (f *failover) returnHolders(quiet bool) {
	t := f.t
	before := f.sale()
	if quiet {
		require.True(t, before.Mode == domain.ModeRedis && before.ModeEpoch == f.epoch,
			"unnoticed, the failover leaves the sale on Redis at epoch %d: %s mode, epoch %d", f.epoch, before.Mode, before.ModeEpoch)
	}
	// The users whose holds the promoted replica lost, with those given a
	// 202 while the link was cut, whose first 202 is known.
	users := f.grants.Returning(cutPhases...)
	after := f.grants.Since(phasePromoted)
	stop := make(chan struct{})
	timer := time.AfterFunc(90*time.Second, func() { close(stop) })
	defer timer.Stop()
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i, u := range users {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			switch i % 3 {
			case 0:
				f.askAgain(u, stop)
				f.replayFirst(u, stop)
			case 1:
				f.replayFirst(u, stop)
				f.askAgain(u, stop)
			default:
				f.askAgain(u, stop)
			}
		})
	}
	wg.Wait()
	t.Logf("%d returning holders asked from %s after the promotion on (the sale in %s mode at epoch %d; after: %s): "+
		"%d refused 409 already_purchased, %d first requests answered their token", len(users), after.Round(time.Millisecond),
		before.Mode, before.ModeEpoch, describe(f.sale()), f.returned.refused, f.returned.replayed)
	require.NotEmpty(t, users, "users whose holds Redis lost")
	if quiet {
		// The worker is frozen: only a hold's record can have found the
		// promoted replica behind the database.
		require.True(t, f.sale().RedisWentBack, "a returning holder's hold finds Redis behind the database")
	}
	assert.Equal(t, len(users), f.returned.refused, "every returning holder is refused")
	assert.Equal(t, len(users)-len(users)/3, f.returned.replayed, "every first request re-sent answers its token")
}

// askAgain: a returning holder asks with a new request_id.
func (f *failover) askAgain(user int64, stop <-chan struct{}) {
	code, body, ok := f.s.reserveAnswered(user, fmt.Sprintf("return-%d", user), stop)
	switch {
	case !ok:
		f.t.Errorf("user %d: a new request was not answered within 90 s", user)
		return
	case code == http.StatusAccepted:
		tok, _ := body["token"].(string)
		f.grants.Note(user, fmt.Sprintf("return-%d", user), tok)
		f.t.Errorf("user %d, whose hold %s Redis lost, got a second 202 with a new request_id: token %s", user, f.firstOf(user), tok)
		return
	}
	if e, _ := body["error"].(map[string]any); code != http.StatusConflict || e["code"] != "already_purchased" {
		f.t.Errorf("user %d: a new request answered %d %v, not 409 already_purchased", user, code, body)
		return
	}
	f.mu.Lock()
	f.returned.refused++
	f.mu.Unlock()
}

// replayFirst: a returning holder re-sends its first request_id.
func (f *failover) replayFirst(user int64, stop <-chan struct{}) {
	code, body, ok := f.s.reserveAnswered(user, fmt.Sprintf("outage-%d", user), stop)
	if !ok || code != http.StatusAccepted {
		f.t.Errorf("user %d: its first request re-sent answered %d %v (answered: %v), not 202", user, code, body, ok)
		return
	}
	tok, _ := body["token"].(string)
	f.grants.Note(user, fmt.Sprintf("outage-%d", user), tok)
	if first := f.firstOf(user); tok != first {
		f.t.Errorf("user %d: its first request re-sent answered token %s, not %s", user, tok, first)
		return
	}
	f.mu.Lock()
	f.returned.replayed++
	f.mu.Unlock()
}

// firstOf is the token of a user's first 202.
func (f *failover) firstOf(user int64) string {
	h, _ := f.grants.First(user)
	return h.Token
}

// sale reads the sale's row.
func (f *failover) sale() *domain.Sale {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sale, err := f.s.st.GetSale(ctx, f.s.saleID)
	require.NoError(f.t, err)
	return sale
}

// describe names a sale's mode, epoch and rebuild mark.
func describe(sale *domain.Sale) string {
	return fmt.Sprintf("%s mode at epoch %d, marked went back %v", sale.Mode, sale.ModeEpoch, sale.RedisWentBack)
}

// waitWentBackRebuild waits for the worker to have rebuilt the sale
// because a hold found Redis behind the database.
func (f *failover) waitWentBackRebuild() {
	rebuilt := func() bool {
		for _, line := range strings.Split(f.s.worker.Log(), "\n") {
			if strings.Contains(line, "sale rebuilt and back on Redis") && strings.Contains(line, "Redis went back in time") {
				return true
			}
		}
		return false
	}
	require.Eventually(f.t, rebuilt, 60*time.Second, 100*time.Millisecond,
		"the worker rebuilds the sale from the database because Redis went back in time; the sale: %s", describe(f.sale()))
	f.t.Logf("the worker rebuilt the sale because Redis went back in time; the sale: %s", describe(f.sale()))
}

// rejoinOldMaster restarts the killed master: the sentinels turn it into
// a replica of the promoted one, and it syncs from it.
func (f *failover) rejoinOldMaster(ctx context.Context) {
	t := f.t
	require.NoError(t, f.g.HealReplication(ctx))
	began := time.Now()
	require.NoError(t, f.g.Restart(ctx, f.master))
	old := redis.NewClient(&redis.Options{Addr: f.master, ReadTimeout: 3 * time.Second, WriteTimeout: 3 * time.Second, MaxRetries: -1})
	defer old.Close()
	_, promoted := f.g.Nodes()
	_, port, _ := strings.Cut(promoted, ":")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ictx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		info, err := old.Info(ictx, "replication").Result()
		if assert.NoError(c, err) {
			assert.Contains(c, info, "role:slave\r\n")
			assert.Contains(c, info, "master_port:"+port+"\r\n")
			assert.Contains(c, info, "master_link_status:up\r\n")
		}
	}, 90*time.Second, 200*time.Millisecond, "the old master rejoins as a replica of the promoted one")
	t.Logf("the old master rejoined as a replica of the promoted one %s after its restart", time.Since(began).Round(time.Millisecond))
}

// judge checks the final state: every 202 kept, one token per user, the
// units sold exactly, reconciliation clean, the invariants.
func (f *failover) judge(scenario string, stock int64) {
	t, s := f.t, f.s
	given := f.grants.FirstTokens() // each user's 202 (a second one fails the test)
	waitBackOnRedis(t, s)
	clean := f.waitClean()
	placed, failed := waitPlacedOrFailed(t, s, given)
	if failed > 0 {
		f.explainFailed()
	}
	assert.Zero(t, failed, "every 202 reaches PENDING_PAYMENT")
	f.grants.OneTokenEach(t)
	returning := map[int64]string{}
	for _, u := range f.grants.Returning(cutPhases...) {
		if tok, ok := given[u]; ok {
			returning[u] = tok
		}
	}
	refusals := f.refusals()
	rebought := cancelAndBuyAgain(t, s, returning)
	fresh, unsold := freshBuyTheRest(t, s, stock)
	reconcileClean(t, s)
	firstAgain := f.grants.FirstAfter(phasePromoted)
	st := s.checkIdle(scenario, func(r *Row) {
		r.Kept202, r.Given202, r.SellingAgain = placed, len(given), firstAgain
	})
	assert.Zero(t, st.StrandedUnits(), "units stranded")
	assert.Empty(t, st.StrandedUsers(), "users stranded")
	t.Logf("%s: 202s %d before the cut, %d during it, %d after the kill, %d after the promotion (first %s after it); "+
		"%d/%d kept (%d FAILED); refusals recorded %v; reconciliation clean %s after the promotion; "+
		"%d returning holders cancelled and bought again; %d fresh units sold of %d unsold; "+
		"%d workflows started by the worker's lost holds' starts (at its first look at Redis, and after the change)",
		scenario, f.grants.Given(phaseReplicated), f.grants.Given(phaseCut), f.grants.Given(phaseKilled), f.grants.Given(phasePromoted),
		firstAgain.Round(time.Millisecond), placed, len(given), failed, refusals, clean.Round(time.Millisecond),
		rebought, fresh, unsold, f.lostHoldsStarted())
	assert.LessOrEqual(t, firstAgain, 30*time.Second, "the sale sells again within 30 s of the promotion")
	assert.LessOrEqual(t, clean, 30*time.Second, "reconciliation is clean within 30 s of the promotion")
}

// lostHoldsStarted sums the workflows the worker's lost holds' starts
// (worker.LostHolds) reported as new: holds recorded before their 202
// that had no workflow at the worker's first look at Redis or after Redis
// changed (an inbox entry lost, or one the relay had not read yet).
func (f *failover) lostHoldsStarted() int64 {
	var n int64
	for _, line := range strings.Split(f.s.worker.Log(), "\n") {
		var e struct {
			Msg     string `json:"msg"`
			Started int64  `json:"started"`
		}
		if json.Unmarshal([]byte(line), &e) == nil && strings.HasPrefix(e.Msg, "lost holds: started") {
			n += e.Started
		}
	}
	return n
}

// waitClean waits until reconciliation, not repairing, finds the sale
// clean; it returns the time from the promotion.
func (f *failover) waitClean() time.Duration {
	require.EventuallyWithT(f.t, func(c *assert.CollectT) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		rep, err := f.s.reconciler().Run(ctx, f.s.saleID, false)
		if !assert.NoError(c, err) {
			return
		}
		assert.True(c, rep.Consistent && rep.InFlight == 0 && len(rep.Discrepancies) == 0, "reconciliation clean: %+v", rep)
	}, 120*time.Second, 200*time.Millisecond, "reconciliation clean")
	return f.grants.Since(phasePromoted)
}

// refusals counts the sale's holds the database refused, by reason.
func (f *failover) refusals() map[string]int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := f.s.st.DB.QueryContext(ctx, "SELECT COALESCE(fail_reason, ''), COUNT(*) FROM reservations WHERE sale_id = ? AND status = 'FAILED' GROUP BY fail_reason", f.s.saleID)
	require.NoError(f.t, err)
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var reason string
		var n int
		require.NoError(f.t, rows.Scan(&reason, &n))
		out[reason] = n
	}
	require.NoError(f.t, rows.Err())
	return out
}

// explainFailed logs every FAILED reservation of a token given in a 202,
// as the database holds it.
func (f *failover) explainFailed() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := f.s.st.DB.QueryContext(ctx, `SELECT token, user_id, request_id, path, COALESCE(fail_reason, ''), COALESCE(redis_seq, 0),
		COALESCE(unit_bucket, -1), created_at, updated_at FROM reservations WHERE sale_id = ? AND status = 'FAILED'`, f.s.saleID)
	require.NoError(f.t, err)
	defer rows.Close()
	for rows.Next() {
		var token, req, path, reason string
		var user, seq, bucket int64
		var created, updated time.Time
		require.NoError(f.t, rows.Scan(&token, &user, &req, &path, &reason, &seq, &bucket, &created, &updated))
		if f.grants.Gave(user, token) {
			f.t.Errorf("202 token %s ended FAILED: user %d request %s path %s reason %q redis_seq %d bucket %d created %s updated %s",
				token, user, req, path, reason, seq, bucket, created.Format(time.StampMilli), updated.Format(time.StampMilli))
		}
	}
	require.NoError(f.t, rows.Err())
}
