package faults

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/redisgateway"
)

// 5. The Temporal dev server dies mid-run and restarts from its file: the
// API keeps accepting into the inbox and the relay catches up.
func testTemporalRestarted(t *testing.T) {
	tsrv, taddr := MustOwnTemporal(t)
	s := MustStack(t, stackOpts{temporalAddr: taddr})
	s.MustSale(10, 2)
	before := s.burst(3)
	require.NotEmpty(t, before)
	tsrv.Kill(t)
	during := s.burst(4)
	require.Len(t, during, 4, "the API accepts while Temporal is down")
	time.Sleep(2 * time.Second)
	tsrv.Start(t)
	s.burst(2)
	s.checkIdle("5 temporal restarted")
}

// 4. MariaDB dies mid-burst and restarts: activities retry, no order twice.
func testMariaDBRestarted(t *testing.T) {
	msrv, dsn := MustOwnMariaDB(t)
	mustIsolatedSaleIDs(t, dsn)
	s := MustStack(t, stackOpts{mysqlDSN: dsn})
	s.MustSale(8, 2)
	done := make(chan map[int64]string)
	go func() { done <- s.burst(6) }()
	waitForReservations(t, s, 1)
	msrv.Kill(t)
	require.NotEmpty(t, <-done)
	s.burst(2) // accepted or refused: either is fine while the database is down
	time.Sleep(2 * time.Second)
	msrv.Start(t)
	s.burst(2)
	s.checkIdle("4 mariadb restarted")
}

// 3b. Redis restarts from an AOF that lost its last second of writes (as a
// host crash under appendfsync everysec leaves it): the worker sees a new
// Redis, finds the sale's counter of holds behind the database's and
// rebuilds the sale, so the lost holds are back in Redis within seconds;
// a user whose hold was lost gets 409 for a new request, no unit is sold
// twice, and no lost hold ends FAILED.
func testRedisAOFLost(t *testing.T) {
	rsrv, raddr, dir := MustOwnRedis(t)
	s := MustStack(t, stackOpts{redisAddr: raddr})
	s.MustSale(6, 3)
	kept := s.burst(3)
	require.Len(t, kept, 3)
	waitPlaced(t, s, kept)
	time.Sleep(1500 * time.Millisecond) // let the relay and workflows settle
	incr := aofIncr(t, dir)
	fi, err := os.Stat(incr)
	require.NoError(t, err)
	offset := fi.Size()

	lost := s.burst(2) // "the last second": these holds will be lost
	require.Len(t, lost, 2)
	waitPlaced(t, s, lost)
	rsrv.Kill(t)
	require.NoError(t, os.Truncate(incr, offset))
	rsrv.Start(t)
	restarted := time.Now()
	k := redisgateway.SaleKeys(s.saleID)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, tok := range lost {
			n, err := s.rdb.HExists(ctx, k.Tokens, tok).Result()
			if assert.NoError(c, err) {
				assert.True(c, n, "the hold of %s is back in Redis", tok)
			}
		}
		got, err := s.st.GetSale(ctx, s.saleID)
		if assert.NoError(c, err) {
			assert.Equal(c, domain.ModeRedis, got.Mode)
		}
	}, 30*time.Second, 100*time.Millisecond)
	t.Logf("3b: the lost holds were back in Redis %s after the restart", time.Since(restarted))

	// A user whose hold was lost gets 409 for a new request (the database
	// decides, whatever Redis remembers), and a burst now sells no unit
	// twice.
	for user := range lost {
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			code, body, err := s.reserve(user, fmt.Sprintf("again-%d", user))
			if assert.NoError(c, err) {
				assert.Equal(c, http.StatusConflict, code, "a holder whose Redis mark was lost: %v", body)
			}
		}, 30*time.Second, 200*time.Millisecond)
	}
	s.burst(3)
	s.repair = true
	st := s.checkIdle("3b redis AOF lost last second")
	for _, tok := range lost {
		for _, r := range st.Reservations {
			if r.Token == tok {
				assert.Contains(t, []domain.ReservationStatus{domain.StatusExpired, domain.StatusPaid, domain.StatusCancelled}, r.Status, "a 202 never ends FAILED")
			}
		}
	}
}

// waitPlaced waits until each token's reservation left QUEUED.
func waitPlaced(t *testing.T, s *stack, tokens map[int64]string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for user, tok := range tokens {
			st, err := s.status(user, tok)
			if assert.NoError(c, err) {
				assert.NotEqual(c, string(domain.StatusQueued), st, "token %s", tok)
			}
		}
	}, 60*time.Second, 100*time.Millisecond)
}

