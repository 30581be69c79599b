package status

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testkit/netproxy"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
)

// TestConcurrentStatusReadsShareCalls: 64 reads of one sale arriving
// together over a Redis 20 ms away are answered by a few scripts, not one
// each, and each gets its own token's record.
func TestConcurrentStatusReadsShareCalls(t *testing.T) {
	proxy, err := netproxy.Start(testenv.RedisAddr(), 10*time.Millisecond)
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true, PoolSize: 128})
	t.Cleanup(func() { _ = rdb.Close() })
	direct := testenv.MustRedis(t)
	saleID := testenv.UniqueUser() // an id no sale uses: its keys are this test's
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	keys := redisgateway.SaleKeys(saleID)
	require.NoError(t, direct.HSet(ctx, keys.Meta, "epoch", 1).Err())
	t.Cleanup(func() { direct.Del(context.Background(), keys.Meta, keys.Status) })
	scripts := redisgateway.New()
	const n = 64
	tokens := make([]string, n)
	for i := range tokens {
		tokens[i] = fmt.Sprintf("share-%d-%d", saleID, i)
		_, err := scripts.WriteStatus(ctx, direct, saleID, tokens[i], redisgateway.StatusRecord{Seq: 2, Epoch: 1, UserID: int64(i + 1), Status: "PENDING_PAYMENT", OrderNo: tokens[i]})
		require.NoError(t, err)
	}
	reads := newBatcher(redisgateway.NewClient(rdb).ReadStatuses, 5*time.Second)
	_, err = reads.get(ctx, saleID, tokens[0]) // the script is loaded
	require.NoError(t, err)
	reads.calls.Store(0)

	var wg sync.WaitGroup
	got := make([]redisgateway.StatusRead, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { got[i], errs[i] = reads.get(ctx, saleID, tokens[i]) })
	}
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i])
		require.NotNil(t, got[i].Record, "token %d", i)
		require.Equal(t, tokens[i], got[i].Record.OrderNo)
	}
	t.Logf("%d reads, %d scripts", n, reads.calls.Load())
	require.LessOrEqual(t, reads.calls.Load(), int64(n/4), "scripts for %d concurrent reads", n)
}

// TestBatchedStatusReadsSeeAcknowledgedWrites: a read that starts after a
// status write returned sees it, however the reads of the sale are
// batched (a read never joins a call already sent).
func TestBatchedStatusReadsSeeAcknowledgedWrites(t *testing.T) {
	rdb := testenv.MustRedis(t)
	saleID := testenv.UniqueUser()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	keys := redisgateway.SaleKeys(saleID)
	require.NoError(t, rdb.HSet(ctx, keys.Meta, "epoch", 1).Err())
	t.Cleanup(func() { rdb.Del(context.Background(), keys.Meta, keys.Status) })
	scripts := redisgateway.New()
	reads := newBatcher(redisgateway.NewClient(rdb).ReadStatuses, 5*time.Second)
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for g := range 32 {
		wg.Go(func() {
			token := fmt.Sprintf("ack-%d-%d", saleID, g)
			for seq := int64(1); seq <= 40; seq++ {
				if _, err := scripts.WriteStatus(ctx, rdb, saleID, token, redisgateway.StatusRecord{Seq: seq, Epoch: 1, UserID: 1, Status: "PENDING_PAYMENT"}); err != nil {
					errs <- err
					return
				}
				got, err := reads.get(ctx, saleID, token)
				if err != nil {
					errs <- err
					return
				}
				if got.Record == nil || got.Record.Seq < seq {
					errs <- fmt.Errorf("token %s: read %+v after writing seq %d", token, got.Record, seq)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}
