package api

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/wire"
)

// listPage is one GET of a listing: its status, its body decoded into out
// on 200, whether the body had next_cursor at all, and the raw answer.
func (h *harness) listPage(path, token string, q url.Values, out any) (response, bool) {
	h.tb.Helper()
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	r := h.do("GET", path, token, "")
	if r.Status != 200 {
		return r, false
	}
	require.NoError(h.tb, json.Unmarshal(r.Body, out), "%s", r.Body)
	var keys map[string]json.RawMessage
	require.NoError(h.tb, json.Unmarshal(r.Body, &keys))
	_, has := keys["next_cursor"]
	return r, has
}

// creator creates sales from the test's store while a client pages.
type creator struct {
	t     *testing.T
	stop  chan struct{}
	wg    sync.WaitGroup
	ids   []int64
	count atomic.Int64
	errs  atomic.Int64
}

// createDuring creates sales, their openings given by opens, until done.
func createDuring(t *testing.T, h *harness, opens func(i int) time.Duration) *creator {
	c := &creator{t: t, stop: make(chan struct{})}
	stop := c.stop
	c.wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			now := time.Now().UTC()
			s := &domain.Sale{GoodsID: 1, Title: "created while paging", PriceCents: 100, StockTotal: 1, Buckets: 1,
				StartsAt: now.Add(opens(i)), EndsAt: now.Add(opens(i) + time.Hour), PaymentWindowSeconds: 900, PerUserLimit: 1}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := h.st.CreateSale(ctx, s); err != nil {
				c.errs.Add(1)
			} else {
				c.ids = append(c.ids, s.ID)
				c.count.Add(1)
			}
			cancel()
			time.Sleep(10 * time.Millisecond)
		}
	})
	return c
}

// between waits for a sale created since n were: one between two pages.
func (c *creator) between(n int64) int64 {
	c.t.Helper()
	require.Eventually(c.t, func() bool { return c.count.Load() > n }, 10*time.Second, time.Millisecond)
	return c.count.Load()
}

// done stops the creation and answers the sales created.
func (c *creator) done() []int64 {
	close(c.stop)
	c.wg.Wait()
	require.Zero(c.t, c.errs.Load(), "sales created while paging failed")
	return c.ids
}

// finishAtEnd retires the test's sales when it ends, so later runs list
// only their own.
func finishAtEnd(t *testing.T, h *harness, ids *[]int64) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, id := range *ids {
			_ = h.st.MarkFinished(ctx, id)
		}
	})
}

// The storefront's listing, paged in both orders while sales are created
// with openings all over it, lists every sale that existed before the
// first page exactly once, each as GET /api/v1/sales/{id} shows it, in
// opening order; the last page has no next_cursor; pages are cacheable
// for a second.
func TestStorefrontListingCoversEverySaleOnceWhileSalesAreCreated(t *testing.T) {
	h := MustHarness(t)
	var mine []int64
	finishAtEnd(t, h, &mine)
	now := time.Now()
	for i := range 40 {
		opens := time.Duration(i%20-10) * time.Minute // live and upcoming, two sales an opening
		mine = append(mine, testenv.MustSale(t, h.st, int64(i+1), func(s *domain.Sale) {
			s.StartsAt, s.EndsAt = now.Add(opens), now.Add(opens+2*time.Hour)
		}).ID)
	}
	listed := map[int64]domain.SaleView{}
	for _, sort := range []string{"-starts_at", "starts_at"} {
		creating := createDuring(t, h, func(i int) time.Duration { return time.Duration(i%40-20) * 30 * time.Second })
		var made int64
		seen := map[int64]int{}
		var prev *domain.SaleView
		cursor := ""
		for pages := 0; ; pages++ {
			require.Less(t, pages, 1000)
			q := url.Values{"limit": {"7"}, "sort": {sort}}
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			var page wire.SalePage
			r, hasNext := h.listPage("/api/v1/sales", "", q, &page)
			require.Equal(t, 200, r.Status, "%s", r.Body)
			require.Equal(t, "public, max-age=1", r.Header.Get("Cache-Control"))
			require.LessOrEqual(t, len(page.Sales), 7)
			for i := range page.Sales {
				v := &page.Sales[i]
				seen[v.SaleID]++
				listed[v.SaleID] = *v
				require.NotEqual(t, domain.StateEnded, v.State)
				if prev != nil {
					c := v.StartsAt.Compare(prev.StartsAt)
					if c == 0 {
						c = int(v.SaleID - prev.SaleID)
					}
					require.Equal(t, sort == "starts_at", c > 0, "sort %s: %d after %d", sort, v.SaleID, prev.SaleID)
				}
				prev = v
			}
			require.Equal(t, page.NextCursor != "", hasNext, "next_cursor is absent, not empty, on the last page")
			if !hasNext {
				break
			}
			cursor = page.NextCursor
			made = creating.between(made)
		}
		later := creating.done()
		mine = append(mine, later...)
		t.Logf("sort %s: %d sales listed, %d created while paging", sort, len(seen), len(later))
		require.NotEmpty(t, later, "sales were created while paging")
		for id, n := range seen {
			require.Equal(t, 1, n, "sort %s: sale %d listed %d times", sort, id, n)
		}
		for _, id := range mine[:40] {
			require.Contains(t, seen, id, "sort %s: a sale that existed before the first page", sort)
		}
	}
	for _, id := range []int64{mine[0], mine[39]} {
		var one domain.SaleView
		r := h.do("GET", "/api/v1/sales/"+strconv.FormatInt(id, 10), "", "")
		require.Equal(t, 200, r.Status)
		require.NoError(t, json.Unmarshal(r.Body, &one))
		require.Equal(t, one, listed[id], "the listing's view is the sale's")
	}
}

