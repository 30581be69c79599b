package faults

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/redisgateway"
)

// TestRedisRecovery: Redis faults under 16 concurrent clients, then every
// reservation the clients got during the fault cancelled. Afterwards, with
// no operator action: each of those users buys again and gets a unit (the
// units resell exactly), fresh users can buy exactly stock_total - PAID -
// PENDING_PAYMENT more, no unit or user is stranded, and reconciliation is
// clean (consistent, no discrepancies, in_flight 0) within three passes.
// Every 202 reaches PENDING_PAYMENT, also where the fault loses
// acknowledged writes (the sale's keys deleted; Redis restarted from an AOF
// missing its last second): the database decided each 202 before it was
// sent, and the sale is rebuilt from it.
func TestRedisRecovery(t *testing.T) {
	t.Run("frozen_12s", func(t *testing.T) {
		redisOutage(t, "13a redis SIGSTOP 12s, 16 clients", true, func(t *testing.T, r *server, _ *stack) func() {
			r.Freeze(t)
			time.Sleep(12 * time.Second)
			return func() { r.Thaw(t) }
		})
	})
	t.Run("killed_restarted_from_aof", func(t *testing.T) {
		redisOutage(t, "13b redis SIGKILL, restart from AOF", true, func(t *testing.T, r *server, _ *stack) func() {
			r.Kill(t)
			time.Sleep(12 * time.Second)
			return func() { r.Start(t) }
		})
	})
	t.Run("aof_missing_its_last_second", func(t *testing.T) {
		redisOutage(t, "13d redis SIGKILL, AOF cut back 1 s", true, func(t *testing.T, r *server, _ *stack) func() {
			// The crowd buys for a second; the AOF then loses that second,
			// as a host crash under appendfsync everysec may leave it.
			aof := aofIncr(t, r.dir)
			before := fileSize(t, aof)
			time.Sleep(time.Second)
			r.Kill(t)
			lost := fileSize(t, aof) - before
			require.NoError(t, os.Truncate(aof, before))
			t.Logf("AOF cut back by %d bytes", lost)
			return func() { r.Start(t) }
		})
	})
	t.Run("live_keys_deleted", func(t *testing.T) {
		redisOutage(t, "13c live sale's keys deleted", true, func(t *testing.T, _ *server, s *stack) func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			k := redisgateway.SaleKeys(s.saleID)
			// Everything but the inbox, whose entries the rebuild counts.
			for _, key := range k.All() {
				if key != k.Inbox {
					require.NoError(t, s.rdb.Del(ctx, key).Err())
				}
			}
			return func() {} // nobody repairs it: the system must
		})
	})
}

// outageClient is one of the 16 buyers: it reserves for a fresh user and,
// on a 503 or a transport error, re-sends the same request_id as the
// contract tells clients to, until it gets an answer that ends the request.
type outageClients struct {
	s       *stack
	start   time.Time
	mu      sync.Mutex
	tokens  map[int64]string // user -> token of the 202
	first   time.Duration    // first 202 after start
	soldOut int
	// pause, when set, is how long a client waits after a 202 before its
	// next user buys; on202, when set, hears of each 202 as it comes.
	pause time.Duration
	on202 func(user int64, token string)
}

