package cluster_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/store"
	"github.com/seckill/seckill/test/cluster"
	"github.com/seckill/seckill/test/grants"
)

// TestClusterFailoverToALaggingReplicaKeepsEvery202: every 202 survives a
// Redis Cluster failover that loses writes. The master serving the test
// sale's slot gets a replica, and 16 clients buy through both APIs. Once
// the replica has the first holds, its replication is cut while both
// nodes keep serving: the holds of that while reach the master alone, each
// 202 recorded in MySQL. The replica then takes the slots over without the
// master (CLUSTER FAILOVER TAKEOVER); the old master, outvoted by the new
// epoch, becomes its replica and discards what it alone had. The users
// whose holds were lost ask again with a new request_id and are refused
// (409 already_purchased, never a second 202), and re-send their first
// request_id and get their token back at once, before or after their new
// request, and again once the sale is rebuilt. Afterwards every 202 has
// reached PENDING_PAYMENT, no user holds two units or got two tokens,
// nothing is oversold, fresh buyers buy exactly the units left,
// reconciliation is clean and the sale is back on Redis.
func TestClusterFailoverToALaggingReplicaKeepsEvery202(t *testing.T) {
	const stock = 500
	rc := cluster.MustRedisCluster(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(rc.Logs())
		}
	})
	apis, workers := mustFleet(t, map[string]string{"REDIS_ADDR": "", "REDIS_ADDRS": rc.AddrList(),
		// A loaded machine's stalls stay inside the Redis timeout: the
		// failover, not the machine, is what the sale meets.
		"SECKILL_REDIS_TIMEOUT": "1s"})
	saleID := mustLiveSale(t, apis[0].URL, stock)
	f := newClusterFailover(t, rc, saleID, apis, workers)
	ctx, cancel := context.WithCancel(context.Background())
	// Paced, so that the stock outlasts the failover.
	crowd := cluster.Crowd{Buyer: f.buyer, Clients: 16, NextUser: testenv.UniqueUser, Pause: 500 * time.Millisecond,
		RequestID: func(user int64) string { return fmt.Sprintf("crowd-%d", user) }, On202: f.grants.Accepted}
	var got cluster.CrowdResult
	done := make(chan struct{})
	go func() {
		defer close(done)
		got = crowd.Run(ctx)
	}()
	stopCrowd := sync.OnceFunc(func() {
		cancel()
		<-done
	})
	t.Cleanup(stopCrowd)

	f.cutAndTakeOver()
	f.returnHolders()
	f.oldMasterDemoted()
	require.True(t, f.grants.WaitGiven(t, phaseTakenOver, 20, 60*time.Second), "the crowd buys after the take-over")
	stopCrowd()
	t.Logf("crowd: %d users answered 202, answers by status %v, %d requests sent again (503, 429, transport errors)",
		len(got.Reserved), got.Status, got.Resent)
	f.judge(stock)
}

// The phases of the failover, in order.
const (
	phaseReplicated = iota // the replica follows the master
	phaseCut               // from the cut of the replica's link to the take-over
	phaseTakenOver         // the replica is the slots' master
	phases
)

var phaseNames = [phases]string{"before the cut", "during the cut", "after the take-over"}

// cutPhases are the phases whose 202s' users return after the take-over.
var cutPhases = []int{phaseCut}

// clusterFailover drives the fault and keeps what the clients were given.
type clusterFailover struct {
	t        *testing.T
	rc       *cluster.RedisCluster
	saleID   int64
	apis     [2]*testenv.API
	workers  [2]*testenv.Worker
	buyer    *cluster.Buyer
	st       *store.Store
	tc       client.Client
	rdb      *redis.ClusterClient
	master   string        // the node serving the sale's slot at first
	replica  string        // its replica, which takes the slot over
	masterC  *redis.Client // the master alone
	replicaC *redis.Client // the replica alone (READONLY)

	// grants are the 202s the clients were given, by phase, and the users
	// whose buyer marks the master had and the replica had not; the
	// take-over's phase begins when the replica said it is a master.
	grants *grants.Ledger

	mu        sync.Mutex
	epoch     int64         // the sale's mode epoch at the take-over
	rebuiltIn time.Duration // from the take-over to the sale rebuilt from the database
	returned  returned
}

// returned counts the answers to the returning holders: new requests
// refused 409; first requests re-sent at once, before a new request or
// after one (answered their token; refused 409 is counted to fail); first
// requests re-sent once the sale is rebuilt (answered their token).
type returned struct{ refused, replayedFirst, replayed, replayRefused, replayedRebuilt int }

