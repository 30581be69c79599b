package bench_test

import (
	"context"
	"testing"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/test/bench"
)

// Scenario 4 as Go benchmarks, against the test services:
//
//	go test -run '^$' -bench Deduct ./test/bench/
//
// b.N orders are placed by 64 concurrent deducters (store.PlaceOrder);
// their reservations are recorded before the timer starts. The stock is
// far above b.N, as in scenario 4: no bucket runs empty.
func BenchmarkDeduct1Bucket(b *testing.B)   { benchmarkDeduct(b, 1) }
func BenchmarkDeduct16Buckets(b *testing.B) { benchmarkDeduct(b, 16) }

func benchmarkDeduct(b *testing.B, buckets int) {
	const workers = 64
	st := testenv.MustStore(b)
	sale := testenv.MustSale(b, st, 1_000_000, func(s *domain.Sale) { s.Buckets = buckets })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	toks, err := bench.RecordReservations(ctx, st, []byte("bench-test-key"), sale.ID, testenv.UniqueUser()*1_000_000, b.N, workers)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	res, err := bench.Deduct(ctx, st, b.Name(), toks, workers, 10*time.Minute)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	if res.Requests != int64(b.N) {
		b.Fatalf("placed %d orders of %d", res.Requests, b.N)
	}
	b.ReportMetric(res.RPS, "orders/s")
	b.ReportMetric(res.P99MS, "p99-ms")
}
