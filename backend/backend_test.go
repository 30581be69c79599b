package backend_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/backend"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/store"
)

// Ping answers while the database does and fails, naming it, once it is
// gone.
func TestPing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, backend.New(testenv.MustStore(t)).Ping(ctx))

	closed, err := store.Open(ctx, testenv.MySQLDSN())
	require.NoError(t, err)
	require.NoError(t, closed.Close())
	require.ErrorContains(t, backend.New(closed).Ping(ctx), "ping the database")
}

// Build wires services that run once started: the refresher fills the
// sale cache from the database and the fleet observer has looked; Stop
// ends their background work within its deadline.
func TestBuiltServicesStartAndStop(t *testing.T) {
	st := testenv.MustStore(t)
	sale := testenv.MustSale(t, st, 5)
	sv := backend.Build(backend.Deps{Config: testenv.Config(t), Store: st, Redis: redisgateway.NewClient(testenv.MustRedis(t))})
	require.Zero(t, sv.Cache.RefreshQueries(), "nothing runs before Start")
	sv.Start()
	require.Eventually(t, func() bool { return sv.Cache.RefreshQueries() > 0 }, 10*time.Second, 10*time.Millisecond,
		"the refresher reads the sales")
	require.Eventually(t, func() bool {
		return slices.ContainsFunc(sv.Cache.Sales(), func(s *domain.Sale) bool { return s.ID == sale.ID })
	}, 10*time.Second, 10*time.Millisecond, "the cache holds the open sale")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stopped := make(chan struct{})
	go func() { sv.Stop(ctx); close(stopped) }()
	select {
	case <-stopped:
	case <-ctx.Done():
		t.Fatal("Stop did not end the background work within its deadline")
	}
}

// Without Temporal the on-demand reconciliation answers 503, Retry-After
// 5: holds and releases are judged against their workflows.
func TestReconcileNeedsTemporal(t *testing.T) {
	st := testenv.MustStore(t)
	sale := testenv.MustSale(t, st, 5)
	sv := backend.Build(backend.Deps{Config: testenv.Config(t), Store: st, Redis: redisgateway.NewClient(testenv.MustRedis(t))})
	_, err := sv.Reconcile(t.Context(), sale.ID, false)
	var de *domain.Error
	require.ErrorAs(t, err, &de)
	require.Equal(t, domain.EUnavailable, de.Code)
	require.Equal(t, 5, de.RetryAfter)

	_, err = sv.Reconcile(t.Context(), sale.ID+1_000_000, false)
	require.Equal(t, domain.ENotFound, domain.ErrorCode(err), "an unknown sale is not found before Temporal is asked")
}
