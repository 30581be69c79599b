package store_test

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

// Database-path reservations of a crowd, on their own (a read and a
// script each) against grouped (ReserveInDB), in the same run: each round
// makes the same number of reservations each way from 16 goroutines (the
// default SECKILL_FALLBACK_IN_FLIGHT), and the benchmark reports both
// rates, their ratio, and the p99 of each way's reservations.
func BenchmarkDatabasePathGroupedAgainstAlone(b *testing.B) {
	st := testenv.MustStore(b)
	const perRound, workers = 320, 16
	sale := mustDatabaseSale(b, st, int64(2*perRound*(b.N+1)+1), 16)
	base := testenv.UniqueUser() * 10_000_000
	var user atomic.Int64
	if _, _, err := st.ReserveInDB(ctx(b), dbInput(sale, base, "bench-open")); err != nil { // opens the quota
		b.Fatal(err)
	}
	round := func(reserve func(in domain.OrderInput) error, lat *[]time.Duration) time.Duration {
		var wg sync.WaitGroup
		var next atomic.Int64
		var mu sync.Mutex
		start := time.Now()
		for range workers {
			wg.Go(func() {
				for next.Add(1) <= perRound {
					n := base + user.Add(1)
					t0 := time.Now()
					if err := reserve(dbInput(sale, n, fmt.Sprintf("bench-%d", n))); err != nil {
						b.Errorf("reservation of user %d: %v", n, err)
						return
					}
					mu.Lock()
					*lat = append(*lat, time.Since(t0))
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	alone := func(in domain.OrderInput) error { _, _, err := st.ReserveInDBAlone(ctx(b), in); return err }
	grouped := func(in domain.OrderInput) error { _, _, err := st.ReserveInDB(ctx(b), in); return err }
	var tAlone, tGrouped time.Duration
	var latAlone, latGrouped []time.Duration
	groups0, grouped0 := st.DBGroupsSent()
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 { // alternate which goes first
			tAlone += round(alone, &latAlone)
			tGrouped += round(grouped, &latGrouped)
		} else {
			tGrouped += round(grouped, &latGrouped)
			tAlone += round(alone, &latAlone)
		}
	}
	b.StopTimer()
	groups, reservations := st.DBGroupsSent()
	perSec := func(d time.Duration) float64 { return float64(perRound*b.N) / d.Seconds() }
	b.ReportMetric(perSec(tAlone), "alone-reservations/s")
	b.ReportMetric(perSec(tGrouped), "grouped-reservations/s")
	b.ReportMetric(tAlone.Seconds()/tGrouped.Seconds(), "grouped/alone-rate")
	b.ReportMetric(float64(p99(latAlone).Microseconds())/1000, "alone-p99-ms")
	b.ReportMetric(float64(p99(latGrouped).Microseconds())/1000, "grouped-p99-ms")
	b.ReportMetric(float64(reservations-grouped0)/float64(max(groups-groups0, 1)), "reservations/group")
}

// p99 is the 99th percentile of d (sorted in place).
func p99(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[(len(d)*99)/100]
}
