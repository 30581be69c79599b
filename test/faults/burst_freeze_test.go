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
)

// TestBurstThenRedisFrozen: a burst takes most of a sale in well under a
// second, then Redis freezes (SIGSTOP) before the relay has recorded the
// burst (the worker is frozen through it, so its stock sample predates
// the burst too), and 16 clients keep buying for 12 s on the database
// path. Every burst 202 reaches PENDING_PAYMENT, the database path sells
// only what the burst left, and nothing is oversold.
func TestBurstThenRedisFrozen(t *testing.T) {
	rsrv, raddr, _ := MustOwnRedis(t)
	s := MustStack(t, stackOpts{redisAddr: raddr, apiEnv: map[string]string{
		"SECKILL_REDIS_TIMEOUT": "250ms", "SECKILL_FALLBACK_RPS": "200", "SECKILL_PER_ADDR_RPS": "100000", "SECKILL_PER_ADDR_BURST": "100000",
	}})
	s.openWindows = true
	const stock, burst = 60, 50
	s.MustSale(stock, 600)
	waitStockSeen(t, s)

	s.worker.Freeze(t)
	thawWorker := sync.OnceFunc(func() { s.worker.Thaw(t) })
	t.Cleanup(thawWorker)
	held := s.burst(burst)
	require.GreaterOrEqual(t, len(held), burst*4/5, "the burst took most of the sale")
	rsrv.Freeze(t)
	thawRedis := sync.OnceFunc(func() { rsrv.Thaw(t) })
	t.Cleanup(thawRedis)
	thawWorker()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var outage outageBuyers
	for range 16 {
		wg.Go(func() { outage.buy(s, stop) })
	}
	time.Sleep(12 * time.Second)
	thawRedis()
	time.Sleep(3 * time.Second)
	close(stop)
	wg.Wait()

	// Every burst 202 is kept.
	statuses := map[string]int{}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		statuses = map[string]int{}
		for user, tok := range held {
			st, err := s.status(user, tok)
			if assert.NoError(c, err) {
				statuses[st]++
			}
		}
		assert.Zero(c, statuses[string(domain.StatusQueued)], "burst reservations still queued: %v", statuses)
	}, 120*time.Second, 500*time.Millisecond)
	assert.Equal(t, len(held), statuses[string(domain.StatusPendingPayment)], "every burst 202 reached PENDING_PAYMENT: %v", statuses)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var dbSold int
	require.NoError(t, s.st.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM reservations WHERE sale_id = ? AND path = ?",
		s.saleID, string(domain.PathDatabase)).Scan(&dbSold))
	assert.LessOrEqual(t, dbSold, stock-len(held), "the database path sold only what the burst left")
	counts, err := s.st.CountReservations(ctx, s.saleID)
	require.NoError(t, err)
	live := counts[domain.StatusPaid] + counts[domain.StatusPendingPayment] + counts[domain.StatusQueued]
	assert.LessOrEqual(t, live, int64(stock), "nothing oversold")
	t.Logf("burst: %d 202s (%v); outage: %d 202s, %d sold out; database path sold %d of the %d left",
		len(held), statuses, outage.accepted, outage.soldOut, dbSold, stock-len(held))
	s.checkIdle("13d burst, then redis SIGSTOP 12s", func(r *Row) {
		r.Kept202, r.Given202 = statuses[string(domain.StatusPendingPayment)], len(held)
		if r.Kept202 < r.Given202 && r.Result == "ok" {
			r.Result = "FAIL (202s)"
		}
	})
}

// outageBuyers are clients buying one unit each for fresh users until
// stopped: a 503 or a transport error is sent again with the same
// request_id, as the contract says.
type outageBuyers struct {
	mu                sync.Mutex
	accepted, soldOut int
}

func (o *outageBuyers) buy(s *stack, stop <-chan struct{}) {
	for {
		user := s.nextUser()
		req := fmt.Sprintf("frozen-%d", user)
		for {
			select {
			case <-stop:
				return
			default:
			}
			code, _, err := s.reserve(user, req)
			if err != nil || code == http.StatusServiceUnavailable || code == http.StatusTooManyRequests {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			o.mu.Lock()
			switch code {
			case http.StatusAccepted:
				o.accepted++
			case http.StatusGone:
				o.soldOut++
			}
			o.mu.Unlock()
			if code == http.StatusGone {
				time.Sleep(200 * time.Millisecond)
			}
			break
		}
	}
}
