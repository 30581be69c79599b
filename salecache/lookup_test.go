package salecache

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
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
// and its mark's answer for a user who holds nothing; it reports whether
// that answer is "sold out".
func soldOutLookup(c *Cache, id int64) bool {
	e, err := c.Get(context.Background(), id)
	if err != nil {
		return false
	}
	ans, _ := e.Check(2, "req-1")
	return ans == MarkSoldOut
}

// BenchmarkSoldOutLookup is the sold-out lookup with 1 and 10,000 sales
// cached.
func BenchmarkSoldOutLookup(b *testing.B) {
	for _, n := range []int{1, 10_000} {
		b.Run(fmt.Sprintf("sales=%d", n), soldOutLookups(n))
	}
}

// soldOutLookups runs the sold-out lookup among n cached sales from every
// core, while a refresher stores every open sale each second (a refresh
// whose directory changed).
func soldOutLookups(n int) func(b *testing.B) {
	return func(b *testing.B) {
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
		var wrong atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if !soldOutLookup(c, int64(n)) {
					wrong.Add(1)
				}
			}
		})
		b.StopTimer()
		close(stop)
		<-done
		if wrong.Load() > 0 {
			b.Fatalf("%d lookups did not answer sold out", wrong.Load())
		}
	}
}

// The sold-out path's lookup does the same work with 10,000 sales cached
// as with one: no allocation, and the sold-out answer from every core at
// once (its time, in turns, is BenchmarkSoldOutLookup's: a timed test
// fails on a loaded host).
func TestSoldOutLookupCostIsIndependentOfTheSales(t *testing.T) {
	const lookups = 20_000
	for _, n := range []int{1, 10_000} {
		c, _ := marketCache(n)
		if allocs := testing.AllocsPerRun(100, func() { soldOutLookup(c, int64(n)) }); allocs != 0 {
			t.Fatalf("%v allocations per lookup among %d sales", allocs, n)
		}
		var wg sync.WaitGroup
		var wrong atomic.Int64
		for range runtime.GOMAXPROCS(0) {
			wg.Go(func() {
				for range lookups {
					if !soldOutLookup(c, int64(n)) {
						wrong.Add(1)
					}
				}
			})
		}
		wg.Wait()
		if wrong.Load() > 0 {
			t.Fatalf("%d lookups among %d sales did not answer sold out", wrong.Load(), n)
		}
	}
}
