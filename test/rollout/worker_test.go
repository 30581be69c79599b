package rollout

import (
	"fmt"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

// A rolling restart of the workers: one of two is told to stop while
// orders are being placed, exits 0, and the orders complete on the other;
// it comes back, the other is told to stop while the orders are paid, and
// every order ends PAID.
func TestWorkerStopsWithOrdersInFlight(t *testing.T) {
	s := newStack(t, map[string]string{"SECKILL_SHUTDOWN_TIMEOUT": shutdownTimeout.String()})
	sale := s.warmSale(t, 40)
	api := testenv.MustAPI(t, "api", s.env)
	a := testenv.MustWorker(t, "worker-a", s.env)
	b := testenv.MustWorker(t, "worker-b", s.env)

	tokens := map[int64]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 6 {
				user := testenv.UniqueUser()
				tok, err := reserveAnswered(api.URL, sale.ID, user)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				tokens[user] = tok
				mu.Unlock()
				if g == 0 && i == 2 {
					stopWorker(t, a)
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	require.False(t, t.Failed())
	require.False(t, a.Running(), "worker-a was told to stop")
	waitStatus(t, api.URL, tokens, domain.StatusPendingPayment)

	a.Restart(t)
	a.WaitHealthy(t)
	paid := make(chan struct{})
	go func() {
		defer close(paid)
		for user, tok := range tokens {
			pay(t, api.URL, user, tok)
		}
	}()
	stopWorker(t, b)
	<-paid
	waitStatus(t, api.URL, tokens, domain.StatusPaid)
}

// stopWorker sends SIGTERM to w and asserts it exits 0 within its grace.
func stopWorker(t *testing.T, w *testenv.Worker) {
	t.Helper()
	signalled := time.Now()
	if err := w.Signal(syscall.SIGTERM); err != nil {
		t.Errorf("SIGTERM to %s: %v", w.Name, err)
		return
	}
	grace := shutdownTimeout + 3*time.Second
	select {
	case <-w.Done():
	case <-time.After(grace):
		t.Errorf("%s did not exit within %s of SIGTERM", w.Name, grace)
		return
	}
	assert.Equal(t, 0, w.ExitCode(), "%s exits 0 after SIGTERM", w.Name)
	t.Logf("%s exited %s after SIGTERM", w.Name, time.Since(signalled).Round(time.Millisecond))
}

// waitStatus waits until every reservation has status want.
func waitStatus(t *testing.T, apiURL string, tokens map[int64]string, want domain.ReservationStatus) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for user, tok := range tokens {
			got, err := reservationStatus(apiURL, user, tok)
			if assert.NoError(c, err) {
				assert.Equal(c, want, got, "reservation %s", tok)
			}
		}
	}, 60*time.Second, 250*time.Millisecond)
}

// pay pays a reservation, sending the payment again while the answer is
// 503 (a worker stopping: the outcome is unknown, and the same payment_ref
// is idempotent).
func pay(t *testing.T, apiURL string, user int64, token string) {
	url := apiURL + "/api/v1/reservations/" + token + "/payment"
	body := map[string]any{"payment_ref": fmt.Sprintf("pay-%d", user)}
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, out, err := testenv.Do(http.MethodPost, url, user, body)
		if err == nil && code == http.StatusOK {
			return
		}
		if err != nil || code != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Errorf("pay %s: %d %v %v", token, code, out, err)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}
