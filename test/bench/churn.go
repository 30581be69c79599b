package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"golang.org/x/sync/errgroup"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/redisgateway"
)

// The churn soak (scenario 9): users cycling reserve -> cancel and
// reserve -> expire beside a steady buyer load, watching whether the
// sale's Redis state and the script latency grow with the churn.
const (
	churnUsers    = 100                    // half cancel, half let the window pass
	churnWindow   = 5                      // payment window of the sale, seconds
	churnBuyRate  = 10                     // new buyers per second
	churnStock    = 20_000                 // enough for the buyers of a long run
	churnSampleAt = time.Minute            // length of the start and end windows
	slowlogMicros = 10_000                 // SLOWLOG threshold: 10 ms
	churnPoll     = 500 * time.Millisecond // status poll of an expiring user
)

// churnSample is what one window of the soak measured.
type churnSample struct {
	evalP99us  float64 // Redis-side p99 of EVALSHA (every script) in the window
	reserveP99 float64 // client-side p99 of POST reservations in the window, ms
	saleBytes  int64   // MEMORY USAGE of the sale's keys
	liveHolds  int64   // SCARD buyers
	sizes      string  // lengths of the sale's structures
}

type churnClient struct {
	c       *http.Client
	base    string
	mu      sync.Mutex
	hist    *hdrhistogram.Histogram
	cycles  atomic.Int64
	reserve atomic.Int64
}

// call sends one request and answers the status, the body and how long a
// 429 asks to wait.
func (cc *churnClient) call(ctx context.Context, method, path, auth, body string) (int, []byte, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, method, cc.base+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, 0, fmt.Errorf("churn request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+auth)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := cc.c.Do(req)
	if err != nil {
		return 0, nil, 0, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, 0, fmt.Errorf("%s %s: read body: %w", method, path, err)
	}
	wait := time.Duration(0)
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
		wait = time.Duration(s) * time.Second
	}
	return resp.StatusCode, b, wait, nil
}

// reserveOnce posts a reservation and answers its token ("" when refused)
// and how long to wait before the next request.
func (cc *churnClient) reserveOnce(ctx context.Context, saleID int64, auth, reqID string) (string, time.Duration, error) {
	t0 := time.Now()
	code, body, wait, err := cc.call(ctx, "POST", client.ReservationsPath(saleID), auth, `{"request_id":"`+reqID+`"}`)
	if err != nil {
		return "", time.Second, err
	}
	cc.mu.Lock()
	_ = cc.hist.RecordValue(time.Since(t0).Microseconds())
	cc.mu.Unlock()
	cc.reserve.Add(1)
	if code != http.StatusAccepted {
		return "", max(wait, 200*time.Millisecond), nil
	}
	var v struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return "", time.Second, fmt.Errorf("reservation body %q: %w", body, err)
	}
	return v.Token, 0, nil
}

