package faults

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/redisgateway"
)

// 5b. Temporal stays down much longer than the relay's dead-letter window
// (shortened by configuration: 1 delivery, 3 s) while reservations keep
// coming. Nothing is dead-lettered; once Temporal is back every hold
// starts and reaches PENDING_PAYMENT (its order exists), and the sale is
// sound.
func testTemporalLongOutage(t *testing.T) {
	tsrv, taddr := MustOwnTemporal(t)
	s := MustStack(t, stackOpts{temporalAddr: taddr, workerEnv: map[string]string{
		"SECKILL_RELAY_MAX_DELIVERY": "1",
		"SECKILL_RELAY_DEAD_AFTER":   "3s",
		"SECKILL_RELAY_MIN_IDLE":     "1s",
	}})
	s.MustSale(20, 3)
	before := s.burst(2)
	require.NotEmpty(t, before)
	// The worker is up and relaying (a worker that starts while Temporal
	// is down exits, for its supervisor to restart; not this scenario).
	waitPlaced(t, s, before)
	tsrv.Kill(t)
	// Traffic goes on for the whole outage: 20 s, against a window of 1
	// delivery and 3 s. A start against a dead Temporal fails after its
	// 10 s timeout; before the fix the first reclaim after it (the second
	// delivery) dead-lettered every hold older than 3 s.
	outage := time.Now()
	during := map[int64]string{}
	for time.Since(outage) < 20*time.Second {
		for u, tok := range s.burst(1) {
			during[u] = tok
		}
		time.Sleep(1500 * time.Millisecond)
	}
	require.NotEmpty(t, during, "the API accepts while Temporal is down")
	dead := func() int64 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		n, err := s.rdb.XLen(ctx, redisgateway.SaleKeys(s.saleID).Dead).Result()
		require.NoError(t, err)
		return n
	}
	require.Zero(t, dead(), "nothing dead-lettered while Temporal was down")
	tsrv.Start(t)
	after := s.burst(2)

	// Every hold of the outage gets its order (PENDING_PAYMENT, then its
	// short window expires it).
	all := map[int64]string{}
	for _, m := range []map[int64]string{before, during, after} {
		for u, tok := range m {
			all[u] = tok
		}
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, tok := range all {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			r, err := s.st.GetReservation(ctx, tok)
			cancel()
			if assert.NoError(c, err, "token %s", tok) {
				assert.NotEmpty(c, r.OrderNo, "token %s reached PENDING_PAYMENT (has an order)", tok)
				assert.NotEqual(c, domain.StatusFailed, r.Status, "token %s", tok)
			}
		}
	}, 90*time.Second, 500*time.Millisecond)
	s.checkIdle("5b temporal down 20s (DLQ 3s)")
	require.Zero(t, dead(), "nothing dead-lettered after the recovery")
}

// 9. An operator terminates the workflows of PENDING_PAYMENT orders mid-sale
// (the runbook says not to). Two are paid at once by their users: the
// payment finds the workflow closed, a new run takes the order over, and it
// is PAID. The other two are left: reconciliation (with repair, as the sale
// workflow runs it) gives them a new run or, once pay_by has passed,
// releases them. The sale stays sound and sells on.
func testOrderWorkflowsTerminated(t *testing.T) {
	s := MustStack(t, stackOpts{})
	s.repair = true
	s.MustSale(6, 8)
	got := s.burst(4)
	require.Len(t, got, 4)
	waitPlaced(t, s, got)
	for _, tok := range got {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		require.NoError(t, s.tc.TerminateWorkflow(ctx, domain.OrderWorkflowID(tok), "", "fault: operator terminate"))
		cancel()
	}
	paid := 0
	for user, tok := range got {
		if paid == 2 {
			break
		}
		require.True(t, s.payWhenPending(user, tok), "the payment for terminated order %s settles PAID", tok)
		paid++
	}
	s.burst(2)
	s.checkIdle("9 order workflows terminated")
}

// 4b. MariaDB is down for a while (30 s here) during a Redis-mode sale
// while reservations keep coming: a hold Redis takes then is not promised
// (503, outcome unknown: its insert before the 202 fails), the workflows'
// activities retry, and after the restart each of those clients' retries
// with the same request_id gets its hold with a 202; everything drains,
// nothing is dead-lettered or stuck.
func testMariaDBLongOutage(t *testing.T) {
	msrv, dsn := MustOwnMariaDB(t)
	mustIsolatedSaleIDs(t, dsn)
	s := MustStack(t, stackOpts{mysqlDSN: dsn})
	s.MustSale(30, 3)
	before := s.burst(3)
	require.NotEmpty(t, before)
	waitPlaced(t, s, before)
	msrv.Kill(t)
	outage := time.Now()
	unknown := map[int64]string{} // user -> request_id answered 503
	for time.Since(outage) < 30*time.Second {
		for range 2 {
			user := s.nextUser()
			req := fmt.Sprintf("outage-%d", user)
			code, body, err := s.reserve(user, req)
			require.NoError(t, err)
			require.NotEqual(t, http.StatusAccepted, code, "no 202 the database cannot count: %v", body)
			if code == http.StatusServiceUnavailable {
				e, _ := body["error"].(map[string]any)
				require.Equal(t, "unavailable", e["code"], "%v", body)
				unknown[user] = req
			}
		}
		time.Sleep(2 * time.Second)
	}
	require.NotEmpty(t, unknown, "holds taken while MariaDB is down answer 503")
	msrv.Start(t)
	answered := time.Now() // MariaDB answers again
	var resumed time.Duration
	after := map[int64]string{}
	for user, req := range unknown {
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			code, body, err := s.reserve(user, req)
			if assert.NoError(c, err) && assert.Equal(c, http.StatusAccepted, code, "the retry gets its hold: %v", body) {
				after[user] = body["token"].(string)
				if resumed == 0 {
					resumed = time.Since(answered)
				}
			}
		}, 60*time.Second, 500*time.Millisecond)
	}
	t.Logf("4b mariadb down 30s: %d holds answered 503 during the outage; the first 202 came %s after MariaDB answered again", len(unknown), resumed)
	assert.Less(t, resumed, 10*time.Second, "202s resume within seconds of the database's return")
	waitPlaced(t, s, after)
	s.burst(2)
	s.checkIdle("4b mariadb down 30s")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, err := s.rdb.XLen(ctx, redisgateway.SaleKeys(s.saleID).Dead).Result()
	require.NoError(t, err)
	require.Zero(t, n, "nothing dead-lettered")
}
