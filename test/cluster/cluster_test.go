package cluster_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/internal/conn"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/test/cluster"
)

// userBlock reserves n consecutive user ids and returns the first.
func userBlock(n int) int64 {
	first := testenv.UniqueUser()
	for range n - 1 {
		testenv.UniqueUser()
	}
	return first
}

// pingCalls reads the PING count from INFO commandstats.
var pingCalls = regexp.MustCompile(`cmdstat_ping:calls=(\d+)`)

// REDIS_ADDRS with several addresses gives the processes a cluster client;
// one address stays a plain client.
func TestConfigSelectsClusterClient(t *testing.T) {
	rc := cluster.MustRedisCluster(t)
	t.Setenv("SECKILL_ENV", "dev")
	t.Setenv("REDIS_ADDR", "")
	t.Setenv("REDIS_ADDRS", rc.AddrList())
	cfg, err := config.Load()
	require.NoError(t, err)
	require.Equal(t, rc.Addrs, cfg.RedisAddrs)
	rdb, err := conn.Redis(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = rdb.Close() })
	cc, ok := rdb.(*redis.ClusterClient)
	require.True(t, ok, "REDIS_ADDRS with %d addresses gives %T", len(rc.Addrs), rdb)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	shards, err := cc.ClusterShards(ctx).Result()
	require.NoError(t, err)
	require.Len(t, shards, cluster.Masters)

	// The breaker's heartbeat (redisgateway.Client.Aside) pings every master.
	aside, err := redisgateway.NewClient(rdb).Aside()
	require.NoError(t, err)
	t.Cleanup(func() { _ = aside.Close() })
	require.NoError(t, aside.PingAll(ctx)) // the aside client learns the cluster's layout
	before := pingCounts(t, ctx, cc)
	require.NoError(t, aside.PingAll(ctx))
	after := pingCounts(t, ctx, cc)
	require.Len(t, after, cluster.Masters)
	for addr, n := range after {
		require.Greater(t, n, before[addr], "master %s was pinged", addr)
	}

	t.Setenv("REDIS_ADDRS", rc.Addrs[0])
	cfg, err = config.Load()
	require.NoError(t, err)
	single, err := conn.Redis(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = single.Close() })
	_, ok = single.(*redis.Client)
	require.True(t, ok, "one address gives %T", single)

	// A managed cluster's one discovery endpoint, in cluster mode by
	// REDIS_CLUSTER, finds every master and routes by slot (no MOVED).
	t.Setenv("REDIS_ADDRS", "")
	t.Setenv("REDIS_URL", "redis://"+rc.Addrs[1])
	t.Setenv("REDIS_CLUSTER", "true")
	cfg, err = config.Load()
	require.NoError(t, err)
	discovered, err := conn.Redis(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = discovered.Close() })
	dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer dcancel()
	dc, ok := discovered.(*redis.ClusterClient)
	require.True(t, ok, "REDIS_CLUSTER=true with one address gives %T", discovered)
	shards, err = dc.ClusterShards(dctx).Result()
	require.NoError(t, err)
	require.Len(t, shards, cluster.Masters)
	for i := range 3 * cluster.Masters {
		key := fmt.Sprintf("{discovery:%d}", i)
		require.NoError(t, dc.Set(dctx, key, i, time.Minute).Err())
		require.NoError(t, dc.Get(dctx, key).Err())
	}
}

// pingCounts is each master's PING calls so far (INFO commandstats).
func pingCounts(t *testing.T, ctx context.Context, cc *redis.ClusterClient) map[string]int64 {
	var mu sync.Mutex
	got := map[string]int64{}
	require.NoError(t, cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		info, err := m.Info(ctx, "commandstats").Result()
		if err != nil {
			return err
		}
		var n int64
		if sub := pingCalls.FindStringSubmatch(info); sub != nil {
			if n, err = strconv.ParseInt(sub[1], 10, 64); err != nil {
				return fmt.Errorf("ping calls %q: %w", sub[1], err)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		got[m.Options().Addr] = n
		return nil
	}))
	return got
}