// status=live lists started sales only, status=upcoming the others.
func TestStorefrontListingStatusFilter(t *testing.T) {
	h := MustHarness(t)
	var mine []int64
	finishAtEnd(t, h, &mine)
	now := time.Now()
	live := testenv.MustSale(t, h.st, 1)
	upcoming := testenv.MustSale(t, h.st, 1, func(s *domain.Sale) { s.StartsAt, s.EndsAt = now.Add(time.Hour), now.Add(2*time.Hour) })
	mine = append(mine, live.ID, upcoming.ID)
	for status, want := range map[string]int64{"live": live.ID, "upcoming": upcoming.ID} {
		ids := map[int64]bool{}
		cursor := ""
		for {
			q := url.Values{"status": {status}, "limit": {"200"}}
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			var page wire.SalePage
			r, _ := h.listPage("/api/v1/sales", "", q, &page)
			require.Equal(t, 200, r.Status, "%s", r.Body)
			for _, v := range page.Sales {
				ids[v.SaleID] = true
				if status == "upcoming" {
					require.Equal(t, domain.StateUpcoming, v.State)
				} else {
					require.Contains(t, []domain.SaleState{domain.StateLive, domain.StateSoldOut}, v.State)
				}
			}
			if cursor = page.NextCursor; cursor == "" {
				break
			}
		}
		require.True(t, ids[want], "%s lists sale %d", status, want)
		other := map[int64]int64{live.ID: upcoming.ID, upcoming.ID: live.ID}[want]
		require.False(t, ids[other], "%s lists sale %d", status, other)
	}
}

