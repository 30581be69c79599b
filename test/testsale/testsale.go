// Package testsale warms sales for tests the way production does. It
// imports the sales service, so it lives under test/ beside the tests that
// use it: the harness under internal/testkit imports no service package.
package testsale

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/sales"
	"github.com/seckill/seckill/store"
)

// MustWarm loads a sale into Redis the way production does (sales.Warmup:
// its stock, buyers, metadata and inbox group) and removes its Redis keys
// at the end of the test.
func MustWarm(tb testing.TB, st *store.Store, rdb redis.UniversalClient, sale *domain.Sale) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	outcome, _, err := sales.Warmup(ctx, st, redisgateway.NewClient(rdb), nil, sale.ID)
	if err != nil {
		tb.Fatalf("testsale: warm up sale %d: %v", sale.ID, err)
	}
	if outcome != redisgateway.WarmupOK {
		tb.Fatalf("testsale: warm up sale %d: %s", sale.ID, outcome)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		// Finished first: a worker's resyncer would rebuild a live sale
		// whose keys vanished.
		if err := st.MarkFinished(ctx, sale.ID); err != nil {
			tb.Logf("testsale: clean up sale %d: %v", sale.ID, err)
		}
		if err := rdb.Del(ctx, redisgateway.SaleKeys(sale.ID).All()...).Err(); err != nil {
			tb.Logf("testsale: clean up sale %d keys: %v", sale.ID, err)
		}
	})
}

// ErrOf is the error of a call that also answers a number the test does
// not need (require.NoError(t, testsale.ErrOf(st.RecordWaitlistJoin(...)))).
func ErrOf(_ int64, err error) error { return err }