// Every script and every multi-key call shape the API, the worker and the
// reconciler use, on sales spread over all three masters: none fails with
// CROSSSLOT, because each touches one sale's {sale:ID} keys only.
func TestEveryRedisCallStaysInOneSlot(t *testing.T) {
	rc := cluster.MustRedisCluster(t)
	rdb := rc.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	scripts := redisgateway.New()

	// Fixed ids on a fresh cluster: deterministic slots, and no other
	// package's keys anywhere near.
	const sales = 12
	ids := make([]int64, sales)
	masters := map[string]bool{}
	for i := range ids {
		ids[i] = int64(900_000_001 + i)
		k := redisgateway.SaleKeys(ids[i])
		slot := redisSlot(t, rdb, k.Meta)
		for _, key := range k.All() {
			require.Equal(t, slot, redisSlot(t, rdb, key), "key %s", key)
		}
		m, err := rdb.MasterForKey(ctx, k.Meta)
		require.NoError(t, err)
		masters[m.Options().Addr] = true
	}
	require.Len(t, masters, cluster.Masters, "the sales' slots are spread over every master")

	var wg sync.WaitGroup
	errs := make(chan error, sales)
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := exerciseSale(ctx, rdb, scripts, id); err != nil {
				errs <- fmt.Errorf("sale %d: %w", id, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	// A plain pipeline over many sales (the API's cache refresh, the
	// worker's stock recorder) is split by node by the cluster client.
	pipe := rdb.Pipeline()
	stocks := make([]*redis.StringCmd, sales)
	for i, id := range ids {
		stocks[i] = pipe.Get(ctx, redisgateway.SaleKeys(id).Stock)
	}
	_, err := pipe.Exec(ctx)
	require.NoError(t, err)
	for i := range ids {
		n, err := stocks[i].Int64()
		require.NoError(t, err)
		require.EqualValues(t, 3, n, "sale %d", ids[i])
	}

	// Tear-down deletes per key; one DEL over one sale's keys is one slot
	// as well.
	require.NoError(t, rdb.Del(ctx, redisgateway.SaleKeys(ids[0]).All()...).Err())
	for _, id := range ids[1:] {
		for _, key := range redisgateway.SaleKeys(id).All() {
			require.NoError(t, rdb.Del(ctx, key).Err())
		}
	}
	// A command over two sales' keys is what the design never issues; it is
	// refused, which is why every call above stays within one sale.
	err = rdb.Do(ctx, "MGET", redisgateway.SaleKeys(ids[0]).Stock, redisgateway.SaleKeys(ids[1]).Stock).Err()
	require.Error(t, err)
	require.Contains(t, err.Error(), "CROSSSLOT")
}

func redisSlot(tb testing.TB, rdb *redis.ClusterClient, key string) int64 {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, err := rdb.ClusterKeySlot(ctx, key).Result()
	require.NoError(tb, err)
	return n
}

// exerciseSale runs one sale through every script and the worker's and the
// API's transactions on its keys, in the order a sale sees them.
func exerciseSale(ctx context.Context, rdb *redis.ClusterClient, s *redisgateway.Scripts, id int64) error {
	k := redisgateway.SaleKeys(id)
	now := time.Now()
	out, _, err := s.Warmup(ctx, rdb, redisgateway.WarmupArgs{SaleID: id, StartsMS: now.Add(-time.Minute).UnixMilli(),
		EndsMS: now.Add(time.Hour).UnixMilli(), Control: "active", Epoch: 1, Mode: "redis", Stock: 5, Buyers: []int64{1000}})
	if err != nil || out != redisgateway.WarmupOK {
		return fmt.Errorf("warmup %q: %w", out, err)
	}
	tokens, err := reserveSix(ctx, rdb, s, id)
	if err != nil {
		return err
	}
	// The API's sold-out mark: one MULTI over the sale's keys.
	if _, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Get(ctx, k.Released)
		p.Get(ctx, k.Stock)
		p.SMembers(ctx, k.Buyers)
		p.HGetAll(ctx, k.Requests)
		return nil
	}); err != nil && err != redis.Nil {
		return fmt.Errorf("sold-out mark: %w", err)
	}
	if err := relayCommands(ctx, rdb, k, tokens); err != nil {
		return err
	}
	return repairCommands(ctx, rdb, s, id, tokens[0], now)
}

