package salecache

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/redisgateway"
)

// marketCache is a cache holding n open sales (ids 1..n) as the
// refresher stores them, the last one sold out with one buyer; it answers
// the open sales, as the refresher's directory gives them.
func marketCache(n int) (*Cache, map[int64]*domain.Sale) {
	c := New(nil, nil, time.Second, slog.New(slog.DiscardHandler))
	now := time.Now()
	open := make(map[int64]*domain.Sale, n)
	for id := int64(1); id <= int64(n); id++ {
		open[id] = &domain.Sale{ID: id, StockTotal: 10, StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour),
			Mode: domain.ModeRedis, Control: domain.ControlActive}
	}
	c.apply(open, true, now, nil, nil, false)
	c.Cached(int64(n)).mark.Store(&redisgateway.SoldOut{Buyers: map[int64]struct{}{1: {}}, Retired: map[int64]struct{}{}})
	return c, open
}

// soldOutLookup is the sold-out path's part in the cache: the sale's entry
// and its mark's answer for a user who holds nothing.
func soldOutLookup(tb testing.TB, c *Cache, id int64) {
	e, err := c.Get(context.Background(), id)
	if err != nil {
		tb.Fatal(err)
	}
	if ans, _ := e.Check(2, "req-1"); ans != MarkSoldOut {
		tb.Fatalf("sale %d: mark answer %v", id, ans)
	}
}

// BenchmarkSoldOutLookup is the sold-out lookup with 1 and 10,000 sales
// cached, from every core, while a refresher stores every open sale each
// second (a refresh whose directory changed, or one cut from Redis).
func BenchmarkSoldOutLookup(b *testing.B) {
	for _, n := range []int{1, 10_000} {
		b.Run(fmt.Sprintf("sales=%d", n), func(b *testing.B) {
			c, open := marketCache(n)
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				tick := time.NewTicker(time.Second)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
						c.apply(open, true, time.Now(), nil, nil, false)
					}
				}
			}()
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					soldOutLookup(b, c, int64(n))
				}
			})
			b.StopTimer()
			close(stop)
			<-done
		})
	}
}

// BenchmarkWholeApply is one refresh storing every open sale.
func BenchmarkWholeApply(b *testing.B) {
	for _, n := range []int{1, 10_000} {
		b.Run(fmt.Sprintf("sales=%d", n), func(b *testing.B) {
			c, open := marketCache(n)
			b.ReportAllocs()
			for b.Loop() {
				c.apply(open, true, time.Now(), nil, nil, false)
			}
		})
	}
}
