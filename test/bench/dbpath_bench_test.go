package bench_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

// The database path's transaction alone (store.ReserveInDB), against the
// test services, at the API's default bound of 16 in flight on a sale of
// 16 buckets whose quota never runs out (BENCH_IN_FLIGHT sets the bound):
//
//	go test -run '^$' -bench ReserveInDB ./test/bench/
//
// It reports reservations/s and the p99 of one reservation; scenario 5
// measures the same path through the API.
func BenchmarkReserveInDB(b *testing.B) {
	inFlight := 16
	if n, err := strconv.Atoi(os.Getenv("BENCH_IN_FLIGHT")); err == nil && n > 0 {
		inFlight = n // e.g. 1: one transaction's own latency
	}
	st := testenv.MustStore(b)
	sale := testenv.MustSale(b, st, 1_000_000, func(s *domain.Sale) { s.Buckets = 16 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := st.RecordRedisStock(ctx, sale.ID, 1_000_000, time.Now()); err != nil {
		b.Fatal(err)
	}
	if _, err := st.SwitchToDatabase(ctx, sale.ID, 0); err != nil {
		b.Fatal(err)
	}
	base := testenv.UniqueUser() * 1_000_000
	input := func(i int64) domain.OrderInput {
		user := base + i
		req := fmt.Sprintf("bench-db-%d", user)
		return domain.DatabasePathInput(domain.DeriveToken([]byte("bench-test-key"), sale.ID, user, req), sale.ID, user, req)
	}
	if _, _, err := st.ReserveInDB(ctx, input(0)); err != nil { // opens the quota
		b.Fatal(err)
	}
	b.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = st.DB.ExecContext(c, "UPDATE outbox SET dispatched_at = NOW(3) WHERE sale_id = ?", sale.ID)
	})
	var (
		next  atomic.Int64
		mu    sync.Mutex
		lat   []time.Duration
		errs  atomic.Int64
		first atomic.Value
		wg    sync.WaitGroup
	)
	next.Store(1)
	b.ResetTimer()
	start := time.Now()
	for range inFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for {
				i := next.Add(1) - 1
				if i > int64(b.N) {
					break
				}
				t0 := time.Now()
				c, cancel := context.WithTimeout(ctx, 10*time.Second)
				_, _, err := st.ReserveInDB(c, input(i))
				cancel()
				if err != nil {
					errs.Add(1)
					first.CompareAndSwap(nil, err)
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if n := errs.Load(); n > 0 {
		b.Fatalf("%d of %d reservations failed, first: %v", n, b.N, first.Load())
	}
	slices.Sort(lat)
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "res/s")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
}