// reserveSix reserves for users 1 to 6 a sale of five units: five holds,
// then sold out. It returns the holds' tokens.
func reserveSix(ctx context.Context, rdb *redis.ClusterClient, s *redisgateway.Scripts, id int64) ([]string, error) {
	var tokens []string
	for u := int64(1); u <= 6; u++ {
		r, err := s.Reserve(ctx, rdb, redisgateway.ReserveArgs{SaleID: id, UserID: u, RequestID: fmt.Sprintf("req-%08d", u), Token: fmt.Sprintf("tok-%d-%d", id, u), Epoch: 1})
		if err != nil {
			return nil, err
		}
		want := redisgateway.OutcomeOK
		if u == 6 {
			want = redisgateway.OutcomeSoldOut
		}
		if r.Outcome != want {
			return nil, fmt.Errorf("user %d: outcome %s, want %s", u, r.Outcome, want)
		}
		if r.Outcome == redisgateway.OutcomeOK {
			tokens = append(tokens, r.Token)
		}
	}
	return tokens, nil
}

// relayCommands: one stream per XREADGROUP, then ack and dead-letter in
// one MULTI each, XAUTOCLAIM, XPENDING and XINFO GROUPS.
func relayCommands(ctx context.Context, rdb *redis.ClusterClient, k redisgateway.Keys, tokens []string) error {
	streams, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: redisgateway.InboxGroup, Consumer: "c1",
		Streams: []string{k.Inbox, ">"}, Count: 100, Block: time.Second}).Result()
	if err != nil {
		return fmt.Errorf("xreadgroup: %w", err)
	}
	if len(streams) != 1 || len(streams[0].Messages) != 5 {
		return fmt.Errorf("xreadgroup: %d streams, want 1 with 5 entries", len(streams))
	}
	msgs := streams[0].Messages
	if _, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.SAdd(ctx, k.Started, tokens[0])
		p.XAck(ctx, k.Inbox, redisgateway.InboxGroup, msgs[0].ID)
		return nil
	}); err != nil {
		return fmt.Errorf("ack: %w", err)
	}
	if _, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.XAdd(ctx, &redis.XAddArgs{Stream: k.Dead, Values: map[string]any{"entry": msgs[1].ID, "reason": "test"}})
		p.XAck(ctx, k.Inbox, redisgateway.InboxGroup, msgs[1].ID)
		return nil
	}); err != nil {
		return fmt.Errorf("dead-letter: %w", err)
	}
	if _, _, err := rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{Stream: k.Inbox, Group: redisgateway.InboxGroup,
		MinIdle: 0, Start: "0-0", Count: 100, Consumer: "c2"}).Result(); err != nil {
		return fmt.Errorf("xautoclaim: %w", err)
	}
	if _, err := rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: k.Inbox, Group: redisgateway.InboxGroup, Start: "-", End: "+", Count: 100}).Result(); err != nil {
		return fmt.Errorf("xpending: %w", err)
	}
	if _, err := rdb.XInfoGroups(ctx, k.Inbox).Result(); err != nil {
		return fmt.Errorf("xinfo groups: %w", err)
	}
	return nil
}

// repairCommands: the order activities' and the reconciler's scripts, and
// the resync's rebuild.
func repairCommands(ctx context.Context, rdb *redis.ClusterClient, s *redisgateway.Scripts, id int64, token string, now time.Time) error {
	if moved, err := s.Advance(ctx, rdb, id, token, "ordered", "held"); err != nil || !moved {
		return fmt.Errorf("advance %v: %w", moved, err)
	}
	if released, err := s.Release(ctx, rdb, id, 1, token, true, false); err != nil || !released {
		return fmt.Errorf("release %v: %w", released, err)
	}
	if out, _, err := s.Adjust(ctx, rdb, id, 2, "cluster-add"); err != nil || out != redisgateway.AdjustOK {
		return fmt.Errorf("adjust %q: %w", out, err)
	}
	snap, err := s.ReadSnapshot(ctx, rdb, id, time.Second)
	if err != nil {
		return err
	}
	if snap.Stock != 3 {
		return fmt.Errorf("snapshot: stock %d, want 3", snap.Stock)
	}
	// 9 units, 4 held in Redis, 1 live order Redis lost: 4 on sale.
	if rep, err := s.RepairStock(ctx, rdb, id, 9, []string{"cluster-add"}, []string{"tok-lost"}); err != nil || rep.Outcome != redisgateway.RepairSet || rep.To != 4 {
		return fmt.Errorf("repair stock %+v: %w", rep, err)
	}
	// The resync: rebuild from the database's picture; the four holds the
	// database does not know yet stay held.
	fence, err := s.ReadFence(ctx, rdb, id)
	if err != nil {
		return err
	}
	n, err := s.Rebuild(ctx, rdb, id, redisgateway.RebuildData{Stock: 7, Epoch: 2, Fence: fence, StartsMS: now.Add(-time.Minute).UnixMilli(),
		EndsMS: now.Add(time.Hour).UnixMilli(), Control: "active"})
	if err != nil {
		return err
	}
	if n != 3 {
		return fmt.Errorf("rebuild: stock %d, want 3", n)
	}
	return nil
}