func newClusterFailover(t *testing.T, rc *cluster.RedisCluster, saleID int64, apis [2]*testenv.API, workers [2]*testenv.Worker) *clusterFailover {
	master := rc.MasterOf(t, redisgateway.SaleKeys(saleID).Meta)
	began := time.Now()
	replica := rc.AddReplica(t, master)
	t.Logf("sale %d's slot is served by %s; its replica %s synchronised in %s", saleID, master, replica,
		time.Since(began).Round(time.Millisecond))
	return &clusterFailover{t: t, rc: rc, saleID: saleID, apis: apis, workers: workers,
		buyer: &cluster.Buyer{URLs: []string{apis[0].URL, apis[1].URL}, SaleID: saleID, JWTSecret: []byte(config.DevJWTSecret)},
		st:    testenv.MustStore(t), tc: testenv.MustTemporal(t), rdb: rc.Client(t),
		master: master, replica: replica, masterC: rc.NodeClient(t, master), replicaC: rc.NodeClient(t, replica),
		grants: grants.New(phaseNames[:]...)}
}

// marker is a key in the sale's slot that only the old master gets: a
// write it alone acknowledged, which it must discard when it rejoins.
func (f *clusterFailover) marker() string {
	return fmt.Sprintf("{sale:%d}:failover-test-marker", f.saleID)
}

// cutAndTakeOver: holds replicate, then the replica's link is cut while the
// crowd buys (and the master takes the marker), and the replica takes the
// slots over. The holds it missed are lost.
func (f *clusterFailover) cutAndTakeOver() {
	t := f.t
	require.True(t, f.grants.WaitGiven(t, phaseReplicated, 30, 90*time.Second), "202s before the cut")
	grants.WaitMarked(t, f.replicaC, f.saleID, f.grants.Users())
	f.grants.SetPhase(phaseCut)
	f.rc.CutReplication(t, f.master, f.replica)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, f.masterC.Set(ctx, f.marker(), "acknowledged by the old master alone", 0).Err())
	require.True(t, f.grants.WaitGiven(t, phaseCut, 30, 60*time.Second), "202s during the cut")
	onReplica, err := grants.ReadMarks(ctx, f.replicaC, f.saleID)
	require.NoError(t, err)
	onMaster, err := grants.ReadMarks(ctx, f.masterC, f.saleID)
	require.NoError(t, err)
	sale, err := f.st.GetSale(ctx, f.saleID)
	require.NoError(t, err)
	f.epoch = sale.ModeEpoch
	f.rc.TakeOver(t, f.replica)
	f.grants.SetPhase(phaseTakenOver)
	lost, err := onMaster.Lost(onReplica)
	require.NoError(t, err)
	f.grants.Lose(lost)
	t.Logf("failover: %d 202s before the cut, %d during it; at the take-over the master had counted %d holds, the replica %d; "+
		"%d users' buyer marks lost (%d users given a 202 during the cut)",
		f.grants.Given(phaseReplicated), f.grants.Given(phaseCut), onMaster.Reserved, onReplica.Reserved,
		len(lost), len(f.grants.UsersIn(cutPhases...)))
	require.NotEmpty(t, lost, "the replica that took over lacks holds that were answered 202")
	require.Less(t, onReplica.Reserved, onMaster.Reserved, "the replica's counter of holds is behind the master's")
}

// returnHolders: right after the take-over, while the crowd buys, each
// returning holder asks once more with a new request_id, which must be
// refused (409 already_purchased, never a second 202), and re-sends its
// first request_id: half of them before the new request, half after it
// (whose refusal put the holder's replay key, which Redis had lost, back):
// each must answer their token. Once the sale is rebuilt from the
// database, each re-sends its first request_id again: 202 with its token.
func (f *clusterFailover) returnHolders() {
	t := f.t
	// The users whose buyer marks the replica lacked, with those given a
	// 202 during the cut, whose first 202 is known.
	users := f.grants.Returning(cutPhases...)
	after := f.grants.Since(phaseTakenOver)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	each := func(do func(i int, user int64)) {
		sem := make(chan struct{}, 8)
		var wg sync.WaitGroup
		for i, u := range users {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				do(i, u)
			})
		}
		wg.Wait()
	}
	each(func(i int, u int64) {
		if i%2 == 0 {
			f.replayFirst(ctx, u, replayFirstThing)
			f.askAgain(ctx, u)
		} else {
			f.askAgain(ctx, u)
			f.replayFirst(ctx, u, replayAfterNew)
		}
	})
	mode := f.saleMode()
	f.waitRebuilt()
	each(func(_ int, u int64) { f.replayFirst(ctx, u, replayRebuilt) })
	r := f.returned
	t.Logf("%d returning holders asked from %s after the take-over on (then %s): %d refused 409 already_purchased; "+
		"their first requests re-sent at once: %d of %d before the new request answered their token, of %d after it "+
		"%d answered their token and %d were refused 409; the sale rebuilt from the database %s after the take-over; "+
		"re-sent then: %d answered their token", len(users), after.Round(time.Millisecond), mode, r.refused,
		r.replayedFirst, (len(users)+1)/2, len(users)/2, r.replayed, r.replayRefused, f.rebuiltIn.Round(time.Millisecond), r.replayedRebuilt)
	require.NotEmpty(t, users, "users whose holds Redis lost")
	assert.Equal(t, len(users), r.refused, "every returning holder is refused")
	assert.Equal(t, (len(users)+1)/2, r.replayedFirst, "every first request re-sent before a new one answers its token")
	assert.Equal(t, len(users)/2, r.replayed, "every first request re-sent after a new one answers its token")
	assert.Zero(t, r.replayRefused, "no first request re-sent after a new one is refused")
	assert.Equal(t, len(users), r.replayedRebuilt, "every first request re-sent once the sale is rebuilt answers its token")
}

