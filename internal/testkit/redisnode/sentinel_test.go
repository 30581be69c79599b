package redisnode

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The write loss of a Sentinel failover, on real processes: a write the
// replica received survives the master's SIGKILL, one the master
// acknowledged after the replica's link was cut is lost, and a go-redis
// failover client follows the sentinels to the promoted replica.
func TestSentinelFailoverLosesWhatTheReplicaMissed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	g, err := StartSentinelGroup(ctx, SentinelOptions{Dir: t.TempDir(), Password: "data-secret", SentinelPassword: "sentinel-secret"})
	require.NoError(t, err)
	t.Cleanup(g.Stop)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(g.Logs())
		}
	})
	master, replica := g.Nodes()
	named, err := g.Master(ctx)
	require.NoError(t, err)
	require.Equal(t, master, named, "the sentinels name the node started as master")

	rdb := redis.NewFailoverClient(g.FailoverOptions())
	t.Cleanup(func() { _ = rdb.Close() })
	require.NoError(t, rdb.Set(ctx, "kept", "1", 0).Err())
	acked, err := rdb.Wait(ctx, 1, 5*time.Second).Result()
	require.NoError(t, err)
	require.EqualValues(t, 1, acked, "the replica acknowledges the first write")

	require.NoError(t, g.CutReplication(ctx))
	require.NoError(t, rdb.Set(ctx, "lost", "1", 0).Err(), "the master still takes writes")
	acked, err = rdb.Wait(ctx, 1, 300*time.Millisecond).Result()
	require.NoError(t, err)
	require.EqualValues(t, 0, acked, "no replica has the second write")

	require.NoError(t, g.Kill(master))
	promoted, err := g.WaitForPromotion(ctx, master)
	require.NoError(t, err)
	require.Equal(t, replica, promoted)

	// The client's connections to the dead master fail; the next ones are
	// dialled to whatever the sentinels name.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.NoError(c, rdb.Set(ctx, "after", "1", 0).Err())
	}, 10*time.Second, 100*time.Millisecond)
	require.Equal(t, "1", rdb.Get(ctx, "kept").Val(), "the write the replica had")
	require.EqualValues(t, 0, rdb.Exists(ctx, "lost").Val(), "the write only the master had")
	info, err := rdb.Info(ctx, "server").Result()
	require.NoError(t, err)
	port, err := portOf(promoted)
	require.NoError(t, err)
	require.Contains(t, info, fmt.Sprintf("tcp_port:%d\r\n", port), "the client talks to the promoted replica")
	role, err := rdb.Do(ctx, "ROLE").Slice()
	require.NoError(t, err)
	require.Equal(t, "master", role[0])
}
