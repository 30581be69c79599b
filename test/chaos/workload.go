package chaos

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/domain"
)

// SaleSpec is one sale of the run.
type SaleSpec struct {
	ID            int64
	Stock         int64
	WindowSeconds int
	PriceCents    int64
	Weight        int // share of the clients' reservations
}

// DefaultSales: one that sells out at once and stays contended, two that
// churn through short windows, one with stock to spare.
var DefaultSales = []SaleSpec{
	{Stock: 15, WindowSeconds: 6, PriceCents: 1500, Weight: 3},
	{Stock: 60, WindowSeconds: 10, PriceCents: 2500, Weight: 3},
	{Stock: 120, WindowSeconds: 5, PriceCents: 990, Weight: 2},
	{Stock: 600, WindowSeconds: 15, PriceCents: 4200, Weight: 2},
}

// Workload is the run's clients and operator.
type Workload struct {
	C       *caller
	Seed    int64
	Clients int
	Sales   []SaleSpec
	Logf    func(format string, args ...any)
	// Crowds are the bursts' times from the start of Run (CrowdTimes).
	Crowds []time.Duration

	mu       sync.Mutex
	live     map[string]int64 // tokens seen PENDING_PAYMENT, not known ended -> sale
	liveList []string
	late     sync.WaitGroup
	waiters  map[int64][]int64 // sale -> users who joined its waitlist
}

// Run drives the clients and the operator until ctx ends, then lets late
// webhooks finish and undoes the operator's pauses and blacklist entries.
func (w *Workload) Run(ctx context.Context) {
	w.live = map[string]int64{}
	w.waiters = map[int64][]int64{}
	start := time.Now()
	var wg sync.WaitGroup
	for n, at := range w.Crowds {
		wg.Go(func() {
			sleep(ctx, time.Until(start.Add(at)))
			if ctx.Err() == nil {
				w.crowd(ctx, n)
			}
		})
	}
	for i := range w.Clients {
		wg.Go(func() { w.client(ctx, i) })
	}
	op := &operator{w: w, rng: rand.New(rand.NewPCG(uint64(w.Seed), 0x6f70)), blacklisted: map[int64]bool{}, paused: map[int64]bool{},
		mayPause: map[int64]bool{}, mayBlacklist: map[int64]bool{}}
	wg.Go(func() { op.run(ctx) })
	wg.Wait()
	w.late.Wait()
	op.undo(context.WithoutCancel(ctx))
}

// LiveToken picks a token that reached PENDING_PAYMENT (for the nemesis).
func (w *Workload) LiveToken(pick int) (string, int64, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.liveList) > 0 {
		i := pick % len(w.liveList)
		tok := w.liveList[i]
		if sale, ok := w.live[tok]; ok {
			delete(w.live, tok)
			w.liveList = append(w.liveList[:i], w.liveList[i+1:]...)
			return tok, sale, true
		}
		w.liveList = append(w.liveList[:i], w.liveList[i+1:]...)
	}
	return "", 0, false
}

func (w *Workload) setLive(tok string, sale int64, live bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if live {
		if _, ok := w.live[tok]; !ok {
			w.live[tok] = sale
			w.liveList = append(w.liveList, tok)
		}
		return
	}
	delete(w.live, tok)
}

type freeUser struct {
	id    int64
	ready time.Time
}

type buyer struct {
	w    *Workload
	id   int
	rng  *rand.Rand
	n    int64
	free []freeUser
}

func (w *Workload) client(ctx context.Context, id int) {
	c := &buyer{w: w, id: id, rng: rand.New(rand.NewPCG(uint64(w.Seed), uint64(id+1)))}
	for ctx.Err() == nil {
		c.once(ctx)
		sleep(ctx, time.Duration(20+c.rng.IntN(200))*time.Millisecond)
	}
}

func (c *buyer) pickSale() SaleSpec {
	total := 0
	for _, s := range c.w.Sales {
		total += s.Weight
	}
	x := c.rng.IntN(total)
	for _, s := range c.w.Sales {
		if x < s.Weight {
			return s
		}
		x -= s.Weight
	}
	return c.w.Sales[0]
}

