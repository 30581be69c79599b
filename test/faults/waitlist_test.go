package faults

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/redisgateway"
)

// TestWaitlistThroughRedisFreezeAndWorkerKill: a sold-out sale's three
// holders let their 5 s windows run out while Redis is frozen (SIGSTOP)
// and the worker is killed (SIGKILL) and restarted; five users wait. Once
// it heals, the returned units go to the waiters in the order they joined,
// each a reservation that reaches PENDING_PAYMENT like a 202's; as those
// expire in turn the last two are served, and nothing is oversold.
func TestWaitlistThroughRedisFreezeAndWorkerKill(t *testing.T) {
	rsrv, raddr, _ := MustOwnRedis(t)
	s := MustStack(t, stackOpts{redisAddr: raddr})
	s.MustSale(3, 5)
	held := s.burst(3)
	require.Len(t, held, 3)
	waitPlaced(t, s, held)
	path := fmt.Sprintf("%s/api/v1/sales/%d/waitlist", s.api.URL, s.saleID)
	waiters, joined := make([]int64, 5), make([]int64, 5)
	wl := redisgateway.NewClient(s.rdb)
	for i := range waiters {
		waiters[i] = s.nextUser()
		code, body, err := call(t, "POST", path, waiters[i], nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code, "%v", body)
		require.EqualValues(t, i+1, body["position"])
		joined[i], err = wl.WaitlistJoined(context.Background(), s.saleID, waiters[i])
		require.NoError(t, err)
	}

	rsrv.Freeze(t)
	thaw := sync.OnceFunc(func() { rsrv.Thaw(t) })
	t.Cleanup(thaw)
	time.Sleep(3 * time.Second)
	s.worker.Kill(t)
	time.Sleep(3 * time.Second) // the holders' windows end meanwhile
	s.worker.Restart(t)
	time.Sleep(2 * time.Second)
	thaw()

	// Every waiter is served, in join order.
	byJoin := map[int64]domain.Reservation{}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for i, u := range waiters {
			r, err := s.st.FindReservation(ctx, s.saleID, u, domain.WaitlistRequestID(joined[i]))
			if assert.NoError(c, err, "waiter %d (join #%d) not served yet", i+1, i+1) {
				byJoin[int64(i+1)] = *r
				s.addToken(r.Token)
			}
		}
	}, 150*time.Second, 500*time.Millisecond)
	for _, n := range []int64{4, 5} {
		for _, m := range []int64{1, 2, 3} {
			assert.False(t, byJoin[n].CreatedAt.Before(byJoin[m].CreatedAt), "join #%d served before #%d", n, m)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	waiting, err := s.rdb.ZCard(ctx, redisgateway.SaleKeys(s.saleID).Waitlist).Result()
	require.NoError(t, err)
	require.Zero(t, waiting, "nobody left waiting")
	s.checkIdle("waitlist: redis frozen, worker killed")
}