// Two APIs and two workers on a three-master cluster: a burst split over
// both APIs sells exactly the stock, nobody twice; a unit cancelled through
// one API sells again through the other, whose sold-out mark is cleared.
func TestTwoAPIsTwoWorkersShareOneSale(t *testing.T) {
	// The burst's 160 first calls reach a cluster that has not loaded the
	// script yet, on a machine the other packages' tests load: a generous
	// Redis timeout keeps the breaker out of a test about sharing a sale.
	a, b := mustClusterStack(t, map[string]string{"SECKILL_REDIS_TIMEOUT": "2s"})
	const stock, users = 20, 80
	saleID := mustLiveSale(t, a.URL, stock)

	// Every user asks twice, through both APIs, with two request ids.
	holders, codes := burstThroughBoth(t, a.URL, b.URL, saleID, users)
	require.Len(t, holders, stock, "answers: %v", codes)
	require.Equal(t, 2*users-stock, codes[http.StatusGone]+codes[http.StatusConflict], "answers: %v", codes)

	// Both instances have seen the sale sold out.
	for _, url := range []string{a.URL, b.URL} {
		code, body := call(t, "POST", fmt.Sprintf("%s/api/v1/sales/%d/reservations", url, saleID), testenv.UniqueUser(),
			map[string]any{"request_id": "late-comer-1"})
		require.Equal(t, http.StatusGone, code, "%v", body)
	}

	// The workers place every order; reads answer on either instance. The
	// wait is generous: Temporal is shared with the other packages' tests.
	var cancelUser int64
	var cancelToken string
	for user, token := range holders {
		cancelUser, cancelToken = user, token
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for user, token := range holders {
			code, body, err := do("GET", b.URL+"/api/v1/reservations/"+token, user, nil)
			if !assert.NoError(c, err) || !assert.Equal(c, http.StatusOK, code) ||
				!assert.Equal(c, "PENDING_PAYMENT", body["status"], "reservation %s", token) {
				return
			}
		}
	}, 90*time.Second, 500*time.Millisecond)

	// Cancel one through A; B must sell that unit to a new user.
	resellThroughOther(t, a.URL, b.URL, saleID, cancelUser, cancelToken)
	// The reconciler (Redis snapshot script on the cluster, database
	// snapshot) agrees: exactly the stock is held, nothing is off.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, rep, err := do("GET", fmt.Sprintf("%s/admin/v1/sales/%d/reconciliation", a.URL, saleID), -1, nil)
		if !assert.NoError(c, err) || !assert.Equal(c, http.StatusOK, code, "%v", rep) {
			return
		}
		orders, _ := rep["orders"].(map[string]any)
		assert.EqualValues(c, stock, orders["PENDING_PAYMENT"], "%v", rep)
		assert.EqualValues(c, 1, orders["CANCELLED"], "%v", rep)
		assert.EqualValues(c, 0, rep["redis_stock"], "%v", rep)
		assert.Equal(c, true, rep["consistent"], "%v", rep)
	}, 90*time.Second, 500*time.Millisecond)
}