func (o *outageClients) run(stop <-chan struct{}, wantPerClient int) {
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			got := 0
			for got < wantPerClient {
				user := o.s.nextUser()
				code, body, ok := o.s.reserveAnswered(user, fmt.Sprintf("outage-%d", user), stop)
				switch {
				case !ok:
					return
				case code == http.StatusAccepted:
					o.accepted(user, body["token"].(string))
					got++
					time.Sleep(o.pause)
				case code == http.StatusGone:
					o.mu.Lock()
					o.soldOut++
					o.mu.Unlock()
					time.Sleep(200 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
}

// reserveAnswered sends a reservation request and, on a 503, a 429 or a
// transport error, re-sends the same request_id as the contract tells
// clients to, until an answer ends the request; ok is false when stop
// closed first.
func (s *stack) reserveAnswered(user int64, requestID string, stop <-chan struct{}) (code int, body map[string]any, ok bool) {
	for {
		select {
		case <-stop:
			return 0, nil, false
		default:
		}
		code, body, err := s.reserve(user, requestID)
		if err == nil && code != http.StatusServiceUnavailable && code != http.StatusTooManyRequests {
			return code, body, true
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// accepted records a 202.
func (o *outageClients) accepted(user int64, token string) {
	o.mu.Lock()
	o.tokens[user] = token
	if o.first == 0 {
		o.first = time.Since(o.start)
	}
	o.mu.Unlock()
	if o.on202 != nil {
		o.on202(user, token)
	}
}

func fileSize(t *testing.T, path string) int64 {
	fi, err := os.Stat(path)
	require.NoError(t, err)
	return fi.Size()
}

// redisOutage runs one fault: fault breaks Redis and returns how to heal
// it; kept says every 202 must reach PENDING_PAYMENT.
func redisOutage(t *testing.T, scenario string, kept bool, fault func(*testing.T, *server, *stack) func()) {
	rsrv, raddr, dir := MustOwnRedis(t)
	rsrv.dir = dir
	s := MustStack(t, stackOpts{redisAddr: raddr, apiEnv: map[string]string{
		"SECKILL_REDIS_TIMEOUT": "250ms", "SECKILL_FALLBACK_RPS": "200", "SECKILL_PER_ADDR_RPS": "100000", "SECKILL_PER_ADDR_BURST": "100000",
	}})
	s.openWindows = true
	const stock = 30
	s.MustSale(stock, 600)
	waitStockSeen(t, s)
	// Three units sold and paid through Redis before the fault.
	paid := sellAndPay(t, s, 3)
	waitStockSeen(t, s)

	// 16 clients buy, one unit each, from the moment of the fault.
	clients := &outageClients{s: s, tokens: map[int64]string{}, start: time.Now()}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		clients.run(stop, 1)
	}()
	heal := fault(t, rsrv, s)
	heal()
	healed := time.Now()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		close(stop)
		<-done
		t.Errorf("the clients did not all get a unit within 60 s of the heal")
	}
	sellingAgain := clients.first
	t.Logf("%s: %d clients got a unit, first 202 %s after the fault, all within %s of the heal",
		scenario, len(clients.tokens), sellingAgain, time.Since(healed))
	require.Len(t, clients.tokens, 16)
	assert.LessOrEqual(t, sellingAgain, 30*time.Second, "the sale sells again within 30 s")
	waitBackOnRedis(t, s)

	// Every 202 is kept: it reaches PENDING_PAYMENT (or, where the fault
	// lost acknowledged writes, may end FAILED, never sold twice).
	keptN, failed := waitPlacedOrFailed(t, s, clients.tokens)
	if kept {
		assert.Equal(t, len(clients.tokens), keptN, "every 202 reached PENDING_PAYMENT")
	}
	rebought := cancelAndBuyAgain(t, s, clients.tokens)
	fresh, unsold := freshBuyTheRest(t, s, stock)
	t.Logf("%s: %d/%d 202s kept (%d FAILED), %d users bought again, %d fresh units sold of %d unsold",
		scenario, keptN, len(clients.tokens), failed, rebought, fresh, unsold)
	reconcileClean(t, s)
	st := s.checkIdle(scenario, func(r *Row) {
		r.Kept202, r.Given202, r.SellingAgain = keptN, len(clients.tokens), sellingAgain
	})
	assert.Zero(t, st.StrandedUnits(), "units stranded")
	assert.Empty(t, st.StrandedUsers(), "users stranded")
	for _, tok := range paid {
		for _, r := range st.Reservations {
			if r.Token == tok {
				assert.Equal(t, domain.StatusPaid, r.Status)
			}
		}
	}
}

// sellAndPay sells n units to new users through the API and pays them.
func sellAndPay(t *testing.T, s *stack, n int) []string {
	var paid []string
	for range n {
		user := s.nextUser()
		code, body, err := s.reserve(user, fmt.Sprintf("before-%d", user))
		require.NoError(t, err)
		require.Equal(t, http.StatusAccepted, code, "%v", body)
		tok := body["token"].(string)
		require.True(t, s.payWhenPending(user, tok), "paid")
		paid = append(paid, tok)
	}
	return paid
}

// waitBackOnRedis: the sale is back on Redis, without an operator.
func waitBackOnRedis(t *testing.T, s *stack) {
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		got, err := s.st.GetSale(ctx, s.saleID)
		if assert.NoError(c, err) {
			assert.Equal(c, domain.ModeRedis, got.Mode)
		}
	}, 60*time.Second, 200*time.Millisecond)
}

// waitPlacedOrFailed waits until every token is placed (PENDING_PAYMENT or
// PAID) or FAILED, and counts each. Two minutes: after a fault, an order
// whose activity met a dead connection waits out its retries.
func waitPlacedOrFailed(t *testing.T, s *stack, tokens map[int64]string) (placed, failed int) {
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		placed, failed = 0, 0
		for user, tok := range tokens {
			st, err := s.status(user, tok)
			if !assert.NoError(c, err) {
				return
			}
			switch domain.ReservationStatus(st) {
			case domain.StatusPendingPayment, domain.StatusPaid:
				placed++
			case domain.StatusFailed:
				failed++
			}
		}
		assert.Equal(c, len(tokens), placed+failed, "every reservation placed or failed")
	}, 2*time.Minute, 200*time.Millisecond)
	return placed, failed
}

