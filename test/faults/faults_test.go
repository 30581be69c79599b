package faults

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
)

// TestFaults runs each fault scenario against the real processes, then
// checks the invariants. Run one with `go test ./faults -run TestFaults/<name>`.
func TestFaults(t *testing.T) {
	t.Run("api_killed_after_reserve", testAPIKilledAfterReserve)
	t.Run("worker_killed", testWorkerKilled)
	t.Run("fail_after_commit", testFailAfterCommit)
	t.Run("inbox_delivered_twice", testInboxDeliveredTwice)
	t.Run("hostile_requests", testHostileRequests)
	t.Run("temporal_restarted", testTemporalRestarted)
	t.Run("temporal_long_outage", testTemporalLongOutage)
	t.Run("order_workflows_terminated", testOrderWorkflowsTerminated)
	t.Run("mariadb_restarted", testMariaDBRestarted)
	t.Run("mariadb_long_outage", testMariaDBLongOutage)
	t.Run("redis_killed", testRedisKilled)
	t.Run("redis_aof_lost_last_second", testRedisAOFLost)
}

// 1. The API dies (SIGKILL) between a successful reserve script and the
// workflow start: the inbox relay starts the workflow, and the client's
// retry with the same request_id gets the same token.
func testAPIKilledAfterReserve(t *testing.T) {
	s := MustStack(t, stackOpts{apiEnv: map[string]string{"SECKILL_FAULT_EXIT_AFTER_RESERVE": "1"}})
	s.MustSale(3, 2)
	for i := range 2 {
		user := testenv.UniqueUser()
		req := fmt.Sprintf("killed-%d-%d", i, user)
		_, _, err := s.reserve(user, req)
		require.Error(t, err, "the API must die before it answers")
		select {
		case <-s.api.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("the API did not die after the reserve script")
		}
		// Only the relay can start it now: the API is dead.
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			r, err := s.st.FindReservation(ctx, s.saleID, user, req)
			if assert.NoError(c, err) {
				assert.NotEqual(c, domain.StatusQueued, r.Status, "the relay's workflow places the order")
			}
		}, 60*time.Second, 200*time.Millisecond)
		// The client retries against a healthy API: same token, nothing new.
		if i == 1 {
			delete(s.api.Env, "SECKILL_FAULT_EXIT_AFTER_RESERVE")
		}
		s.api.Restart(t)
		s.api.WaitHealthy(t)
		code, body, err := s.reserve(user, req)
		require.NoError(t, err)
		require.Equal(t, http.StatusAccepted, code, "%v", body)
	}
	// One more reservation on the healthy API, paid.
	user := testenv.UniqueUser()
	code, body, err := s.reserve(user, fmt.Sprintf("healthy-%d", user))
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, code, "%v", body)
	s.payWhenPending(user, body["token"].(string))
	s.checkIdle("1 api SIGKILL after reserve")
}

// 2. The worker dies (SIGKILL) during order placement and again during the
// payment wait; restarted, every workflow finishes and nothing is deducted
// twice (issue 4's worker-SIGKILL test too).
func testWorkerKilled(t *testing.T) {
	s := MustStack(t, stackOpts{})
	s.MustSale(6, 3)
	var got map[int64]string
	done := make(chan struct{})
	go func() {
		defer close(done)
		got = s.burst(8)
	}()
	// Kill as soon as the first orders are being placed.
	waitForReservations(t, s, 1)
	s.worker.Kill(t)
	<-done
	require.NotEmpty(t, got)
	s.worker.Restart(t)
	s.worker.WaitHealthy(t)

	// Pay two of them, then kill the worker while the rest wait for payment.
	paid := 0
	for user, tok := range got {
		if paid == 2 {
			break
		}
		if s.payWhenPending(user, tok) {
			paid++
		}
	}
	s.worker.Kill(t)
	time.Sleep(time.Second)
	s.worker.Restart(t)
	s.worker.WaitHealthy(t)
	// The released units can be reserved again.
	s.burst(3)
	s.checkIdle("2 worker SIGKILL mid-run")
}

// waitForReservations waits until the sale has at least n database rows.
func waitForReservations(t *testing.T, s *stack, n int64) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var got int64
		err := s.st.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM reservations WHERE sale_id = ?", s.saleID).Scan(&got)
		if assert.NoError(c, err) {
			assert.GreaterOrEqual(c, got, n)
		}
	}, 60*time.Second, 20*time.Millisecond)
}

// 6. PlaceOrder fails after its transaction committed (dev fault hook): the
// retry finds the order and deducts nothing more.
func testFailAfterCommit(t *testing.T) {
	s := MustStack(t, stackOpts{workerEnv: map[string]string{"SECKILL_FAULT_FAIL_AFTER_COMMIT": "1"}})
	s.MustSale(4, 2)
	got := s.burst(3)
	require.Len(t, got, 3)
	for user, tok := range got {
		s.payWhenPending(user, tok)
		break
	}
	st := s.checkIdle("6 activity fails after commit")
	assert.Contains(t, s.worker.Log(), "place order fails after its commit", "the fault hook fired")
	for _, tok := range got {
		assert.Equal(t, 1, st.Deducts[tok], "token %s", tok)
	}
}

// 7. The same inbox entry delivered twice: one workflow.
func testInboxDeliveredTwice(t *testing.T) {
	s := MustStack(t, stackOpts{})
	s.MustSale(3, 2)
	got := s.burst(2)
	require.Len(t, got, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	k := redisgateway.SaleKeys(s.saleID)
	msgs, err := s.rdb.XRange(ctx, k.Inbox, "-", "+").Result()
	require.NoError(t, err)
	require.Len(t, msgs, 2)
	// Deliver each entry again, twice, as a relay retry or a replayed
	// stream would.
	var wg sync.WaitGroup
	for _, m := range msgs {
		for range 2 {
			wg.Go(func() {
				assert.NoError(t, s.rdb.XAdd(ctx, &redis.XAddArgs{Stream: k.Inbox, Values: m.Values}).Err())
			})
		}
	}
	wg.Wait()
	st := s.checkIdle("7 inbox entry delivered twice")
	for _, tok := range got {
		assert.Equal(t, 1, st.Workflows[domain.OrderWorkflowID(tok)].Runs, "token %s", tok)
	}
}
