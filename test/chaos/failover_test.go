package chaos

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testkit/proc"
)

// The failover fault on real processes: a write acknowledged before the
// cut survives, one acknowledged during the span is lost, and afterwards
// the clients' address serves the promoted data as a master whose replica
// follows it again through its link (the next failover finds the same
// shape).
func TestFailoverLosesTheWritesOfTheSpan(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	d := &Deployment{Dir: dir}
	t.Cleanup(d.Close)
	require.NoError(t, d.startRedis(ctx))
	h, err := NewRecorder(filepath.Join(dir, "history.jsonl"))
	require.NoError(t, err)
	defer h.Close()
	n := &Nemesis{D: d, H: h, Logf: t.Logf}
	masterArgs := slices.Clone(d.Redis.Args)

	for round := range 2 {
		before, during := fmt.Sprintf("before-%d", round), fmt.Sprintf("during-%d", round)
		require.NoError(t, d.RDB.Set(ctx, before, "1", 0).Err())
		require.NoError(t, proc.Poll(ctx, 10*time.Second, "the replica to catch up", func(ctx context.Context) error { return caughtUp(ctx, d.Nodes[0].direct, d.Replica.direct) }))
		p := Planned{ID: round + 1, Class: FRedisFailover}
		heal, target, _, err := n.inject(ctx, p)
		require.NoError(t, err)
		assert.Equal(t, "redis -> redis-replica", target)
		require.NoError(t, d.RDB.Set(ctx, during, "1", 0).Err(), "the master takes writes while the replica is cut off")
		time.Sleep(300 * time.Millisecond)
		require.NoError(t, heal(ctx))

		assert.Equal(t, "1", d.RDB.Get(ctx, before).Val(), "round %d: a write the replica had survives", round)
		assert.ErrorIs(t, d.RDB.Get(ctx, during).Err(), redis.Nil, "round %d: a write of the span is lost", round)
		require.NoError(t, d.RDB.Set(ctx, "after", "1", 0).Err(), "the clients' address is a master")
		require.NoError(t, linkUp(ctx, d.Replica.direct), "the replica follows the master again")
		assert.True(t, d.Redis.Running())
		assert.Equal(t, masterArgs, d.Redis.Args, "a later restart starts a master")
	}
	var notes int
	for _, e := range h.Events() {
		if e.Kind == KindNote && e.Op == FRedisFailover {
			notes++
			t.Log(e.Detail)
			assert.Contains(t, e.Detail, "bytes of writes lost")
		}
	}
	assert.Equal(t, 2, notes)
}

// A cluster has no replica: its runs draw every class but the failover.
func TestFaultsForACluster(t *testing.T) {
	c := Options{Redis: RedisCluster}.FaultsFor(AllFaults)
	assert.NotContains(t, c, FRedisFailover)
	assert.Equal(t, Options{}.FaultsFor(slices.DeleteFunc(slices.Clone(AllFaults), func(f string) bool { return f == FRedisFailover })), c)
	assert.Contains(t, AllFaults, FRedisFailover, "AllFaults itself is left alone")
	for _, p := range Schedule(3, 10*time.Minute, c) {
		assert.NotEqual(t, FRedisFailover, p.Class)
	}
}

// A crowd arrives just before a failover's cut, so the writes the replica
// misses include a burst of holds.
func TestACrowdPrecedesAFailover(t *testing.T) {
	plan := []Planned{{At: 10 * time.Second, Class: FMySQLKill}, {At: 30 * time.Second, Class: FRedisFailover}}
	assert.Equal(t, []time.Duration{0, 30*time.Second - crowdLead}, CrowdTimes(plan))
}
