package cluster

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill/seckill/internal/authtoken"
)

// Buyer sends reservations for one sale as the contract tells clients to:
// a request answered 503 or 429, or lost to a transport error, is sent
// again with the same request_id until an answer ends it. Requests and
// their retries go to the API instances in turn, as through a load
// balancer.
type Buyer struct {
	URLs      []string
	SaleID    int64
	JWTSecret []byte
	Timeout   time.Duration // per request; 10s when zero

	once   sync.Once
	client *http.Client
	next   atomic.Uint64
}

// Reserve sends user's request with requestID until an answer ends it,
// and returns that answer and how many times the request was sent again;
// it gives up with ctx's error when ctx ends first.
func (b *Buyer) Reserve(ctx context.Context, user int64, requestID string) (Answer, int, error) {
	b.once.Do(func() {
		timeout := b.Timeout
		if timeout <= 0 {
			timeout = 10 * time.Second
		}
		b.client = &http.Client{Timeout: timeout, Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}}
	})
	tok, err := authtoken.Mint(b.JWTSecret, user, authtoken.RoleUser, time.Hour)
	if err != nil {
		return Answer{}, 0, fmt.Errorf("buyer: mint token: %w", err)
	}
	for resent := 0; ; resent++ {
		url := b.URLs[int(b.next.Add(1)%uint64(len(b.URLs)))]
		a, err := reserve(ctx, b.client, url, b.SaleID, "Bearer "+tok, requestID)
		if err == nil && a.Status != http.StatusServiceUnavailable && a.Status != http.StatusTooManyRequests {
			return a, resent, nil
		}
		select {
		case <-ctx.Done():
			return a, resent, fmt.Errorf("buyer: user %d, request %s unanswered (last: %d %v): %w", user, requestID, a.Status, err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Crowd is Clients buyers at once, each reserving for one new user after
// another (NextUser) with the request_id RequestID names, until its
// context ends or, with UntilSoldOut, until each has been answered 410.
type Crowd struct {
	Buyer     *Buyer
	Clients   int
	NextUser  func() int64
	RequestID func(user int64) string
	// Pause is how long a client waits after a 202 before its next user;
	// after a 410 it waits 200 ms unless UntilSoldOut stops it.
	Pause        time.Duration
	UntilSoldOut bool
	// On202 hears of each 202 as it comes, from the clients' goroutines.
	On202 func(user int64, requestID, token string)
}

// CrowdResult is what a crowd got back.
type CrowdResult struct {
	Status   map[int]int      // answers that ended a request, by status
	Resent   int              // requests sent again (503, 429, transport errors)
	Reserved map[int64]string // the users answered 202, with their tokens
}

// Run runs the crowd until ctx ends (or, with UntilSoldOut, it is sold out).
func (c Crowd) Run(ctx context.Context) CrowdResult {
	res := CrowdResult{Status: map[int]int{}, Reserved: map[int64]string{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range c.Clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				user := c.NextUser()
				req := c.RequestID(user)
				a, resent, err := c.Buyer.Reserve(ctx, user, req)
				mu.Lock()
				res.Resent += resent
				if err == nil {
					res.Status[a.Status]++
				}
				if err == nil && a.Status == http.StatusAccepted {
					res.Reserved[user] = a.Token
				}
				mu.Unlock()
				switch {
				case err != nil:
					return
				case a.Status == http.StatusAccepted:
					if c.On202 != nil {
						c.On202(user, req, a.Token)
					}
					sleep(ctx, c.Pause)
				case a.Status == http.StatusGone && c.UntilSoldOut:
					return
				case a.Status == http.StatusGone:
					sleep(ctx, 200*time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	return res
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
