package api

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/salecache"
)

// A scrape's size follows the sales under a fault, not the sales live:
// with ten thousand on the Redis path, /metrics once carried ten thousand
// series of 0 and every scrape built them all.
func TestOnlySalesOffTheRedisPathHaveADatabaseModeSeries(t *testing.T) {
	cache := salecache.New(nil, nil, time.Second, slog.New(slog.DiscardHandler))
	for id := int64(1); id <= 1000; id++ {
		cache.Put(&domain.Sale{ID: id, Mode: domain.ModeRedis})
	}
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(newSaleModeCollector(cache)))
	n, err := testutil.GatherAndCount(reg, "seckill_sale_database_mode")
	require.NoError(t, err)
	require.Zero(t, n, "a sale on the Redis path has no series")

	cache.Put(&domain.Sale{ID: 7, Mode: domain.ModeDatabase})
	cache.Put(&domain.Sale{ID: 9, Mode: domain.ModeResync})
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP seckill_sale_database_mode 1 while the sale takes reservations on the database path (or is switching back); absent for a sale on the Redis path.
# TYPE seckill_sale_database_mode gauge
seckill_sale_database_mode{sale="7"} 1
seckill_sale_database_mode{sale="9"} 1
`), "seckill_sale_database_mode"))
}