// user is a fresh user, or one whose last reservation ended (they buy again).
func (c *buyer) user() int64 {
	if len(c.free) > 0 && c.rng.IntN(10) < 4 && time.Now().After(c.free[0].ready) {
		u := c.free[0].id
		c.free = c.free[1:]
		return u
	}
	c.n++
	return int64(c.id+1)*10_000_000 + c.n
}

func (c *buyer) release(u int64, after time.Duration) {
	c.free = append(c.free, freeUser{id: u, ready: time.Now().Add(after)})
}

// once is one user's visit: reserve (replaying the request_id after a 503
// or a timeout), then pay, cancel or walk away.
func (c *buyer) once(ctx context.Context) {
	s := c.pickSale()
	u := c.user()
	c.n++
	reqID := fmt.Sprintf("chaos-c%02d-%07d", c.id, c.n)
	apiIdx := c.rng.IntN(2)
	path := client.ReservationsPath(s.ID)
	var a answer
	for attempt := 0; attempt < 8 && ctx.Err() == nil; attempt++ {
		a, _ = c.w.C.do(ctx, apiIdx+attempt, http.MethodPost, path, u, map[string]any{"request_id": reqID},
			Event{Op: OpReserve, Sale: s.ID, User: u, RequestID: reqID})
		if !unknown(a) {
			break
		}
		wait := time.Duration(200+c.rng.IntN(800)) * time.Millisecond
		if a.RetryAfter > 0 {
			wait = min(a.RetryAfter, 2*time.Second)
		}
		sleep(ctx, wait)
	}
	if a.HTTP == http.StatusGone && c.rng.IntN(3) == 0 && c.joinWaitlist(ctx, apiIdx, s, u) {
		return // the user waits: a returned unit becomes their reservation
	}
	if a.HTTP != http.StatusAccepted {
		c.release(u, 0)
		return
	}
	tok := a.str("token")
	if c.rng.IntN(8) == 0 {
		c.w.C.do(ctx, apiIdx, http.MethodGet, client.MinePath(s.ID), u, nil, Event{Op: OpMine, Sale: s.ID, User: u})
	}
	// Fates: most holds churn (expire, cancel) so the sales keep selling
	// for the whole run; a fifth are paid, some late.
	fate := c.rng.IntN(100)
	switch {
	case fate < 10: // cancel at once, maybe while QUEUED
		c.cancel(ctx, apiIdx, s, u, tok)
		c.release(u, 0)
		return
	case fate < 45: // walk away: it expires
		c.release(u, time.Duration(s.WindowSeconds+5)*time.Second)
		return
	}
	st, payBy := c.waitPending(ctx, apiIdx, s, u, tok)
	if st != domain.StatusPendingPayment {
		c.release(u, 0)
		return
	}
	c.w.setLive(tok, s.ID, true)
	defer c.w.setLive(tok, s.ID, false)
	ref := fmt.Sprintf("pay-%s-%d", tok[:min(12, len(tok))], c.rng.IntN(1000))
	switch {
	case fate < 57: // the user pays through the API, now and then twice
		a, _ := c.w.C.do(ctx, apiIdx, http.MethodPost, client.PaymentPath(tok), u, map[string]any{"payment_ref": ref},
			Event{Op: OpPay, Sale: s.ID, User: u, Token: tok, PayRef: ref})
		if unknown(a) || c.rng.IntN(10) == 0 {
			c.w.C.do(ctx, apiIdx+1, http.MethodPost, client.PaymentPath(tok), u, map[string]any{"payment_ref": ref},
				Event{Op: OpPay, Sale: s.ID, User: u, Token: tok, PayRef: ref})
		}
		c.release(u, 0)
	case fate < 67: // the provider confirms, now and then twice
		c.provider(ctx, apiIdx, s, u, tok, ref, 0)
		if c.rng.IntN(3) == 0 {
			c.provider(ctx, apiIdx+1, s, u, tok, ref, 0)
		}
		c.release(u, 0)
	case fate < 75: // the provider confirms after the window closed
		delay := time.Until(payBy) + time.Duration(1+c.rng.IntN(4))*time.Second
		apiNext := apiIdx + 1
		c.w.late.Go(func() { c.provider(context.WithoutCancel(ctx), apiNext, s, u, tok, ref, delay) })
		c.release(u, time.Duration(s.WindowSeconds+5)*time.Second)
	default: // the user cancels
		c.cancel(ctx, apiIdx, s, u, tok)
		c.release(u, 0)
	}
}