// askAgain: a returning holder asks with a new request_id.
func (f *clusterFailover) askAgain(ctx context.Context, user int64) {
	req := fmt.Sprintf("again-%d", user)
	a, _, err := f.buyer.Reserve(ctx, user, req)
	switch {
	case err != nil:
		f.t.Errorf("user %d: a new request: %v", user, err)
		return
	case a.Status == http.StatusAccepted:
		f.grants.Note(user, req, a.Token)
		f.t.Errorf("user %d, whose hold %s Redis lost, got a second 202 with a new request_id: token %s", user, f.firstOf(user).Token, a.Token)
		return
	case a.Status != http.StatusConflict || a.Code != "already_purchased":
		f.t.Errorf("user %d: a new request answered %d %s, not 409 already_purchased", user, a.Status, a.Code)
		return
	}
	f.mu.Lock()
	f.returned.refused++
	f.mu.Unlock()
}

// When a returning holder re-sends its first request_id.
const (
	replayFirstThing = iota // at once, before a new request
	replayAfterNew          // at once, after a new request
	replayRebuilt           // once the sale is rebuilt
)

// replayFirst: a returning holder re-sends its first request_id, when
// says when.
func (f *clusterFailover) replayFirst(ctx context.Context, user int64, when int) {
	first := f.firstOf(user)
	a, _, err := f.buyer.Reserve(ctx, user, first.Request)
	switch {
	case err != nil:
		f.t.Errorf("user %d: its first request re-sent: %v", user, err)
		return
	case a.Status == http.StatusAccepted:
		f.grants.Note(user, first.Request, a.Token)
		if a.Token != first.Token {
			f.t.Errorf("user %d: its first request re-sent answered token %s, not %s", user, a.Token, first.Token)
			return
		}
	case when == replayAfterNew && a.Status == http.StatusConflict && a.Code == "already_purchased":
		f.mu.Lock()
		f.returned.replayRefused++
		f.mu.Unlock()
		return
	default:
		f.t.Errorf("user %d: its first request re-sent answered %d %s, not 202 (when: %d)", user, a.Status, a.Code, when)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch when {
	case replayFirstThing:
		f.returned.replayedFirst++
	case replayAfterNew:
		f.returned.replayed++
	default:
		f.returned.replayedRebuilt++
	}
}

// waitRebuilt waits until the sale has been rebuilt from the database since
// the take-over (a mode epoch past the take-over's, back on Redis, the
// went-back mark taken) and notes how long after the take-over that was.
func (f *clusterFailover) waitRebuilt() {
	require.EventuallyWithT(f.t, func(c *assert.CollectT) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		sale, err := f.st.GetSale(ctx, f.saleID)
		if assert.NoError(c, err) {
			assert.Greater(c, sale.ModeEpoch, f.epoch, "rebuilt since the take-over")
			assert.Equal(c, domain.ModeRedis, sale.Mode)
			assert.False(c, sale.RedisWentBack, "marked for a rebuild")
		}
	}, 60*time.Second, 50*time.Millisecond, "the sale is rebuilt from the database after the take-over")
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rebuiltIn = f.grants.Since(phaseTakenOver)
}

// firstOf is a user's first 202.
func (f *clusterFailover) firstOf(user int64) grants.Hold {
	h, _ := f.grants.First(user)
	return h
}

// saleMode describes the sale's mode and whether it is marked for a
// rebuild (Redis went back in time).
func (f *clusterFailover) saleMode() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sale, err := f.st.GetSale(ctx, f.saleID)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("sale in %s mode, epoch %d, marked went back %v", sale.Mode, sale.ModeEpoch, sale.RedisWentBack)
}

// oldMasterDemoted: the old master, outvoted by the take-over's epoch,
// turns itself into a replica of the new master, synchronises from it and
// so discards the write it alone had.
func (f *clusterFailover) oldMasterDemoted() {
	t := f.t
	f.rc.WaitReplicaOf(t, f.master, f.replica, 60*time.Second)
	since := f.grants.Since(phaseTakenOver)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := f.masterC.Exists(ctx, f.marker()).Result()
	require.NoError(t, err)
	require.Zero(t, n, "the old master discarded the write it alone acknowledged")
	n, err = f.replicaC.Exists(ctx, f.marker()).Result()
	require.NoError(t, err)
	require.Zero(t, n, "the new master never had it")
	t.Logf("the old master was a replica of the new one, synchronised, %s after the take-over", since.Round(time.Millisecond))
}
