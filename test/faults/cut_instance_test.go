package faults

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testkit/netproxy"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

// TestOneAPICutFromRedis: a second API instance reaches Redis through a
// link that is partitioned for 30 s (bytes held, not refused) while the
// first keeps a healthy link and serves about 200 requests/s. The sale
// never changes mode, the healthy instance answers almost no 503s, and the
// cut instance fails /readyz (naming Redis) within 2 s, then serves again
// once its link heals.
func TestOneAPICutFromRedis(t *testing.T) {
	_, raddr, _ := MustOwnRedis(t)
	limits := map[string]string{
		"SECKILL_PER_ADDR_RPS": "100000", "SECKILL_PER_ADDR_BURST": "100000", "SECKILL_PER_USER_RPS": "100", "SECKILL_PER_USER_BURST": "100",
	}
	s := MustStack(t, stackOpts{redisAddr: raddr, apiEnv: limits})
	s.openWindows = true
	px, err := netproxy.Start(raddr, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = px.Close() })
	cut := testenv.MustAPI(t, "api-cut", merge(merge(s.env, limits), map[string]string{"REDIS_ADDR": px.Addr()}))
	s.MustSale(1000, 600)
	epoch := s.modeEpoch()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	healthy := newAnswerCounts()
	for i := range 20 { // 20 clients, 10 requests/s each
		wg.Go(func() { s.replayLoop(s.api.URL, fmt.Sprintf("healthy-%d", i), 100*time.Millisecond, healthy, stop) })
	}
	cutAnswers := newAnswerCounts()
	for i := range 5 {
		wg.Go(func() { s.replayLoop(cut.URL, fmt.Sprintf("cutoff-%d", i), 100*time.Millisecond, cutAnswers, stop) })
	}
	time.Sleep(3 * time.Second)
	code, _ := readyz(t, cut.URL)
	require.Equal(t, http.StatusOK, code, "the cut-to-be instance is ready before the cut")

	before := healthy.snapshot()
	px.SetHeld(true)
	cutAt := time.Now()
	var notReadyAfter time.Duration
	for time.Since(cutAt) < 10*time.Second {
		if code, body := readyz(t, cut.URL); code == http.StatusServiceUnavailable {
			notReadyAfter = time.Since(cutAt)
			assert.Contains(t, body, `"redis"`, "/readyz names Redis")
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	epochs := map[int64]bool{}
	for time.Since(cutAt) < 30*time.Second {
		epochs[s.modeEpoch()] = true
		time.Sleep(250 * time.Millisecond)
	}
	during := healthy.snapshot().minus(before)
	cutDuring := cutAnswers.snapshot()
	px.SetHeld(false)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, _ := readyz(t, cut.URL)
		assert.Equal(c, http.StatusOK, code)
	}, 30*time.Second, 100*time.Millisecond, "the cut instance is ready again once its link heals")
	healedAt := cutAnswers.snapshot()
	time.Sleep(3 * time.Second)
	close(stop)
	wg.Wait()
	afterHeal := cutAnswers.snapshot().minus(healedAt)

	t.Logf("cut instance not ready after %s; healthy instance during the cut: %v; cut instance: %v, after healing %v; epochs seen %v",
		notReadyAfter, during, cutDuring, afterHeal, epochs)
	assert.NotZero(t, notReadyAfter, "the cut instance never failed /readyz")
	assert.LessOrEqual(t, notReadyAfter, 2*time.Second, "the cut instance fails /readyz within 2 s")
	assert.Equal(t, map[int64]bool{epoch: true}, epochs, "the sale never changed mode")
	assert.Equal(t, epoch, s.modeEpoch(), "the sale never changed mode")
	assert.Greater(t, during.total(), 4000, "the healthy instance kept serving about 200 requests/s")
	assert.LessOrEqual(t, during[http.StatusServiceUnavailable]*50, during.total(), "the healthy instance's 503s are at most 2%% of its answers")
	assert.Positive(t, afterHeal[http.StatusAccepted], "the healed instance takes reservations again")
	s.checkIdle("13e one API cut from redis 30s", func(r *Row) {
		if len(epochs) != 1 && r.Result == "ok" {
			r.Result = "FAIL (mode changed)"
		}
	})
}

// replayLoop reserves for one user with one request_id every period until
// stop: the first 202 holds a unit, the rest replay it through Redis.
func (s *stack) replayLoop(apiURL, name string, period time.Duration, counts *answerCounts, stop <-chan struct{}) {
	user := s.nextUser()
	url := fmt.Sprintf("%s/api/v1/sales/%d/reservations", apiURL, s.saleID)
	var held atomic.Bool
	for {
		select {
		case <-stop:
			return
		case <-time.After(period):
		}
		code, body, err := call(s.t, "POST", url, user, map[string]any{"request_id": name})
		if err != nil {
			code = 0
		}
		counts.add(code)
		if code == http.StatusAccepted && held.CompareAndSwap(false, true) {
			s.addToken(body["token"].(string))
		}
	}
}

// answerCounts counts answers by status (0: transport error).
type answerCounts struct {
	mu sync.Mutex
	n  statusCounts
}

type statusCounts map[int]int

func newAnswerCounts() *answerCounts { return &answerCounts{n: statusCounts{}} }

func (a *answerCounts) add(code int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.n[code]++
}

func (a *answerCounts) snapshot() statusCounts {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := statusCounts{}
	for k, v := range a.n {
		out[k] = v
	}
	return out
}

func (c statusCounts) minus(o statusCounts) statusCounts {
	out := statusCounts{}
	for k, v := range c {
		out[k] = v - o[k]
	}
	return out
}

func (c statusCounts) total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

// readyz is an instance's /readyz answer (0 on a transport error).
func readyz(t *testing.T, apiURL string) (int, string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, apiURL+"/readyz", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err.Error()
	}
	return resp.StatusCode, string(body)
}

// modeEpoch is the sale's mode epoch in MySQL.
func (s *stack) modeEpoch() int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sale, err := s.st.GetSale(ctx, s.saleID)
	require.NoError(s.t, err)
	return sale.ModeEpoch
}
