package api

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/status"
)

// TestStatusPollsAreServedFromTheCacheAndSeeAcknowledgedChanges: two API
// instances on one Redis. Polls of a PENDING_PAYMENT reservation through
// one are answered from its cache (no Redis read), and a change written
// through the other (the order workflow's status record), acknowledged
// after settle, is seen by the very next poll, while other clients keep
// the cache busy.
func TestStatusPollsAreServedFromTheCacheAndSeeAcknowledgedChanges(t *testing.T) {
	acker := MustHarness(t)
	poller := MustHarness(t, func(c *config.Config) { c.ReadPerUserRPS, c.ReadPerUserBurst = 1e6, 1e6 })
	sale := acker.MustWarmSale(100)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A read asks for fences (an idle instance publishes none).
	waitFenced := func(h *harness) {
		require.Eventually(t, func() bool {
			return h.services.Reads.Fenced()
		}, 10*time.Second, 5*time.Millisecond, "the instance's fences arrive")
	}
	waitFenced(acker)
	waitFenced(poller)

	const users = 16
	buyers := make([]liveBuyer, users)
	for i := range buyers {
		b := &buyers[i]
		b.user = testenv.UniqueUser()
		b.jwt = poller.MustToken(b.user, "")
		b.token = domain.DeriveToken([]byte("live-views"), sale.ID, b.user, "r1")
		_, err := acker.scripts.WriteStatus(ctx, acker.rdb, sale.ID, b.token, redisgateway.StatusRecord{Seq: 2, UserID: b.user,
			Status: string(domain.StatusPendingPayment), OrderNo: fmt.Sprintf("o-%d", i), AmountCents: sale.PriceCents})
		require.NoError(t, err)
	}
	// Warm, then count: the second round reads nothing from Redis, and
	// answers the same bytes (the cache keeps the rendered view).
	first := make([]response, users)
	for i, b := range buyers {
		first[i] = poller.do("GET", "/api/v1/reservations/"+b.token, b.jwt, "")
		require.Equal(t, http.StatusOK, first[i].Status)
		require.Equal(t, "PENDING_PAYMENT", first[i].json(t)["status"])
	}
	requireServedFromCache(t, poller, buyers, first)
	moveOnWhilePolling(t, ctx, acker, poller, sale, buyers)
}

// liveBuyer is a user polling one reservation.
type liveBuyer struct {
	user  int64
	jwt   string
	token string
}

// pollStatus is the status the poller's answer shows.
func pollStatus(t *testing.T, poller *harness, b liveBuyer) (string, error) {
	r := poller.do("GET", "/api/v1/reservations/"+b.token, b.jwt, "")
	if r.Status != http.StatusOK {
		return "", fmt.Errorf("poll %s: %d %s", b.token, r.Status, r.Body)
	}
	return r.json(t)["status"].(string), nil
}

func requireServedFromCache(t *testing.T, poller *harness, buyers []liveBuyer, first []response) {
	// A poll is served from the cache only while the instance's newest
	// fence is fresh, which a loaded machine can delay now and then: each
	// buyer polls until one answer came from the cache (no Redis read).
	fromCache := poller.services.Metrics.StatusReads.Of(status.SourceLive)
	for i, b := range buyers {
		served := false
		for range 20 {
			calls, hits := poller.services.Reads.RedisReads(), testutil.ToFloat64(fromCache)
			r := poller.do("GET", "/api/v1/reservations/"+b.token, b.jwt, "")
			require.Equal(t, http.StatusOK, r.Status)
			require.Equal(t, string(first[i].Body), string(r.Body))
			require.Equal(t, first[i].Header.Get("Content-Type"), r.Header.Get("Content-Type"))
			if testutil.ToFloat64(fromCache) > hits && poller.services.Reads.RedisReads() == calls {
				served = true
				break
			}
		}
		require.True(t, served, "buyer %d: no poll answered from the cache", i)
	}
}

func moveOnWhilePolling(t *testing.T, ctx context.Context, acker, poller *harness, sale *domain.Sale, buyers []liveBuyer) {
	users := len(buyers)
	// Each buyer's reservation moves on (paid for half, cancelled for the
	// other half), acknowledged by the other instance after settle; the
	// buyer's next poll must show it. Meanwhile the others keep polling.
	var wg sync.WaitGroup
	var busy atomic.Bool
	busy.Store(true)
	errs := make(chan error, 4*users)
	for g := range 4 {
		wg.Go(func() {
			for i := g; busy.Load(); i = (i + 1) % users {
				if _, err := pollStatus(t, poller, buyers[i]); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for i, b := range buyers {
		status := domain.StatusPaid
		if i%2 == 1 {
			status = domain.StatusCancelled
		}
		_, err := acker.scripts.WriteStatus(ctx, acker.rdb, sale.ID, b.token, redisgateway.StatusRecord{Seq: 3, UserID: b.user,
			Status: string(status), OrderNo: fmt.Sprintf("o-%d", i), AmountCents: sale.PriceCents})
		require.NoError(t, err)
		acker.services.Reads.Settle(ctx, time.Now())
		st, err := pollStatus(t, poller, b)
		require.NoError(t, err)
		require.Equal(t, string(status), st, "the first poll after the acknowledgement, buyer %d", i)
	}
	busy.Store(false)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}
