package reservation

import (
	"context"
	"sync"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/keyedmac"
	"github.com/seckill/seckill/redisgateway"
)

// Lottery is the opening lottery (contract 1.2, "Fairness"): a user's chance does not
// grow with how many requests they send or how fast they come back.
//
// For pool after a sale opens, a reservation only enters the user in the
// sale's pool (Redis, once per user and instance) and answers 429 with
// Retry-After at the draw. Each user holds a ticket, an HMAC of the sale
// and the user under the fleet's token key: neither the request rate nor
// the moment of entry changes it. From the draw, users are admitted in
// bands of stock_total by ticket rank: band 0 at the draw, band b at
// draw + b·grace, so units that earlier bands leave unsold (a winner who
// never came back, a reservation that expired) go to the next ranks.
// Users who did not enter come after every entrant. Until their band, a
// user gets 429 with Retry-After at its start, whatever they send.
type Lottery struct {
	tickets     *keyedmac.Tickets
	pool, grace time.Duration
	rdb         *redisgateway.Client

	mu      sync.Mutex
	entered map[int64]map[int64]struct{} // sale -> users this instance entered
	ranks   map[int64]map[int64]int64    // sale -> user -> rank after the draw (size for late users)
	sizes   map[int64]int64              // sale -> the pool's size after the draw
}

// lotteryMax: past draw + this, everyone is admitted (the bands have long
// reached any crowd a sale of this stock meets).
const lotteryMax = 10 * time.Minute

// NewLottery is the opening lottery of pool and grace (at least a second),
// its tickets drawn under tokenKey.
func NewLottery(tokenKey []byte, pool, grace time.Duration, rdb *redisgateway.Client) *Lottery {
	return &Lottery{tickets: keyedmac.NewTickets(tokenKey, "seckill opening lottery v1"), pool: pool, grace: max(grace, time.Second), rdb: rdb,
		entered: map[int64]map[int64]struct{}{}, ranks: map[int64]map[int64]int64{}, sizes: map[int64]int64{}}
}

// Ticket is a user's draw at a sale: uniform in [0, 2^53), so a float64
// score keeps it exactly.
func (l *Lottery) Ticket(saleID, userID int64) float64 {
	return float64(l.tickets.Draw(saleID, userID))
}

// errNotOpen: with a lottery the opening is this process's clock's, so a
// request the script's clock would let in early cannot pass the pool.
var errNotOpen = domain.ErrSaleNotStarted

// Wait is how long the user must wait before reserving (0: now). An
// error (Redis unreachable) leaves the decision to the caller, but for
// errNotOpen.
func (l *Lottery) Wait(ctx context.Context, sale *domain.Sale, userID int64, now time.Time) (time.Duration, error) {
	draw := sale.StartsAt.Add(l.pool)
	if l.pool <= 0 || now.After(draw.Add(lotteryMax)) {
		return 0, nil
	}
	if now.Before(sale.StartsAt) {
		return 0, errNotOpen
	}
	if now.Before(draw) {
		if err := l.enter(ctx, sale.ID, userID); err != nil {
			return 0, err
		}
		return draw.Sub(now), nil
	}
	k := max(sale.StockTotal, 1)
	if size, ok := l.size(sale.ID); ok && !now.Before(draw.Add(time.Duration(size/k)*l.grace)) {
		return 0, nil // the last band (late users') has begun: no need to ask
	}
	rank, err := l.rank(ctx, sale.ID, userID)
	if err != nil {
		return 0, err
	}
	turn := draw.Add(time.Duration(rank/k) * l.grace)
	if !now.Before(turn) {
		return 0, nil
	}
	return turn.Sub(now), nil
}

func (l *Lottery) size(saleID int64) (int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, ok := l.sizes[saleID]
	return n, ok
}

func (l *Lottery) enter(ctx context.Context, saleID, userID int64) error {
	l.mu.Lock()
	_, done := l.entered[saleID][userID]
	l.mu.Unlock()
	if done {
		return nil
	}
	if err := l.rdb.JoinPool(ctx, saleID, userID, l.Ticket(saleID, userID)); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.entered[saleID] == nil {
		l.entered[saleID] = map[int64]struct{}{}
	}
	l.entered[saleID][userID] = struct{}{}
	return nil
}

// rank is the user's place after the draw, read once.
func (l *Lottery) rank(ctx context.Context, saleID, userID int64) (int64, error) {
	l.mu.Lock()
	r, ok := l.ranks[saleID][userID]
	l.mu.Unlock()
	if ok {
		return r, nil
	}
	r, size, _, err := l.rdb.PoolRank(ctx, saleID, userID) // a late user's rank is the pool's size
	if err != nil {
		return 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sizes[saleID] = size
	if l.ranks[saleID] == nil {
		l.ranks[saleID] = map[int64]int64{}
	}
	l.ranks[saleID][userID] = r
	return r, nil
}

// Sweep forgets the sales whose lottery is over.
func (l *Lottery) Sweep(open []*domain.Sale, now time.Time) {
	l.mu.Lock()
	none := len(l.entered) == 0 && len(l.ranks) == 0
	l.mu.Unlock()
	if none {
		return // nothing to forget: no map of every open sale each second
	}
	live := map[int64]bool{}
	for _, s := range open {
		live[s.ID] = now.Before(s.StartsAt.Add(l.pool + lotteryMax))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for id := range l.entered {
		if !live[id] {
			delete(l.entered, id)
		}
	}
	for id := range l.ranks {
		if !live[id] {
			delete(l.ranks, id)
			delete(l.sizes, id)
		}
	}
}

// Sales is how many sales the lottery remembers entries or ranks of.
func (l *Lottery) Sales() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.entered)
	for id := range l.ranks {
		if _, ok := l.entered[id]; !ok {
			n++
		}
	}
	return n
}
