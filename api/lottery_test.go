package api

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

// The opening lottery decides who buys, not the request rate: fifteen
// users hammering every 50 ms and fifteen asking every 500 ms, all before
// and through the opening of a 5-unit sale. Nobody reserves before the
// draw; the five lowest tickets among those who entered, and only they,
// get the units, whichever group they are in; the next band waits for
// its turn, then meets the sold-out sale.
func TestOpeningLotteryAdmitsByTicketNotByRate(t *testing.T) {
	const pool, grace = 1500 * time.Millisecond, 3 * time.Second
	h := MustHarness(t, func(c *config.Config) {
		c.OpeningPool, c.OpeningGrace = pool, grace
		c.PerUserRPS, c.PerUserBurst = 100, 100
	})
	opens := time.Now().Add(700 * time.Millisecond)
	sale := h.MustWarmSale(5, func(s *domain.Sale) { s.StartsAt = opens })
	draw := opens.Add(pool)

	var users []lotteryUser
	for i := range 30 {
		every := 50 * time.Millisecond
		if i%2 == 1 {
			every = 500 * time.Millisecond
		}
		users = append(users, lotteryUser{testenv.UniqueUser(), every})
	}
	won := askUntilWon(t, h, sale.ID, users, opens, draw.Add(grace/2))

	// Every user entered the pool (each asked at least twice in it): the
	// winners are the five lowest tickets.
	byTicket := byLotteryTicket(h, sale.ID, users)
	var want, got []int64
	fast := 0
	for _, u := range byTicket[:5] {
		want = append(want, u.id)
		if u.every < 100*time.Millisecond {
			fast++
		}
	}
	for id, at := range won {
		got = append(got, id)
		require.False(t, at.Before(draw), "user %d reserved before the draw", id)
	}
	slices.Sort(want)
	slices.Sort(got)
	require.Equal(t, want, got, "the units go to the lowest tickets (%d of them fast)", fast)

	// The next band (ranks 5-9) waits for its turn, then meets a sold-out sale.
	next := h.MustToken(byTicket[5].id, "")
	r := h.reserve(sale.ID, next, "lottery-next-1")
	require.Equal(t, http.StatusTooManyRequests, r.Status, string(r.Body))
	wait, err := strconv.Atoi(r.Header.Get("Retry-After"))
	require.NoError(t, err)
	require.LessOrEqual(t, time.Duration(wait)*time.Second, grace+time.Second)
	// A user who never entered comes after all thirty entrants: band 6.
	late := h.reserve(sale.ID, h.MustToken(testenv.UniqueUser(), ""), "lottery-late-1")
	require.Equal(t, http.StatusTooManyRequests, late.Status, string(late.Body))
	lateWait, err := strconv.Atoi(late.Header.Get("Retry-After"))
	require.NoError(t, err)
	require.InDelta(t, time.Until(draw.Add(6*grace)).Seconds(), float64(lateWait), 1.5)
	time.Sleep(time.Until(draw.Add(grace)))
	r = h.reserve(sale.ID, next, "lottery-next-1")
	require.Equal(t, http.StatusGone, r.Status, fmt.Sprintf("%d %s", r.Status, r.Body))
}

// lotteryUser asks for a unit every so often.
type lotteryUser struct {
	id    int64
	every time.Duration
}

// askUntilWon has every user ask until they get a 202 or until, and
// returns when each winner got theirs.
func askUntilWon(t *testing.T, h *harness, saleID int64, users []lotteryUser, opens, until time.Time) map[int64]time.Time {
	var mu sync.Mutex
	won := map[int64]time.Time{}
	var wg sync.WaitGroup
	for _, u := range users {
		wg.Go(func() {
			tok := h.MustToken(u.id, "")
			for time.Now().Before(until) {
				r := h.reserve(saleID, tok, "lottery-"+strconv.FormatInt(u.id, 10))
				switch r.Status {
				case http.StatusAccepted:
					mu.Lock()
					won[u.id] = time.Now()
					mu.Unlock()
					return
				case http.StatusTooManyRequests:
					if r.Header.Get("Retry-After") == "" {
						t.Errorf("429 without Retry-After")
					}
				case http.StatusForbidden:
					if time.Now().After(opens.Add(100 * time.Millisecond)) {
						t.Errorf("user %d: 403 after the opening: %s", u.id, r.Body)
					}
				default:
					t.Errorf("user %d: %d %s", u.id, r.Status, r.Body)
					return
				}
				time.Sleep(u.every)
			}
		})
	}
	wg.Wait()
	return won
}

// byLotteryTicket sorts users by their ticket at the sale, lowest first.
func byLotteryTicket(h *harness, saleID int64, users []lotteryUser) []lotteryUser {
	byTicket := slices.Clone(users)
	slices.SortFunc(byTicket, func(a, b lotteryUser) int {
		ta, tb := h.services.Lottery.Ticket(saleID, a.id), h.services.Lottery.Ticket(saleID, b.id)
		switch {
		case ta < tb:
			return -1
		case ta > tb:
			return 1
		}
		return 0
	})
	return byTicket
}