// burstThroughBoth has every user ask twice, through both APIs, with two
// request ids; it returns the holders' tokens and the answers' counts.
func burstThroughBoth(t *testing.T, aURL, bURL string, saleID int64, users int) (map[int64]string, map[int]int) {
	base := userBlock(users)
	type reply struct {
		user  int64
		code  int
		token string
		err   error
	}
	replies := make(chan reply, 2*users)
	var wg sync.WaitGroup
	for i := range 2 * users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user := base + int64(i%users)
			url := []string{aURL, bURL}[(i+i/users)%2]
			code, body, err := testenv.DoRetrying("POST", fmt.Sprintf("%s/api/v1/sales/%d/reservations", url, saleID), user,
				map[string]any{"request_id": fmt.Sprintf("burst-%d-%d", user, i/users)}, 10)
			token, _ := body["token"].(string)
			replies <- reply{user, code, token, err}
		}()
	}
	wg.Wait()
	close(replies)
	holders := map[int64]string{}
	codes := map[int]int{}
	for r := range replies {
		require.NoError(t, r.err)
		codes[r.code]++
		if r.code == http.StatusAccepted {
			require.NotContains(t, holders, r.user, "user %d got two units", r.user)
			holders[r.user] = r.token
		}
	}
	return holders, codes
}

// resellThroughOther cancels the token through A and requires B to sell
// that one unit to a new user, and no more.
func resellThroughOther(t *testing.T, aURL, bURL string, saleID, cancelUser int64, cancelToken string) {
	code, body := call(t, "POST", aURL+"/api/v1/reservations/"+cancelToken+"/cancel", cancelUser, nil)
	require.Equal(t, http.StatusOK, code, "%v", body)
	require.Equal(t, "CANCELLED", body["status"])
	newcomer := testenv.UniqueUser()
	var newToken string
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		// The same request id each time: a retry never takes a second unit.
		code, body, err := do("POST", fmt.Sprintf("%s/api/v1/sales/%d/reservations", bURL, saleID), newcomer,
			map[string]any{"request_id": "newcomer-1"})
		if assert.NoError(c, err) && assert.Equal(c, http.StatusAccepted, code, "%v", body) {
			newToken, _ = body["token"].(string)
		}
	}, 20*time.Second, 300*time.Millisecond, "the released unit sells again through B")
	require.NotEmpty(t, newToken)
	// And only that one unit.
	code, body = call(t, "POST", fmt.Sprintf("%s/api/v1/sales/%d/reservations", aURL, saleID), testenv.UniqueUser(),
		map[string]any{"request_id": "late-comer-2"})
	require.Equal(t, http.StatusGone, code, "%v", body)
}

// Eight sales at once through both APIs: each sells exactly its stock.
func TestManySalesAtOnce(t *testing.T) {
	a, b := mustClusterStack(t, nil)
	const sales, stock, perSale = 8, 10, 25
	ids := make([]int64, sales)
	for i := range ids {
		ids[i] = mustLiveSale(t, a.URL, stock)
	}
	burst := cluster.Burst{
		URLs: []string{a.URL, b.URL}, SaleIDs: ids, Requests: sales * perSale, Concurrency: 32,
		UserBase: userBlock(sales * perSale), JWTSecret: []byte(config.DevJWTSecret),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := burst.Run(ctx)
	require.NoError(t, err)
	t.Log(res)
	require.Zero(t, res.Errors, "first: %v", res.FirstErr)
	require.Equal(t, sales*stock, res.Status[http.StatusAccepted], "%s", res)
	require.Equal(t, sales*(perSale-stock), res.Status[http.StatusGone], "%s", res)
	perSaleSold := map[int64]int{}
	for i := range res.Reserved {
		_, sale := burst.Target(i)
		perSaleSold[sale]++
	}
	for _, id := range ids {
		require.Equal(t, stock, perSaleSold[id], "sale %d", id)
	}
	// Every sale's orders get placed through the cluster.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, id := range ids {
			code, rep, err := do("GET", fmt.Sprintf("%s/admin/v1/sales/%d/reconciliation", b.URL, id), -1, nil)
			if !assert.NoError(c, err) || !assert.Equal(c, http.StatusOK, code, "%v", rep) {
				return
			}
			orders, _ := rep["orders"].(map[string]any)
			if !assert.EqualValues(c, stock, orders["PENDING_PAYMENT"], "%v", rep) ||
				!assert.Equal(c, true, rep["consistent"], "%v", rep) {
				return
			}
		}
	}, 90*time.Second, 500*time.Millisecond)
}
