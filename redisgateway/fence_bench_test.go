package redisgateway_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
)

// BenchmarkFenceRedisCPU: Redis's CPU per status-cache fence with 1 and 20
// API instances' subscriptions, for the fence as a PING on the instance's
// own subscription connection (ListenStatusEvents) against a PUBLISH to a
// channel of its own that every instance's pattern subscriptions are
// matched against (the design the PING replaced). Each instance has one
// fence in flight at a time, as in production (one every 10 ms), so each
// costs Redis its own reads and writes. Metric: redis-µs/fence (INFO cpu,
// user + sys, over b.N fences); a fleet of N instances fencing pays
// N × 100 fences a second.
func BenchmarkFenceRedisCPU(b *testing.B) {
	for _, instances := range []int{1, 20} {
		for _, mode := range []string{"publish", "ping"} {
			b.Run(fmt.Sprintf("%s/instances=%d", mode, instances), func(b *testing.B) {
				benchFences(b, instances, mode == "ping")
			})
		}
	}
}

// fenceSubscriber is one simulated instance's subscription; back receives
// each fence that comes back.
type fenceSubscriber struct {
	ps      *redis.PubSub
	channel string // its fence channel (publish mode)
	back    chan struct{}
}

func benchFences(b *testing.B, instances int, ping bool) {
	rdb := testenv.MustRedis(b)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	subs := make([]*fenceSubscriber, instances)
	var drains sync.WaitGroup
	for i := range subs {
		s := &fenceSubscriber{channel: "seckill:bench-fence:" + strconv.Itoa(i), back: make(chan struct{}, 1)}
		patterns := []string{redisgateway.EventChannelPattern}
		if !ping {
			patterns = append(patterns, s.channel)
		}
		s.ps = rdb.PSubscribe(ctx, patterns...)
		for range patterns { // the psubscribe confirmations
			_, err := s.ps.Receive(ctx)
			require.NoError(b, err)
		}
		subs[i] = s
		drains.Go(func() { drainFences(ctx, s) })
	}
	defer func() {
		for _, s := range subs {
			_ = s.ps.Close()
		}
		drains.Wait()
	}()
	before := redisCPU(b, rdb)
	b.ResetTimer()
	var senders sync.WaitGroup
	var failed atomic.Value
	for i, s := range subs {
		n := b.N / instances
		if i < b.N%instances {
			n++
		}
		senders.Go(func() {
			for j := range n {
				var err error
				if ping {
					err = s.ps.Ping(ctx, "f"+strconv.Itoa(j))
				} else {
					err = rdb.Publish(ctx, s.channel, strconv.Itoa(j)).Err()
				}
				if err != nil {
					failed.Store(err)
					return
				}
				select {
				case <-s.back:
				case <-ctx.Done():
					failed.Store(ctx.Err())
					return
				}
			}
		})
	}
	senders.Wait()
	b.StopTimer()
	if err, ok := failed.Load().(error); ok {
		b.Fatal(err)
	}
	b.ReportMetric(float64((redisCPU(b, rdb)-before).Microseconds())/float64(b.N), "redis-µs/fence")
}

// drainFences reads a subscription until it closes, passing on each fence.
func drainFences(ctx context.Context, s *fenceSubscriber) {
	for {
		m, err := s.ps.Receive(ctx)
		if err != nil {
			return
		}
		switch m.(type) {
		case *redis.Pong, *redis.Message:
			s.back <- struct{}{}
		}
	}
}

// redisCPU reads Redis's CPU time (user + sys) from INFO cpu.
func redisCPU(tb testing.TB, rdb redis.UniversalClient) time.Duration {
	info, err := rdb.Info(context.Background(), "cpu").Result()
	require.NoError(tb, err)
	total := 0.0
	for _, line := range strings.Split(info, "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(tb, err)
			total += f
		}
	}
	return time.Duration(total * float64(time.Second))
}