// 3. Redis dies (SIGKILL) mid-burst and restarts from its AOF: the API's
// breaker opens and the database path serves; once Redis answers again the
// worker returns the sale to Redis. Nothing is sold twice.
func testRedisKilled(t *testing.T) {
	rsrv, raddr, _ := MustOwnRedis(t)
	// A low fallback rate, so that exceeding it would show.
	const fallbackRPS = 5
	s := MustStack(t, stackOpts{redisAddr: raddr, apiEnv: map[string]string{"SECKILL_FALLBACK_RPS": fmt.Sprint(fallbackRPS)}})
	s.MustSale(20, 2)
	// The database path's quota is the Redis stock the worker last saw.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var seen *int64
		if assert.NoError(c, s.st.DB.QueryRowContext(ctx, "SELECT redis_stock_seen FROM sales WHERE id = ?", s.saleID).Scan(&seen)) {
			assert.NotNil(c, seen)
		}
	}, 30*time.Second, 100*time.Millisecond)
	done := make(chan map[int64]string)
	go func() { done <- s.burst(6) }()
	waitForReservations(t, s, 1)
	rsrv.Kill(t)
	<-done
	// While Redis is down the database path answers (after the breaker
	// opens); retries with the same request_id are how clients behave.
	var fallback int
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		user := s.nextUser()
		code, _, err := s.reserve(user, fmt.Sprintf("fallback-%d", user))
		if assert.NoError(c, err) && assert.Equal(c, 202, code) {
			fallback++
		}
	}, 60*time.Second, 200*time.Millisecond)
	// A burst beyond the fallback rate gets 429s, not a slow database.
	limited := burstBeyondFallbackRate(s, 20)
	assert.Positive(t, limited, "beyond SECKILL_FALLBACK_RPS the database path answers 429")
	time.Sleep(time.Second)
	rsrv.Start(t)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var mode string
		if assert.NoError(c, s.st.DB.QueryRowContext(ctx, "SELECT mode FROM sales WHERE id = ?", s.saleID).Scan(&mode)) {
			assert.Equal(c, "redis", mode, "the worker returns the sale to Redis")
		}
	}, 90*time.Second, 200*time.Millisecond)
	// Keep selling on Redis until sold out.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		s.burst(5)
		code, _, err := s.reserve(s.nextUser(), fmt.Sprintf("last-%d", time.Now().UnixNano()))
		assert.NoError(c, err)
		assert.Equal(c, http.StatusGone, code, "sold out")
	}, 60*time.Second, 200*time.Millisecond)
	s.checkIdle("3 redis killed and restarted")
	assert.Positive(t, fallback, "the database path took reservations while Redis was down")

	checkRedisKilledAftermath(t, s, fallbackRPS, limited)
}

// burstBeyondFallbackRate sends n reservations at once and counts the
// 429s.
func burstBeyondFallbackRate(s *stack, n int) int {
	limited := 0
	var lmu sync.Mutex
	var lwg sync.WaitGroup
	for range n {
		user := s.nextUser()
		lwg.Go(func() {
			code, _, err := s.reserve(user, fmt.Sprintf("limited-%d", user))
			if err == nil && code == http.StatusTooManyRequests {
				lmu.Lock()
				limited++
				lmu.Unlock()
			}
		})
	}
	lwg.Wait()
	return limited
}

// checkRedisKilledAftermath: the sale's mode went to the database and
// back, the database path kept its rate, and the breaker went open ->
// half-open -> closed.
func checkRedisKilledAftermath(t *testing.T, s *stack, fallbackRPS, limited int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The sale went redis -> database -> resync -> redis: two epoch bumps.
	var epoch int64
	require.NoError(t, s.st.DB.QueryRowContext(ctx, "SELECT mode_epoch FROM sales WHERE id = ?", s.saleID).Scan(&epoch))
	assert.GreaterOrEqual(t, epoch, int64(3), "the sale's mode went to database and back")
	// The database path never exceeded its rate: per second, at most the
	// rate plus the bucket's burst.
	var perSecond []int64
	require.NoError(t, s.st.DB.NewRaw(`SELECT COUNT(*) FROM reservations WHERE sale_id = ? AND path = 'database'
		GROUP BY FLOOR(UNIX_TIMESTAMP(created_at))`, s.saleID).Scan(ctx, &perSecond))
	var onDatabase int64
	for _, n := range perSecond {
		onDatabase += n
		assert.LessOrEqual(t, n, int64(fallbackRPS+1), "database-path reservations in one second")
	}
	// The breaker went open -> half-open -> closed.
	log := s.api.Log()
	iOpen := strings.Index(log, `"to":"open"`)
	iHalf := strings.Index(log, `"to":"half-open"`)
	iClosed := strings.LastIndex(log, `"to":"closed"`)
	assert.True(t, iOpen >= 0 && iHalf > iOpen && iClosed > iHalf, "breaker transitions open -> half-open -> closed in the API log")
	var failed int64
	require.NoError(t, s.st.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM reservations WHERE sale_id = ? AND status = 'FAILED'", s.saleID).Scan(&failed))
	t.Logf("scenario 3: %d reservations on the database path, %d answered 429 beyond the fallback rate, %d 202s ended FAILED", onDatabase, limited, failed)
}
