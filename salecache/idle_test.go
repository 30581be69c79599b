package salecache

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
)

// BenchmarkIdleRefresh is one refresh of a cache with idle open sales,
// 10 against 10,000: what an API pays each second for the sales it holds
// (a sixtieth of them read from Redis each refresh, the directory read
// in full once a minute). Allocations per refresh are its measure: the
// API's answers pay for them in its collections.
func BenchmarkIdleRefresh(b *testing.B) {
	for _, n := range []int{10, 10_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			ctx := context.Background()
			st := testenv.MustStore(b)
			ids := testenv.MustIdleSales(b, st, n)
			_, err := st.DB.NewUpdate().Table("sales").Set("changed_at = NOW(3) - INTERVAL 1 HOUR").Where("id IN (?)", bun.List(ids)).Exec(ctx)
			require.NoError(b, err)
			c := New(st, redisgateway.NewClient(testenv.MustRedis(b)), 0, slog.New(slog.DiscardHandler))
			require.NoError(b, c.Refresh(ctx))
			require.NoError(b, c.Refresh(ctx))
			b.ReportAllocs()
			for b.Loop() {
				require.NoError(b, c.Refresh(ctx))
			}
		})
	}
}
