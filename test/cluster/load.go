package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/internal/authtoken"
)

// Burst is a closed-loop burst of reservations: Requests requests from
// Concurrency clients, request i by user UserBase+i (so no one is refused
// as a repeat buyer), spread round-robin over the API URLs and the sales.
type Burst struct {
	URLs        []string
	SaleIDs     []int64
	Requests    int
	Concurrency int
	UserBase    int64
	JWTSecret   []byte
	Timeout     time.Duration // per request; 10s when zero
}

// BurstResult is what a burst got back.
type BurstResult struct {
	Requests int
	Status   map[int]int // HTTP status -> count
	Errors   int         // transport failures
	FirstErr error
	Elapsed  time.Duration
	// Reserved are the 202 answers: request index -> token.
	Reserved map[int]string
}

// Rate is the 202 answers per second.
func (r BurstResult) Rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Status[http.StatusAccepted]) / r.Elapsed.Seconds()
}

// String is a one-line summary, statuses in order.
func (r BurstResult) String() string {
	codes := make([]int, 0, len(r.Status))
	for c := range r.Status {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	parts := make([]string, 0, len(codes))
	for _, c := range codes {
		parts = append(parts, fmt.Sprintf("%d×%d", c, r.Status[c]))
	}
	return fmt.Sprintf("%d requests in %s (%s; %d transport errors): %.0f reservations/s",
		r.Requests, r.Elapsed.Round(time.Millisecond), strings.Join(parts, " "), r.Errors, r.Rate())
}

// Target returns the API URL and sale of request i.
func (b Burst) Target(i int) (url string, saleID int64) {
	return b.URLs[i%len(b.URLs)], b.SaleIDs[(i/len(b.URLs))%len(b.SaleIDs)]
}

// Run sends the burst. The bearer tokens are minted before the clock starts,
// so the client's own work is mostly HTTP.
func (b Burst) Run(ctx context.Context) (BurstResult, error) {
	if len(b.URLs) == 0 || len(b.SaleIDs) == 0 || b.Requests <= 0 || b.Concurrency <= 0 {
		return BurstResult{}, fmt.Errorf("burst: URLs, SaleIDs, Requests and Concurrency are required")
	}
	timeout := b.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	auth := make([]string, b.Requests)
	for i := range auth {
		tok, err := authtoken.Mint(b.JWTSecret, b.UserBase+int64(i), authtoken.RoleUser, time.Hour)
		if err != nil {
			return BurstResult{}, fmt.Errorf("burst: mint token: %w", err)
		}
		auth[i] = "Bearer " + tok
	}
	client := &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			MaxIdleConns:        b.Concurrency * 2,
			MaxIdleConnsPerHost: b.Concurrency,
			IdleConnTimeout:     30 * time.Second,
		},
	}
	defer client.CloseIdleConnections()

	type answer struct {
		status int
		token  string
		err    error
	}
	answers := make([]answer, b.Requests)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range b.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= b.Requests || ctx.Err() != nil {
					return
				}
				url, sale := b.Target(i)
				a, err := reserve(ctx, client, url, sale, auth[i], fmt.Sprintf("burst-%010d", i))
				answers[i] = answer{a.Status, a.Token, err}
			}
		}()
	}
	wg.Wait()
	res := BurstResult{Requests: b.Requests, Status: map[int]int{}, Elapsed: time.Since(start), Reserved: map[int]string{}}
	for i, a := range answers {
		if a.err != nil {
			res.Errors++
			if res.FirstErr == nil {
				res.FirstErr = a.err
			}
			continue
		}
		res.Status[a.status]++
		if a.status == http.StatusAccepted {
			res.Reserved[i] = a.token
		}
	}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("burst: %w", err)
	}
	return res, nil
}

// Answer is a reservation's answer: its status, and the token of a 202
// or the error code of a refusal.
type Answer struct {
	Status int
	Token  string
	Code   string
}

// reserve posts one reservation and returns its answer.
func reserve(ctx context.Context, c *http.Client, base string, saleID int64, auth, requestID string) (Answer, error) {
	body, err := json.Marshal(map[string]any{"request_id": requestID})
	if err != nil {
		return Answer{}, fmt.Errorf("reserve: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+client.ReservationsPath(saleID), bytes.NewReader(body))
	if err != nil {
		return Answer{}, fmt.Errorf("reserve: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", auth)
	resp, err := c.Do(req)
	if err != nil {
		return Answer{}, fmt.Errorf("reserve: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	a := Answer{Status: resp.StatusCode}
	if err != nil {
		return a, fmt.Errorf("reserve: read body: %w", err)
	}
	var out struct {
		Token string `json:"token"`
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &out); err != nil && resp.StatusCode == http.StatusAccepted {
		return a, fmt.Errorf("reserve: body %q: %w", raw, err)
	}
	a.Token, a.Code = out.Token, out.Error.Code
	return a, nil
}
