package rollout

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/internal/testkit/proc"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

const (
	shutdownDelay   = 3 * time.Second
	shutdownTimeout = 5 * time.Second
	// stopWithin is the API's whole grace after SIGTERM: the delay, the
	// drain, and closing its clients.
	stopWithin = shutdownDelay + shutdownTimeout + 3*time.Second
	loaders    = 16
)

// answer is one request of the steady load.
type answer struct {
	start, end time.Time
	status     int
	close      bool // the answer said Connection: close
	err        error
}

// steadyLoad is loaders keep-alive clients reading a sale in a loop.
type steadyLoad struct {
	mu      sync.Mutex
	answers []answer
	stop    chan struct{}
	wg      sync.WaitGroup
}

func startLoad(url string) *steadyLoad {
	l := &steadyLoad{stop: make(chan struct{})}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: loaders}}
	for range loaders {
		l.wg.Go(func() {
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				a := answer{start: time.Now()}
				resp, err := client.Get(url)
				if err == nil {
					a.status, a.close = resp.StatusCode, resp.Close
					err = drain(resp)
				}
				a.end, a.err = time.Now(), err
				l.mu.Lock()
				l.answers = append(l.answers, a)
				l.mu.Unlock()
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	return l
}

func (l *steadyLoad) finish() []answer {
	close(l.stop)
	l.wg.Wait()
	return l.answers
}

// readiness is /readyz polled every 20 ms on fresh connections.
type readiness struct {
	mu     sync.Mutex
	probes []answer
	bodies []string
	stop   chan struct{}
	done   chan struct{}
}

func pollReadyz(url string) *readiness {
	r := &readiness{stop: make(chan struct{}), done: make(chan struct{})}
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	go func() {
		defer close(r.done)
		for {
			select {
			case <-r.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			a, body := answer{start: time.Now()}, ""
			resp, err := client.Get(url + "/readyz")
			if err == nil {
				var v struct {
					Missing []string `json:"missing"`
				}
				a.status = resp.StatusCode
				err = json.NewDecoder(resp.Body).Decode(&v)
				body = strings.Join(v.Missing, ",")
				_ = drain(resp)
			}
			a.end, a.err = time.Now(), err
			r.mu.Lock()
			r.probes, r.bodies = append(r.probes, a), append(r.bodies, body)
			r.mu.Unlock()
		}
	}()
	return r
}

func (r *readiness) finish() ([]answer, []string) {
	close(r.stop)
	<-r.done
	return r.probes, r.bodies
}

// An API told to stop while 16 keep-alive clients read from it fails
// /readyz at once (503 naming shutdown), answers every request of the
// delay, each with Connection: close, tells its event streams to
// reconnect when it stops, and exits 0 within its grace.
func TestAPIDrainsOnSIGTERM(t *testing.T) {
	s := newStack(t, map[string]string{
		"SECKILL_SHUTDOWN_DELAY":   shutdownDelay.String(),
		"SECKILL_SHUTDOWN_TIMEOUT": shutdownTimeout.String(),
	})
	sale := s.warmSale(t, 10)
	api := testenv.MustAPI(t, "api", s.env)
	api.WaitReady(t, 30*time.Second, proc.HTTPReady(api.URL+"/readyz"))
	user := testenv.UniqueUser()
	stream := openEvents(t, api.URL, user, reserve(t, api.URL, sale.ID, user))

	load := startLoad(fmt.Sprintf("%s/api/v1/sales/%d", api.URL, sale.ID))
	ready := pollReadyz(api.URL)
	time.Sleep(time.Second)
	signalled := time.Now()
	require.NoError(t, api.Signal(syscall.SIGTERM))
	// The load stops short of the delay's end: the listener closes then.
	time.Sleep(shutdownDelay - 500*time.Millisecond)
	answers := load.finish()
	probes, codes := ready.finish()

	select {
	case <-api.Done():
	case <-time.After(time.Until(signalled.Add(stopWithin))):
		t.Fatalf("the API did not exit within %s of SIGTERM", stopWithin)
	}
	stopped := time.Since(signalled)
	assert.Equal(t, 0, api.ExitCode(), "the API exits 0 after SIGTERM")
	assert.GreaterOrEqual(t, stopped, shutdownDelay-100*time.Millisecond, "the API serves for its shutdown delay")
	t.Logf("exited %s after SIGTERM", stopped.Round(time.Millisecond))

	notReady := checkReadiness(t, probes, codes, signalled)
	checkLoad(t, answers, signalled, notReady)

	select {
	case <-stream.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the event stream did not end when the API stopped")
	}
	retries := stream.retries(signalled)
	require.NotEmpty(t, retries, "the event stream is told to reconnect (retry:) before it ends")
	assert.NoError(t, stream.err, "the event stream ends cleanly (its last chunk)")
	assert.False(t, retries[0].at.Before(signalled.Add(shutdownDelay-100*time.Millisecond)),
		"the event stream is served through the delay")
}

// checkReadiness asserts /readyz answered every probe, 200 before the
// signal and 503 naming shutdown from soon after it on; it returns when the
// first 503 came.
func checkReadiness(t *testing.T, probes []answer, codes []string, signalled time.Time) time.Time {
	t.Helper()
	var notReady time.Time
	for i, p := range probes {
		require.NoError(t, p.err, "/readyz answers during the delay (probe at %s)", p.start.Sub(signalled))
		if p.end.Before(signalled) {
			assert.Equal(t, http.StatusOK, p.status, "/readyz before the signal")
			continue
		}
		if p.status == http.StatusServiceUnavailable {
			assert.Equal(t, "shutdown", codes[i], "/readyz names shutdown")
			if notReady.IsZero() {
				notReady = p.end
			}
			continue
		}
		assert.True(t, notReady.IsZero(), "/readyz answered %d after a 503 (probe at %s)", p.status, p.start.Sub(signalled))
		assert.Less(t, p.start.Sub(signalled), 100*time.Millisecond, "/readyz still ready %s after the signal", p.start.Sub(signalled))
	}
	require.False(t, notReady.IsZero(), "/readyz never answered 503 after the signal")
	return notReady
}

// checkLoad asserts every request got its 200, and every one sent after
// /readyz failed was answered with Connection: close.
func checkLoad(t *testing.T, answers []answer, signalled, notReady time.Time) {
	t.Helper()
	var during, closed int
	for _, a := range answers {
		if !assert.NoError(t, a.err, "a request sent %s after the signal", a.start.Sub(signalled)) {
			continue
		}
		assert.Equal(t, http.StatusOK, a.status)
		if a.start.After(signalled) {
			during++
		}
		if a.start.After(notReady) {
			assert.True(t, a.close, "an answer during the delay without Connection: close")
			closed++
		}
	}
	t.Logf("%d requests in all, %d sent during the delay, %d of them after /readyz failed", len(answers), during, closed)
	assert.Greater(t, during, 10*loaders, "the load kept going during the delay")
}

// A second SIGTERM cuts the shutdown delay short: the API stops at once
// and still exits 0.
func TestSecondSIGTERMCutsTheDelay(t *testing.T) {
	const longDelay = 30 * time.Second
	s := newStack(t, map[string]string{
		"SECKILL_SHUTDOWN_DELAY":   longDelay.String(),
		"SECKILL_SHUTDOWN_TIMEOUT": shutdownTimeout.String(),
	})
	api := testenv.MustAPI(t, "api", s.env)
	api.WaitReady(t, 30*time.Second, proc.HTTPReady(api.URL+"/readyz"))
	signalled := time.Now()
	require.NoError(t, api.Signal(syscall.SIGTERM))
	// Still serving, not ready, in the delay.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, _, err := testenv.Do(http.MethodGet, api.URL+"/readyz", 0, nil)
		if assert.NoError(c, err) {
			assert.Equal(c, http.StatusServiceUnavailable, code)
		}
	}, 5*time.Second, 50*time.Millisecond)
	require.True(t, api.Running(), "the API serves its delay")
	require.NoError(t, api.Signal(syscall.SIGTERM))
	select {
	case <-api.Done():
	case <-time.After(shutdownTimeout + 3*time.Second):
		t.Fatalf("the API still ran %s after a second SIGTERM", shutdownTimeout+3*time.Second)
	}
	assert.Equal(t, 0, api.ExitCode())
	assert.Less(t, time.Since(signalled), longDelay/2, "the second signal ended the delay")
}