// cancelAndBuyAgain cancels every token (a FAILED one has nothing to
// cancel), then each user buys again; it returns how many did.
func cancelAndBuyAgain(t *testing.T, s *stack, tokens map[int64]string) int {
	for user, tok := range tokens {
		code, body, err := call(t, "POST", s.api.URL+"/api/v1/reservations/"+tok+"/cancel", user, map[string]any{})
		require.NoError(t, err)
		if code == http.StatusConflict { // FAILED: nothing to cancel
			continue
		}
		require.Equal(t, http.StatusOK, code, "%v", body)
	}
	again := map[int64]string{}
	for user := range tokens {
		req := fmt.Sprintf("again-%d", user)
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			code, body, err := s.reserve(user, req)
			if assert.NoError(c, err) && assert.Equal(c, http.StatusAccepted, code, "user %d buys again: %v", user, body) {
				again[user] = body["token"].(string)
			}
		}, 30*time.Second, 200*time.Millisecond)
	}
	waitPlaced(t, s, again)
	return len(again)
}

// freshBuyTheRest: fresh users buy exactly what is neither paid, pending
// nor queued, and their reservations are placed.
func freshBuyTheRest(t *testing.T, s *stack, stock int64) (fresh int, unsold int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	counts, err := s.st.CountReservations(ctx, s.saleID)
	require.NoError(t, err)
	unsold = stock - counts[domain.StatusPaid] - counts[domain.StatusPendingPayment] - counts[domain.StatusQueued]
	bought := map[int64]string{}
	for {
		user := s.nextUser()
		code, body, err := s.reserve(user, fmt.Sprintf("fresh-%d", user))
		require.NoError(t, err)
		if code == http.StatusGone {
			break
		}
		require.Equal(t, http.StatusAccepted, code, "%v", body)
		bought[user] = body["token"].(string)
		require.LessOrEqual(t, int64(len(bought)), unsold, "more fresh sales than units left")
	}
	assert.EqualValues(t, unsold, len(bought), "fresh users buy exactly stock_total - PAID - PENDING_PAYMENT")
	waitPlaced(t, s, bought)
	return len(bought), unsold
}

// reconcileClean: reconciliation (repairing) is clean within three passes.
func reconcileClean(t *testing.T, s *stack) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var err error
	s.repair = true
	var rep *domain.ReconciliationReport
	for pass := 1; pass <= 3; pass++ {
		rep, err = s.reconciler().Run(ctx, s.saleID, true)
		require.NoError(t, err)
		if rep.Consistent && rep.InFlight == 0 && len(rep.Discrepancies) == 0 {
			break
		}
		time.Sleep(time.Second)
	}
	assert.True(t, rep.Consistent && rep.InFlight == 0 && len(rep.Discrepancies) == 0,
		"reconciliation clean within three passes: %+v", rep)
}

// waitStockSeen waits until the worker has recorded the sale's Redis stock
// recently, as it does every second.
func waitStockSeen(t *testing.T, s *stack) {
	t.Helper()
	since := time.Now().UTC().Add(-100 * time.Millisecond)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var fresh bool
		if assert.NoError(c, s.st.DB.QueryRowContext(ctx, "SELECT COALESCE(redis_stock_seen_at >= ?, FALSE) FROM sales WHERE id = ?", since, s.saleID).Scan(&fresh)) {
			assert.True(c, fresh, "stock recorded since %s", since)
		}
	}, 30*time.Second, 100*time.Millisecond)
}