// joinWaitlist puts a user who found the sale sold out on its waitlist;
// the user stays there (and out of the client's reuse) until LeaveWaitlists.
func (c *buyer) joinWaitlist(ctx context.Context, apiIdx int, s SaleSpec, u int64) bool {
	a, _ := c.w.C.do(ctx, apiIdx, http.MethodPost, client.WaitlistPath(s.ID), u, nil,
		Event{Op: OpWaitJoin, Sale: s.ID, User: u})
	if a.HTTP != http.StatusOK {
		return false
	}
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	c.w.waiters[s.ID] = append(c.w.waiters[s.ID], u)
	return true
}

// LeaveWaitlists takes every user the run put on a waitlist off it again
// (a user already handed a unit is not waiting: 204 all the same), each
// retried while the answer is unknown, so the final probes meet sales
// whose free units are on open sale.
func (w *Workload) LeaveWaitlists(ctx context.Context) {
	w.mu.Lock()
	waiters := w.waiters
	w.waiters = map[int64][]int64{}
	w.mu.Unlock()
	for _, sale := range slices.Sorted(maps.Keys(waiters)) {
		for i, u := range waiters[sale] {
			for attempt := 0; attempt < 10 && ctx.Err() == nil; attempt++ {
				a, _ := w.C.do(ctx, i+attempt, http.MethodDelete, client.WaitlistPath(sale), u, nil,
					Event{Op: OpWaitLeave, Sale: sale, User: u})
				if a.HTTP == http.StatusNoContent {
					break
				}
				sleep(ctx, time.Second)
			}
		}
	}
}

func (c *buyer) cancel(ctx context.Context, apiIdx int, s SaleSpec, u int64, tok string) {
	for attempt := 0; attempt < 5 && ctx.Err() == nil; attempt++ {
		a, _ := c.w.C.do(ctx, apiIdx+attempt, http.MethodPost, client.CancelPath(tok), u, nil,
			Event{Op: OpCancel, Sale: s.ID, User: u, Token: tok})
		if !unknown(a) {
			return
		}
		sleep(ctx, 500*time.Millisecond)
	}
}

// waitPending polls the reservation until it leaves QUEUED (or its window
// and some slack pass).
func (c *buyer) waitPending(ctx context.Context, apiIdx int, s SaleSpec, u int64, tok string) (domain.ReservationStatus, time.Time) {
	deadline := time.Now().Add(time.Duration(s.WindowSeconds)*time.Second + 10*time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		a, _ := c.w.C.do(ctx, apiIdx, http.MethodGet, client.ReservationPath(tok), u, nil, Event{Op: OpGet, Sale: s.ID, User: u, Token: tok})
		if a.HTTP == http.StatusOK {
			st := domain.ReservationStatus(a.str("status"))
			if st != domain.StatusQueued {
				payBy, _ := time.Parse(time.RFC3339, a.str("pay_by"))
				return st, payBy
			}
		}
		sleep(ctx, 300*time.Millisecond)
	}
	return domain.StatusQueued, time.Time{}
}

// provider sends the webhook after delay and retries it, as a provider
// does, until it is answered (a 200, or a refusal that retrying cannot
// change); what is still unanswered is retried by the final probe.
func (c *buyer) provider(ctx context.Context, apiIdx int, s SaleSpec, u int64, tok, ref string, delay time.Duration) {
	sleep(ctx, delay)
	backoff := 500 * time.Millisecond
	for attempt := 0; attempt < 6; attempt++ {
		a, _ := c.w.C.webhook(ctx, apiIdx+attempt, tok, ref, s.PriceCents, Event{Op: OpWebhook, Sale: s.ID, User: u})
		if !unknown(a) {
			return
		}
		sleep(ctx, backoff)
		backoff *= 2
	}
}

// operator adds and withdraws stock, pauses and resumes sales, and puts
// users on the blacklist for a while.
type operator struct {
	w           *Workload
	rng         *rand.Rand
	blacklisted map[int64]bool
	paused      map[int64]bool
	// A pause or a blacklist entry left without an answer may still take
	// effect when the instance holding it runs again (one a fault froze),
	// after a later resume or removal went through another: undo lifts
	// it all the same.
	mayPause, mayBlacklist map[int64]bool
}

