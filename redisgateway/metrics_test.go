package redisgateway_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
)

// TestScriptLatencyHook checks that the hook times each script under its
// own name, from the start at zero, and leaves other commands alone.
func TestScriptLatencyHook(t *testing.T) {
	f := mustWarmSale(t, 3)
	rdb := testenv.MustRedis(t)
	reg := prometheus.NewRegistry()
	hook, err := f.scripts.ScriptLatencyHook(reg)
	require.NoError(t, err)
	rdb.AddHook(hook)

	count := func(script, result string) uint64 {
		t.Helper()
		mfs, err := reg.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() != "seckill_redis_script_duration_seconds" {
				continue
			}
			for _, m := range mf.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["script"] == script && labels["result"] == result {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
		t.Fatalf("no series for script %s, result %s", script, result)
		return 0
	}
	// Every script's series exists before its first call.
	for _, s := range []string{"reserve", "release", "advance", "warmup", "adjust", "snapshot", "repair_stock", "rebuild"} {
		require.Zero(t, count(s, "ok"), s)
	}
	series := testutil.CollectAndCount(reg, "seckill_redis_script_duration_seconds")

	require.NoError(t, rdb.Ping(ctx(t)).Err())
	_, err = f.scripts.Reserve(ctx(t), rdb, redisgateway.ReserveArgs{SaleID: f.saleID, UserID: 1, RequestID: "hook-1", Token: "tok-hook-1", Epoch: 1})
	require.NoError(t, err)
	_, _, err = f.scripts.Adjust(ctx(t), rdb, f.saleID, 1, "")
	require.NoError(t, err)
	_, err = f.scripts.Reserve(ctx(t), rdb, redisgateway.ReserveArgs{SaleID: f.saleID, UserID: 2, RequestID: "hook-2", Token: "tok-hook-2", Epoch: 1})
	require.NoError(t, err)

	require.EqualValues(t, 2, count("reserve", "ok"))
	require.EqualValues(t, 1, count("adjust", "ok"))
	require.Zero(t, count("release", "ok"))
	require.Equal(t, series, testutil.CollectAndCount(reg, "seckill_redis_script_duration_seconds"), "PING made a series")
}
