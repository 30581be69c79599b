// Package rollout tests rolling deploys from outside, on real processes:
// an API or a worker told to stop (SIGTERM, as Kubernetes does) drains
// and exits 0, and its clients and orders do not notice.
package rollout

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/store"
	"github.com/seckill/seckill/test/testsale"
)

// stack is a test's services and the environment of its processes, on a
// task queue of its own.
type stack struct {
	env map[string]string
	st  *store.Store
}

func newStack(t *testing.T, over map[string]string) *stack {
	t.Helper()
	queue := fmt.Sprintf("rollout-%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), time.Now().UnixNano())
	return &stack{env: testenv.ProcEnv(t, queue, over), st: testenv.MustStore(t)}
}

// warmSale creates a live sale of stock units and loads it into Redis.
func (s *stack) warmSale(t *testing.T, stock int64) *domain.Sale {
	t.Helper()
	sale := testenv.MustSale(t, s.st, stock)
	testsale.MustWarm(t, s.st, testenv.MustRedis(t), sale)
	return sale
}

// reserve sends user's reservation until it is decided (a 503 or 429 is
// sent again with the same request_id, as the contract says) and returns
// the 202's token; the test fails on another answer.
func reserve(t *testing.T, apiURL string, saleID, user int64) string {
	t.Helper()
	tok, err := reserveAnswered(apiURL, saleID, user)
	require.NoError(t, err)
	return tok
}

// reserveAnswered is reserve returning the error, for goroutines.
func reserveAnswered(apiURL string, saleID, user int64) (string, error) {
	url := fmt.Sprintf("%s/api/v1/sales/%d/reservations", apiURL, saleID)
	body := map[string]any{"request_id": fmt.Sprintf("rollout-%d", user)}
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, out, err := testenv.Do(http.MethodPost, url, user, body)
		if err == nil && code == http.StatusAccepted {
			return out["token"].(string), nil
		}
		retry := err == nil && (code == http.StatusServiceUnavailable || code == http.StatusTooManyRequests)
		if !retry || time.Now().After(deadline) {
			return "", fmt.Errorf("reserve for user %d: %d %v %v", user, code, out, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// reservationStatus is a reservation's status as its user reads it.
func reservationStatus(apiURL string, user int64, token string) (domain.ReservationStatus, error) {
	code, out, err := testenv.Do(http.MethodGet, apiURL+"/api/v1/reservations/"+token, user, nil)
	if err != nil {
		return "", err
	}
	if code != http.StatusOK {
		return "", fmt.Errorf("GET reservation %s: %d %v", token, code, out)
	}
	st, _ := out["status"].(string)
	return domain.ReservationStatus(st), nil
}

// sseLine is a line of an event stream and when it came.
type sseLine struct {
	at   time.Time
	text string
}

// eventStream is an open event stream whose lines are read until it ends.
type eventStream struct {
	mu    sync.Mutex
	lines []sseLine
	ended time.Time
	err   error
	done  chan struct{}
}

// openEvents opens user's event stream of token and reads it in the
// background until the server ends it.
func openEvents(t *testing.T, apiURL string, user int64, token string) *eventStream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, apiURL+"/api/v1/reservations/"+token+"/events", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testenv.MustToken(t, user))
	resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	e := &eventStream{done: make(chan struct{})}
	go func() {
		defer close(e.done)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			e.mu.Lock()
			e.lines = append(e.lines, sseLine{at: time.Now(), text: sc.Text()})
			e.mu.Unlock()
		}
		e.mu.Lock()
		e.ended, e.err = time.Now(), sc.Err()
		e.mu.Unlock()
	}()
	return e
}

// retries are the stream's retry: lines that came after since.
func (e *eventStream) retries(since time.Time) []sseLine {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []sseLine
	for _, l := range e.lines {
		if strings.HasPrefix(l.text, "retry:") && l.at.After(since) {
			out = append(out, l)
		}
	}
	return out
}

// drain reads and closes a response body, so its connection can be used
// again.
func drain(resp *http.Response) error {
	_, err := io.Copy(io.Discard, resp.Body)
	if cerr := resp.Body.Close(); err == nil {
		err = cerr
	}
	return err
}