func (o *operator) run(ctx context.Context) {
	for ctx.Err() == nil {
		sleep(ctx, time.Duration(3000+o.rng.IntN(5000))*time.Millisecond)
		if ctx.Err() != nil {
			return
		}
		s := o.w.Sales[o.rng.IntN(len(o.w.Sales))]
		api := o.rng.IntN(2)
		switch o.rng.IntN(4) {
		case 0:
			o.stock(ctx, api, s, int64(1+o.rng.IntN(10)))
		case 1:
			o.stock(ctx, api, s, -int64(1+o.rng.IntN(5)))
		case 2:
			o.control(ctx, api, s.ID, OpPause)
			sleep(ctx, time.Duration(500+o.rng.IntN(2500))*time.Millisecond)
			o.control(ctx, api, s.ID, OpResume)
		case 3:
			// A user some client is about to use (client ids are dense).
			u := int64(1+o.rng.IntN(o.w.Clients))*10_000_000 + int64(1+o.rng.IntN(40))
			o.blacklist(ctx, api, u, true)
			sleep(ctx, time.Duration(1000+o.rng.IntN(4000))*time.Millisecond)
			o.blacklist(ctx, api, u, false)
		}
	}
}

func (o *operator) stock(ctx context.Context, api int, s SaleSpec, delta int64) {
	o.w.C.admin(ctx, api, http.StatusOK, Event{Op: OpStock, Sale: s.ID, Detail: fmt.Sprintf("delta %+d", delta)},
		func(ctx context.Context, c *client.Client) error {
			_, err := c.AddStock(ctx, s.ID, delta, "")
			return err
		})
}

// control pauses or resumes, retrying while the answer is unknown; a
// resume not yet confirmed is retried by undo.
func (o *operator) control(ctx context.Context, api int, sale int64, op string) bool {
	send := (*client.Client).Resume
	if op == OpPause {
		send = (*client.Client).Pause
	}
	for attempt := 0; attempt < 5; attempt++ {
		e := o.w.C.admin(ctx, api+attempt, http.StatusOK, Event{Op: op, Sale: sale}, func(ctx context.Context, c *client.Client) error {
			_, err := send(c, ctx, sale)
			return err
		})
		if op == OpPause && unknownAnswer(e) {
			o.mayPause[sale] = true
		}
		if e.HTTP == http.StatusOK {
			o.paused[sale] = op == OpPause
			return true
		}
		if op == OpPause && !unknownAnswer(e) {
			return false
		}
		o.paused[sale] = true // a resume not confirmed: undo retries it
		sleep(ctx, time.Second)
	}
	return false
}

func (o *operator) blacklist(ctx context.Context, api int, u int64, on bool) bool {
	send, op := (*client.Client).Blacklist, OpBlacklist
	if !on {
		send, op = (*client.Client).Unblacklist, OpUnblacklist
	}
	for attempt := 0; attempt < 5; attempt++ {
		e := o.w.C.admin(ctx, api+attempt, http.StatusNoContent, Event{Op: op, User: u}, func(ctx context.Context, c *client.Client) error {
			return send(c, ctx, u)
		})
		if on && unknownAnswer(e) {
			o.mayBlacklist[u] = true
		}
		if e.HTTP == http.StatusNoContent {
			o.blacklisted[u] = on
			return true
		}
		o.blacklisted[u] = true // an unconfirmed removal: undo retries it
		sleep(ctx, time.Second)
	}
	return false
}

// undo resumes every paused sale and removes every blacklist entry, so the
// final probes see the sales as the clients found them.
func (o *operator) undo(ctx context.Context) {
	var users []int64
	for u, on := range o.blacklisted {
		if on || o.mayBlacklist[u] {
			users = append(users, u)
		}
	}
	sort.Slice(users, func(i, j int) bool { return users[i] < users[j] })
	for _, u := range users {
		for range 30 {
			if o.blacklist(ctx, 0, u, false) {
				break
			}
		}
	}
	for _, s := range o.w.Sales {
		if o.paused[s.ID] || o.mayPause[s.ID] {
			for range 30 {
				if o.control(ctx, 0, s.ID, OpResume) {
					break
				}
			}
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
