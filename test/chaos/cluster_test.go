package chaos

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/redisgateway"
)

// KeySlot agrees with CLUSTER KEYSLOT (the values of Redis's documentation
// and of the CRC16 check string) and hashes only the first non-empty tag.
func TestKeySlot(t *testing.T) {
	for key, slot := range map[string]int{
		"123456789":     0x31C3 % 16384,
		"somekey":       11058,
		"foo{hash_tag}": 2515,
		"foo":           12182,
	} {
		assert.Equal(t, slot, KeySlot(key), key)
	}
	assert.Equal(t, KeySlot("hash_tag"), KeySlot("foo{hash_tag}"))
	assert.NotEqual(t, KeySlot("bar"), KeySlot("foo{}{bar}"), "an empty tag: the whole key")
	assert.Equal(t, KeySlot("{bar"), KeySlot("foo{{bar}}zap"))
	// Every key of a sale lives in the slot of its tag.
	k := redisgateway.SaleKeys(7)
	for _, key := range k.All() {
		assert.Equal(t, KeySlot("sale:7"), KeySlot(key), key)
	}
}

func TestMasterOf(t *testing.T) {
	addrs := []string{"127.0.0.1:1001", "127.0.0.1:1002", "127.0.0.1:1003"}
	slots := []redis.ClusterSlot{
		{Start: 10923, End: 16383, Nodes: []redis.ClusterNode{{Addr: addrs[2]}}},
		{Start: 0, End: 5460, Nodes: []redis.ClusterNode{{Addr: addrs[0]}}},
		{Start: 5461, End: 10922, Nodes: []redis.ClusterNode{{Addr: addrs[1]}, {Addr: addrs[0]}}}, // a replica listed after
	}
	for slot, want := range map[int]int{0: 0, 5460: 0, 5461: 1, 10922: 1, 10923: 2, 16383: 2} {
		got, err := masterOf(slots, slot, addrs)
		require.NoError(t, err, slot)
		assert.Equal(t, want, got, slot)
	}
	_, err := masterOf(slots[:2], 6000, addrs)
	assert.ErrorContains(t, err, "not served")
	_, err = masterOf(slots, 0, addrs[1:])
	assert.ErrorContains(t, err, "not a node of the deployment")
}

// A Redis fault acts on the single Redis, or on the master of the sale its
// pick names, whatever the mode: the schedule is the same.
func TestRedisNodeOfAPick(t *testing.T) {
	single := &RedisNode{Proc: &Proc{Name: "redis"}}
	n := &Nemesis{D: &Deployment{Nodes: []*RedisNode{single}}, Sales: []int64{1, 2, 3}}
	got, what := n.redisNode(5)
	assert.Same(t, single, got)
	assert.Empty(t, what)

	r1, r2, r3 := &RedisNode{Proc: &Proc{Name: "redis1"}}, &RedisNode{Proc: &Proc{Name: "redis2"}}, &RedisNode{Proc: &Proc{Name: "redis3"}}
	n = &Nemesis{D: &Deployment{Cluster: true, Nodes: []*RedisNode{r1, r2, r3}}, Sales: []int64{1, 2, 3},
		SaleNodes: map[int64]*RedisNode{1: r3, 2: r3, 3: r1}}
	got, what = n.redisNode(4) // sale 2
	assert.Same(t, r3, got)
	assert.Equal(t, " (master of sale 2)", what)
	got, _ = n.redisNode(2) // sale 3
	assert.Same(t, r1, got)
}

func TestReportName(t *testing.T) {
	assert.Equal(t, "4", Options{Seed: 4}.ReportName())
	assert.Equal(t, "4", Options{Seed: 4, Redis: RedisSingle}.ReportName())
	assert.Equal(t, "cluster-4", Options{Seed: 4, Redis: RedisCluster}.ReportName())
}
