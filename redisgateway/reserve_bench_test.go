package redisgateway_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/redisgateway"
)

// reserveCase is one variant of an in-stock reservation the bench repeats.
type reserveCase struct {
	name    string
	f       *fixture
	notInDB bool // skip the retired-user lookup, as a caller that asked MySQL
	calls   int64
	usec    int64 // Redis's time in EVALSHA (INFO commandstats)
	spent   time.Duration
}

// BenchmarkReserveChecks: what the reserve script's later checks cost on
// its hot path (an in-stock reservation), as ratios to the script without
// them in the same run: the retired-user lookup (SISMEMBER on a set of
// 10,000 users, skipped when the caller has asked MySQL) and the waitlist
// gate (ZCARD, run once the sale has sold out and a unit came back). The
// cases alternate in blocks of 100 reservations; each sums Redis's own
// time in EVALSHA (INFO commandstats, so nothing else running on the Redis
// may call EVALSHA) and the round trip. <case>_vs_base: 1.0 is free.
func BenchmarkReserveChecks(b *testing.B) {
	const stock, block = 1 << 30, 100
	base, retired, gated := mustWarmSale(b, stock), mustWarmSale(b, stock), mustWarmSale(b, stock)
	members := make([]any, 10_000)
	for i := range members {
		members[i] = -int64(i) - 1 // no reserving user is among them
	}
	require.NoError(b, retired.rdb.SAdd(ctx(b), retired.keys.Retired, members...).Err())
	require.NoError(b, gated.rdb.HSet(ctx(b), gated.keys.Meta, "drained", "1").Err())
	cases := []*reserveCase{
		{name: "base", f: base, notInDB: true},
		{name: "retired", f: retired},
		{name: "waitlist", f: gated, notInDB: true},
	}
	user := int64(0)
	b.ResetTimer()
	for done, turn := 0, 0; done < b.N; done, turn = done+block, turn+1 {
		for j := range cases {
			c := cases[(turn+j)%len(cases)] // each case first in turn
			before := evalshaUsec(b, c.f.rdb)
			for range block {
				user++
				c.reserve(b, user)
			}
			c.usec += evalshaUsec(b, c.f.rdb) - before
		}
	}
	b.StopTimer()
	perCall := func(c *reserveCase) float64 { return float64(c.usec) / float64(c.calls) }
	for _, c := range cases[1:] {
		b.ReportMetric(perCall(c)/perCall(cases[0]), c.name+"_redis_vs_base")
		b.ReportMetric(float64(c.spent)/float64(c.calls)/(float64(cases[0].spent)/float64(cases[0].calls)), c.name+"_rtt_vs_base")
	}
	b.ReportMetric(perCall(cases[0]), "base_redis_us")
	b.ReportMetric(float64(cases[0].spent.Microseconds())/float64(cases[0].calls), "base_rtt_us")
}

func (c *reserveCase) reserve(b *testing.B, user int64) {
	req := "bench-" + strconv.FormatInt(user, 10)
	start := time.Now()
	r, err := c.f.scripts.Reserve(context.Background(), c.f.rdb, redisgateway.ReserveArgs{
		SaleID: c.f.saleID, UserID: user, RequestID: req, Epoch: 1, NotInDatabase: c.notInDB,
		Token: domain.DeriveToken([]byte("k"), c.f.saleID, user, req),
	})
	c.spent += time.Since(start)
	c.calls++
	if err != nil {
		b.Fatalf("%s: %v", c.name, err)
	}
	if r.Outcome != redisgateway.OutcomeOK {
		b.Fatalf("%s: outcome %s", c.name, r.Outcome)
	}
}

// evalshaUsec reads the microseconds Redis has spent in EVALSHA.
func evalshaUsec(tb testing.TB, rdb redis.UniversalClient) int64 {
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	require.NoError(tb, err)
	for _, line := range strings.Split(info, "\r\n") {
		stats, ok := strings.CutPrefix(line, "cmdstat_evalsha:")
		if !ok {
			continue
		}
		for _, kv := range strings.Split(stats, ",") {
			if v, ok := strings.CutPrefix(kv, "usec="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				require.NoError(tb, err)
				return n
			}
		}
	}
	return 0
}