// A changed, foreign or misplaced cursor, a limit out of bounds, a bad
// status or sort, a parameter given twice: 400 invalid_request with the
// contract's error body, on both listings.
func TestSaleListingsRefuseBadCursorsAndLimits(t *testing.T) {
	h := MustHarness(t)
	var mine []int64
	finishAtEnd(t, h, &mine)
	for range 3 {
		mine = append(mine, testenv.MustSale(t, h.st, 1).ID)
	}
	var pub wire.SalePage
	r, _ := h.listPage("/api/v1/sales", "", url.Values{"limit": {"1"}}, &pub)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	require.NotEmpty(t, pub.NextCursor)
	var adm wire.OperatorSales
	r, _ = h.listPage("/admin/v1/sales", h.admin, url.Values{"limit": {"1"}}, &adm)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	require.Len(t, adm.Sales, 1)
	require.NotEmpty(t, adm.NextCursor)

	flip := func(c string, i int) string {
		b := []byte(c)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		return string(b)
	}
	bad := func(path, token, rawQuery string) {
		t.Helper()
		r := h.do("GET", path+"?"+rawQuery, token, "")
		require.Equal(t, 400, r.Status, "%s?%s: %s", path, rawQuery, r.Body)
		require.Equal(t, domain.EInvalid, r.errCode(t))
		require.Empty(t, r.Header.Get("Cache-Control"))
	}
	for _, q := range []string{"limit=0", "limit=201", "limit=-3", "limit=ten", "limit=1&limit=2", "status=ended", "sort=price",
		"cursor=" + flip(pub.NextCursor, 5), "cursor=" + flip(pub.NextCursor, len(pub.NextCursor)-1), "cursor=" + pub.NextCursor + "x",
		"cursor=" + adm.NextCursor, "cursor=" + pub.NextCursor + "&status=upcoming", "cursor=" + pub.NextCursor + "&cursor=" + pub.NextCursor} {
		bad("/api/v1/sales", "", q)
	}
	for _, q := range []string{"limit=0", "limit=501", "limit=x", "cursor=" + flip(adm.NextCursor, 10), "cursor=" + pub.NextCursor,
		"cursor=%21%21"} {
		bad("/admin/v1/sales", h.admin, q)
	}
	var next wire.SalePage
	r, _ = h.listPage("/api/v1/sales", "", url.Values{"limit": {"1"}, "cursor": {pub.NextCursor}}, &next)
	require.Equal(t, 200, r.Status, "the cursor still reads after the refusals: %s", r.Body)
	require.NotEqual(t, pub.Sales[0].SaleID, next.Sales[0].SaleID)
}

// The operators' listing without parameters is its first page of 100,
// newest first, as before it was paged; paged while sales are created, it
// lists each sale that existed before its first page once.
func TestAdminSalesListingPagesEverySaleOnce(t *testing.T) {
	h := MustHarness(t)
	var mine []int64
	finishAtEnd(t, h, &mine)
	for range 3 {
		mine = append(mine, testenv.MustSale(t, h.st, 2).ID)
	}
	var first wire.OperatorSales
	r, _ := h.listPage("/admin/v1/sales", h.admin, nil, &first)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	before, err := h.st.ListSalesBefore(context.Background(), 0, 1_000_000)
	require.NoError(t, err)
	require.Len(t, first.Sales, min(len(before), 100))
	require.Equal(t, len(before) > 100, first.NextCursor != "")
	require.Equal(t, before[0].ID, first.Sales[0].SaleID, "newest first")

	creating := createDuring(t, h, func(int) time.Duration { return 0 })
	var made int64
	seen := map[int64]int{}
	var last int64
	cursor := ""
	for {
		q := url.Values{"limit": {"37"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page wire.OperatorSales
		r, _ := h.listPage("/admin/v1/sales", h.admin, q, &page)
		require.Equal(t, 200, r.Status, "%s", r.Body)
		for _, s := range page.Sales {
			seen[s.SaleID]++
			if last > 0 {
				require.Less(t, s.SaleID, last)
			}
			last = s.SaleID
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
		made = creating.between(made)
	}
	mine = append(mine, creating.done()...)
	for _, s := range before {
		require.Equal(t, 1, seen[s.ID], "sale %d", s.ID)
	}
	for id, n := range seen {
		require.Equal(t, 1, n, "sale %d listed %d times", id, n)
	}
}

// The storefront's listing is a read route: the per-address read bucket
// limits it.
func TestStorefrontListingIsRateLimitedAsAReadRoute(t *testing.T) {
	h := MustHarness(t, func(c *config.Config) {
		c.TrustedAddrs = nil
		c.ReadRPS, c.ReadBurst = 0.01, 3
	})
	for i, want := range []int{200, 200, 200, 429} {
		r := h.do("GET", "/api/v1/sales?limit=1", "", "")
		require.Equal(t, want, r.Status, "read %d: %s", i, r.Body)
		if want == 429 {
			require.Equal(t, domain.ERateLimited, r.errCode(t))
			require.NotEmpty(t, r.Header.Get("Retry-After"))
		}
	}
}
