package api

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/authtoken"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

// With SECKILL_FALLBACK_IN_FLIGHT transactions of the database path in
// flight, the next reservation is refused at once (429 with Retry-After),
// not queued behind them; once one finishes the path sells again. Before,
// every request the rate admitted waited for the database.
func TestDatabasePathRefusesAtOnceWhenSaturated(t *testing.T) {
	h := MustHarness(t, func(c *config.Config) {
		c.FallbackRPS = 1000
		c.FallbackInFlight = 1
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sale := h.MustWarmSale(10)
	require.NoError(t, h.st.RecordRedisStock(ctx, sale.ID, 10, time.Now()))
	_, err := h.st.SwitchToDatabase(ctx, sale.ID, 0)
	require.NoError(t, err)
	// This instance learns of the switch from its cache's refresh (one
	// loop: no refresh that read the sale before the switch is left).
	require.Eventually(t, func() bool {
		e, err := h.services.Cache.Get(ctx, sale.ID)
		return err == nil && e.Sale().Mode == domain.ModeDatabase
	}, 10*time.Second, 20*time.Millisecond)
	base := testenv.UniqueUser() * 1000
	reserveAs := func(user int64) response {
		return h.reserve(sale.ID, h.MustToken(user, authtoken.RoleUser), "saturated-1")
	}

	// Another transaction holds the sale row: the first reservation's
	// transaction waits for it, holding the one slot.
	tx, err := h.st.DB.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	_, err = tx.ExecContext(ctx, "UPDATE sales SET title = title WHERE id = ?", sale.ID)
	require.NoError(t, err)
	first := make(chan response, 1)
	go func() { first <- reserveAs(base + 1) }()
	require.Eventually(t, func() bool { return h.services.Guard.InFlight() == 1 }, 10*time.Second, 5*time.Millisecond)

	r := reserveAs(base + 2)
	require.Equal(t, 429, r.Status, string(r.Body))
	require.Equal(t, "1", r.Header.Get("Retry-After"))
	select {
	case r := <-first:
		t.Fatalf("the first reservation answered %d while the sale row was held", r.Status)
	default:
	}

	require.NoError(t, tx.Rollback())
	require.Equal(t, 202, (<-first).Status)
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Zero(c, h.services.Guard.InFlight()) }, 5*time.Second, 5*time.Millisecond)
	require.Equal(t, 202, reserveAs(base+2).Status, "with a slot free the refused buyer buys")
}

// SECKILL_API_STARTS_REDIS_ORDERS=off (the default) leaves a Redis-path
// 202's start to the worker's inbox relay (which reads the script's inbox
// entry at once): the API starting it too costs a second start call and a
// describe on the Temporal server. On, the API starts it at once.
func TestRedisPathLeavesTheStartToTheRelay(t *testing.T) {
	for _, on := range []bool{false, true} {
		h := MustHarness(t, func(c *config.Config) { c.APIStartsRedisOrders = on })
		sale := h.MustWarmSale(5)
		r := h.reserve(sale.ID, h.MustToken(testenv.UniqueUser(), authtoken.RoleUser), "relay-starts-1")
		require.Equal(t, 202, r.Status, string(r.Body))
		handed := testutil.ToFloat64(h.services.Metrics.Starter.Of("queued")) +
			testutil.ToFloat64(h.services.Metrics.Starter.Of("no_temporal")) +
			testutil.ToFloat64(h.services.Metrics.Starter.Of("deferred"))
		if on {
			require.EqualValues(t, 1, handed, "SECKILL_API_STARTS_REDIS_ORDERS=on")
		} else {
			require.Zero(t, handed, "the API started a Redis-path order")
		}
	}
}
