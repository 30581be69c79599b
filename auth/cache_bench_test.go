package auth

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/proc"
)

// BenchmarkVerifier compares, in one run, verification with the cache and
// without: a caller repeating one token (the cache's case) and a stream of
// distinct tokens (its worst case: every call a miss that hashes, looks up
// and writes). The ratios of the sub-benchmarks' ns/op are the figures;
// cpu-ns/op, the process's CPU time per call, is the steadier one on a
// machine shared with other work, which stretches ns/op but not CPU time.
func BenchmarkVerifier(b *testing.B) {
	secret := []byte("bench-secret-of-thirty-two-bytes")
	toks := make([]string, 1<<14)
	for i := range toks {
		toks[i] = mint(b, secret, int64(i+1)<<20, time.Hour)
	}
	for _, bc := range []struct {
		name     string
		cache    int
		distinct bool
	}{
		{"repeated/cache", 1 << 17, false},
		{"repeated/none", 0, false},
		// A cache of a sixteenth of the tokens cycled in order: each
		// token was evicted long before it comes round again.
		{"distinct/cache", len(toks) / 16, true},
		{"distinct/none", 0, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			v, checks := countedVerifier(b, Secrets{User: [][]byte{secret}}, bc.cache)
			now := time.Now()
			i := 0
			b.ReportAllocs()
			cpu0 := processCPU(b)
			for b.Loop() {
				raw := toks[0]
				if bc.distinct {
					raw = toks[i%len(toks)]
					i++
				}
				if _, err := v.Verify(raw, now); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(checks.Load())/float64(b.N), "verifications/op")
		})
	}
}

// processCPU is the CPU time the process has used.
func processCPU(b *testing.B) time.Duration {
	cpu, err := proc.SelfCPU()
	if err != nil {
		b.Fatal(err)
	}
	return cpu
}

// BenchmarkVerifierBurst verifies distinct users' tokens from 256
// goroutines, as a burst's first requests do: nearly every one misses and
// writes, contending for the shards' locks.
func BenchmarkVerifierBurst(b *testing.B) {
	secret := []byte("bench-secret-of-thirty-two-bytes")
	toks := make([]string, 4096)
	for i := range toks {
		toks[i] = mint(b, secret, int64(i+1), time.Hour)
	}
	v, err := NewVerifier(Secrets{User: [][]byte{secret}}, len(toks)/4)
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	var next atomic.Int64
	b.SetParallelism(128)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1)
			if _, err := v.Verify(toks[i%int64(len(toks))], now); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
