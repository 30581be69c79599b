package rollout

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/proc"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

// balancer sends each request to an API whose /readyz answered 200 at its
// last probe (every 100 ms), as a load balancer does.
type balancer struct {
	apis  []*testenv.API
	ready []atomic.Bool
	next  atomic.Int64
	stop  chan struct{}
	done  chan struct{}
}

func newBalancer(apis ...*testenv.API) *balancer {
	b := &balancer{apis: apis, ready: make([]atomic.Bool, len(apis)), stop: make(chan struct{}), done: make(chan struct{})}
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	go func() {
		defer close(b.done)
		for {
			for i, a := range apis {
				resp, err := client.Get(a.URL + "/readyz")
				b.ready[i].Store(err == nil && resp.StatusCode == http.StatusOK)
				if err == nil {
					_ = drain(resp)
				}
			}
			select {
			case <-b.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return b
}

// pick is the index of a ready API, round robin; -1 when none is.
func (b *balancer) pick() int {
	n := int64(len(b.apis))
	for range n {
		i := int(b.next.Add(1) % n)
		if b.ready[i].Load() {
			return i
		}
	}
	return -1
}

func (b *balancer) close() {
	close(b.stop)
	<-b.done
}

// A rolling restart during a crowd: one of two APIs and one of two
// workers are told to stop and started again while 400 buyers reserve
// through a balancer that follows /readyz. Every request sent is
// answered, every buyer gets a 202, the API that stays answers no 5xx,
// and every 202 ends placed.
func TestRollingRestartDuringACrowd(t *testing.T) {
	s := newStack(t, map[string]string{
		"SECKILL_SHUTDOWN_DELAY":   "2s",
		"SECKILL_SHUTDOWN_TIMEOUT": shutdownTimeout.String(),
	})
	sale := s.warmSale(t, 500) // more than the crowd: each buyer gets a 202
	apis := []*testenv.API{testenv.MustAPI(t, "api-1", s.env), testenv.MustAPI(t, "api-2", s.env)}
	w1 := testenv.MustWorker(t, "worker-1", s.env)
	testenv.MustWorker(t, "worker-2", s.env)
	for _, a := range apis {
		a.WaitReady(t, 30*time.Second, proc.HTTPReady(a.URL+"/readyz"))
	}
	lb := newBalancer(apis...)
	defer lb.close()
	time.Sleep(300 * time.Millisecond)

	var mu sync.Mutex
	tokens := map[int64]string{}
	fiveXX := map[string]int{} // by API and status
	saw := func(api, code int) {
		if code >= 500 {
			mu.Lock()
			fiveXX[fmt.Sprintf("api-%d %d", api+1, code)]++
			mu.Unlock()
		}
	}
	users := make(chan int64)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for user := range users {
				tok, err := reserveThrough(lb, sale.ID, user, saw)
				mu.Lock()
				switch {
				case err != nil:
					t.Errorf("user %d: %v", user, err)
				case tok != "":
					tokens[user] = tok
				}
				mu.Unlock()
			}
		})
	}
	go func() {
		defer close(users)
		for range 400 {
			users <- testenv.UniqueUser()
			time.Sleep(15 * time.Millisecond)
		}
	}()
	time.Sleep(time.Second)
	stopWorker(t, w1)
	require.NoError(t, apis[0].Signal(syscall.SIGTERM))
	select {
	case <-apis[0].Done():
	case <-time.After(stopWithin):
		t.Fatalf("api-1 did not exit within %s", stopWithin)
	}
	assert.Equal(t, 0, apis[0].ExitCode(), "api-1 exits 0")
	apis[0].Restart(t)
	w1.Restart(t)
	wg.Wait()

	t.Logf("5xx answers: %v", fiveXX)
	for k, n := range fiveXX {
		assert.NotContains(t, k, "api-2", "the API that stays answered %d 5xx (%s)", n, k)
		assert.NotContains(t, k, " 500", "an API answered 500")
	}
	assert.Len(t, tokens, 400, "every buyer got a 202 through the rollout")
	waitStatus(t, apis[1].URL, tokens, domain.StatusPendingPayment)
}

// reserveThrough sends user's reservation through the balancer until it is
// decided; a 503 or 429 is sent again with the same request_id. It
// answers the token of a 202 ("" for a refusal); saw is told of every
// answer.
func reserveThrough(lb *balancer, saleID, user int64, saw func(api, code int)) (string, error) {
	body := map[string]any{"request_id": fmt.Sprintf("rolling-%d", user)}
	deadline := time.Now().Add(30 * time.Second)
	for {
		i := lb.pick()
		if i < 0 {
			if time.Now().After(deadline) {
				return "", fmt.Errorf("no API ready for 30 s")
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		url := fmt.Sprintf("%s/api/v1/sales/%d/reservations", lb.apis[i].URL, saleID)
		code, out, err := testenv.Do(http.MethodPost, url, user, body)
		if err != nil {
			return "", fmt.Errorf("api-%d: %w", i+1, err)
		}
		saw(i, code)
		if code == http.StatusAccepted {
			return out["token"].(string), nil
		}
		if code != http.StatusServiceUnavailable && code != http.StatusTooManyRequests {
			return "", nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("api-%d: still %d after 30 s", i+1, code)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