// cycle runs one user's reserve -> end loop until ctx ends: cancel at once,
// or (expire) poll until the payment window ended the reservation.
func (cc *churnClient) cycle(ctx context.Context, saleID int64, auth string, user int, expire bool) {
	for n := 0; ctx.Err() == nil; n++ {
		token, wait, err := cc.reserveOnce(ctx, saleID, auth, fmt.Sprintf("churn-%d-%d", user, n))
		if err == nil && token != "" {
			err = cc.end(ctx, token, auth, expire)
			cc.cycles.Add(1)
		}
		if err != nil {
			wait = time.Second
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

// end cancels the reservation (retrying 429s) or waits until it expired.
func (cc *churnClient) end(ctx context.Context, token, auth string, expire bool) error {
	for ctx.Err() == nil {
		var code int
		var body []byte
		var wait time.Duration
		var err error
		if expire {
			code, body, wait, err = cc.call(ctx, "GET", client.ReservationPath(token), auth, "")
			if err == nil && code == http.StatusOK && (strings.Contains(string(body), `"EXPIRED"`) || strings.Contains(string(body), `"FAILED"`)) {
				return nil
			}
			wait = max(wait, churnPoll)
		} else {
			code, _, wait, err = cc.call(ctx, "POST", client.CancelPath(token), auth, "")
			if err == nil && (code == http.StatusOK || code == http.StatusConflict) {
				return nil
			}
			wait = max(wait, 100*time.Millisecond)
		}
		if err != nil {
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
	return nil
}

// churn runs scenario 9 for o.ChurnDur.
func (r *runner) churn(ctx context.Context) error {
	api, worker, err := r.startStackEnv(ctx, "api-churn", "worker-churn", r.env("churn-"+r.stamp))
	if err != nil {
		return err
	}
	defer worker.Stop()
	defer api.Stop()
	sale, err := r.saleWindow(ctx, api, "churn", churnStock, 4, true, churnWindow)
	if err != nil {
		return err
	}
	dur := r.o.ChurnDur
	buyers := int(dur.Seconds())*churnBuyRate + churnBuyRate
	toks, _, err := r.users(churnUsers + buyers)
	if err != nil {
		return err
	}
	if err := r.resetRedisStats(ctx, true); err != nil {
		return err
	}
	cc := &churnClient{c: &http.Client{Timeout: 10 * time.Second}, base: api.URL, hist: newHist()}
	runCtx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()
	g, gctx := errgroup.WithContext(runCtx)
	for u := range churnUsers {
		g.Go(func() error { cc.cycle(gctx, sale.ID, toks[u], u, u%2 == 1); return nil })
	}
	g.Go(func() error { cc.buy(gctx, sale.ID, toks[churnUsers:]); return nil })
	var first, last churnSample
	win := min(churnSampleAt, dur/3)
	g.Go(func() error {
		var err error
		if first, err = r.churnWindowSample(gctx, cc, sale.ID, 0, win); err != nil {
			return err
		}
		last, err = r.churnWindowSample(gctx, cc, sale.ID, dur-2*win-5*time.Second, win)
		return err
	})
	if err := g.Wait(); err != nil {
		return err
	}
	return r.reportChurn(ctx, cc, first, last)
}

// buy reserves for one new buyer after another at churnBuyRate.
func (cc *churnClient) buy(ctx context.Context, saleID int64, toks []string) {
	tick := time.NewTicker(time.Second / churnBuyRate)
	defer tick.Stop()
	for i := 0; i < len(toks); i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		go func() { _, _, _ = cc.reserveOnce(ctx, saleID, toks[i], fmt.Sprintf("buy-%d", i)) }()
	}
}

// churnWindowSample waits idle, then measures one window of length win
// (statistics reset at its start).
func (r *runner) churnWindowSample(ctx context.Context, cc *churnClient, saleID int64, idle, win time.Duration) (churnSample, error) {
	select {
	case <-ctx.Done():
		return churnSample{}, ctx.Err()
	case <-time.After(max(idle, 0)):
	}
	if err := r.resetRedisStats(ctx, false); err != nil {
		return churnSample{}, err
	}
	cc.mu.Lock()
	cc.hist.Reset()
	cc.mu.Unlock()
	select {
	case <-ctx.Done():
		return churnSample{}, ctx.Err()
	case <-time.After(win):
	}
	s, err := r.saleRedisState(ctx, saleID)
	if err != nil {
		return s, err
	}
	cc.mu.Lock()
	s.reserveP99 = float64(cc.hist.ValueAtQuantile(99)) / 1000
	cc.mu.Unlock()
	return s, nil
}

// resetRedisStats resets Redis's command statistics; with slowlog also the
// SLOWLOG, its threshold set to 10 ms.
func (r *runner) resetRedisStats(ctx context.Context, slowlog bool) error {
	if slowlog {
		if err := r.rdb.ConfigSet(ctx, "slowlog-log-slower-than", strconv.Itoa(slowlogMicros)).Err(); err != nil {
			return fmt.Errorf("slowlog threshold: %w", err)
		}
		if err := r.rdb.Do(ctx, "SLOWLOG", "RESET").Err(); err != nil {
			return fmt.Errorf("slowlog reset: %w", err)
		}
	}
	if err := r.rdb.ConfigResetStat(ctx).Err(); err != nil {
		return fmt.Errorf("reset redis stats: %w", err)
	}
	return nil
}

// saleRedisState measures the sale's Redis state and the EVALSHA p99 since
// the last reset.
func (r *runner) saleRedisState(ctx context.Context, saleID int64) (churnSample, error) {
	var s churnSample
	info, err := r.rdb.Info(ctx, "latencystats").Result()
	if err != nil {
		return s, fmt.Errorf("latencystats: %w", err)
	}
	s.evalP99us = latencyP99(info, "evalsha")
	k := redisgateway.SaleKeys(saleID)
	for _, key := range k.All() {
		n, err := r.rdb.MemoryUsage(ctx, key, 0).Result()
		if err == nil {
			s.saleBytes += n
		}
	}
	if s.liveHolds, err = r.rdb.SCard(ctx, k.Buyers).Result(); err != nil {
		return s, fmt.Errorf("buyers: %w", err)
	}
	p := r.rdb.Pipeline()
	tokens, requests, status, mine := p.HLen(ctx, k.Tokens), p.HLen(ctx, k.Requests), p.HLen(ctx, k.Status), p.HLen(ctx, k.Mine)
	inbox, started := p.XLen(ctx, k.Inbox), p.SCard(ctx, k.Started)
	ended, retired := p.ZCard(ctx, k.Ended), p.SCard(ctx, k.Retired)
	if _, err := p.Exec(ctx); err != nil {
		return s, fmt.Errorf("sale structures: %w", err)
	}
	s.sizes = fmt.Sprintf("buyers %d, tokens %d, requests %d, status %d, mine %d fields, inbox %d, started %d, ended %d, retired %d",
		s.liveHolds, tokens.Val(), requests.Val(), status.Val(), mine.Val(), inbox.Val(), started.Val(), ended.Val(), retired.Val())
	return s, nil
}

// latencyP99 reads a command's p99 (µs) from INFO latencystats.
func latencyP99(info, cmd string) float64 {
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "latency_percentiles_usec_"+cmd+":")
		if !ok {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "p99="); ok {
				f, _ := strconv.ParseFloat(v, 64)
				return f
			}
		}
	}
	return -1
}

func (r *runner) reportChurn(ctx context.Context, cc *churnClient, first, last churnSample) error {
	slow, err := r.rdb.Do(ctx, "SLOWLOG", "LEN").Int64()
	if err != nil {
		return fmt.Errorf("slowlog len: %w", err)
	}
	perHold := func(s churnSample) float64 { return float64(s.saleBytes) / float64(max(s.liveHolds, 1)) }
	r.add(Scenario{
		ID:    "9",
		Title: fmt.Sprintf("churn soak: %d users cycling reserve -> cancel / -> expire (%d s window) beside %d new buyers/s, %s", churnUsers, churnWindow, churnBuyRate, r.o.ChurnDur),
		Figures: []Figure{
			{Name: "EVALSHA p99, first window (Redis side, every script)", Value: first.evalP99us, Unit: "µs"},
			{Name: "EVALSHA p99, last window", Value: last.evalP99us, Unit: "µs"},
			{Name: "reserve p99 at the client, first window", Value: first.reserveP99, Unit: "ms"},
			{Name: "reserve p99 at the client, last window", Value: last.reserveP99, Unit: "ms"},
			{Name: "sale's Redis memory per live hold, first window", Value: perHold(first), Unit: "B"},
			{Name: "sale's Redis memory per live hold, last window", Value: perHold(last), Unit: "B"},
			{Name: "SLOWLOG entries over 10 ms", Value: float64(slow), Unit: "entries", Target: "0"},
			{Name: "churn cycles completed", Value: float64(cc.cycles.Load()), Unit: "cycles"},
			{Name: "reservation requests", Value: float64(cc.reserve.Load()), Unit: "requests"},
		},
		Notes: []string{
			"first window: " + first.sizes,
			"last window: " + last.sizes,
		},
	})
	return nil
}
