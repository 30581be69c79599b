package store_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

// The records of a crowd's new holds, lone (a script and a commit each, as
// before groups) against grouped (RecordRedisHold), in the same run: each
// round records the same number of holds each way from 32 goroutines, and
// the benchmark reports both rates and their ratio.
func BenchmarkHoldRecordsGroupedAgainstAlone(b *testing.B) {
	st := testenv.MustStore(b)
	const perRound, workers = 320, 32
	sale := testenv.MustSale(b, st, int64(2*perRound*(b.N+1)), func(s *domain.Sale) { s.Buckets = 16 })
	base := testenv.UniqueUser() * 10_000_000
	var seq atomic.Int64
	round := func(record func(in domain.OrderInput, seq int64) (bool, error)) time.Duration {
		var wg sync.WaitGroup
		var next atomic.Int64
		start := time.Now()
		for range workers {
			wg.Go(func() {
				for next.Add(1) <= perRound {
					n := seq.Add(1)
					ok, err := record(redisHold(sale, base+n, fmt.Sprintf("bench-%d", n)), n)
					if err != nil || !ok {
						b.Errorf("hold %d: recorded %v, %v", n, ok, err)
						return
					}
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	alone := func(in domain.OrderInput, n int64) (bool, error) {
		ok, err := st.RecordRedisHoldAlone(ctx(b), in, sale.ModeEpoch, n)
		if ok || err != nil {
			return ok, err
		}
		// What the script does not decide (a lock waited on past its
		// bound), the transaction does, as a lone record's would.
		rec, err := st.RecordRedisHold(ctx(b), in, sale.ModeEpoch, 0, true)
		return rec.Promised(), err
	}
	grouped := func(in domain.OrderInput, n int64) (bool, error) {
		rec, err := st.RecordRedisHold(ctx(b), in, sale.ModeEpoch, n, true)
		return rec.Promised(), err
	}
	var tAlone, tGrouped time.Duration
	groups0, grouped0 := st.HoldGroupsSent()
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 { // alternate which goes first
			tAlone += round(alone)
			tGrouped += round(grouped)
		} else {
			tGrouped += round(grouped)
			tAlone += round(alone)
		}
	}
	b.StopTimer()
	groups, holds := st.HoldGroupsSent()
	holdsPerSec := func(d time.Duration) float64 { return float64(perRound*b.N) / d.Seconds() }
	b.ReportMetric(holdsPerSec(tAlone), "alone-holds/s")
	b.ReportMetric(holdsPerSec(tGrouped), "grouped-holds/s")
	b.ReportMetric(tAlone.Seconds()/tGrouped.Seconds(), "grouped/alone-rate")
	b.ReportMetric(float64(holds-grouped0)/float64(max(groups-groups0, 1)), "holds/group")
}
