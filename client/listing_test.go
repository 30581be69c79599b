package client_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

// The listings through a real API: the iterators walk every page, each
// sale once and in order (the storefront's upcoming sales soonest first,
// the operators' newest first), stop when the loop does, and end with the
// refusal of a bad limit.
func TestListingsPageThroughTheAPI(t *testing.T) {
	env := testenv.ProcEnv(t, "client-listing-"+fmt.Sprint(time.Now().UnixNano()), nil)
	api := testenv.MustAPI(t, "api", env)
	st := testenv.MustStore(t)
	now := time.Now().UTC()
	var mine []int64
	for i := range 5 {
		opens := now.Add(time.Hour + time.Duration(5-i)*time.Minute) // the newest sale opens first
		mine = append(mine, testenv.MustSale(t, st, 1, func(s *domain.Sale) { s.StartsAt, s.EndsAt = opens, opens.Add(time.Hour) }).ID)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, id := range mine {
			_ = st.MarkFinished(ctx, id)
		}
	})
	ctx := t.Context()
	buyer := client.New(api.URL, "", 15*time.Second)

	page, err := buyer.SaleList(ctx, client.SaleQuery{Status: "upcoming", Limit: 2})
	require.NoError(t, err)
	require.Len(t, page.Sales, 2)
	require.NotEmpty(t, page.NextCursor)

	var order []int64
	seen := map[int64]int{}
	var last time.Time
	for v, err := range buyer.AllSales(ctx, client.SaleQuery{Status: "upcoming", Sort: "starts_at", Limit: 2}) {
		require.NoError(t, err)
		require.Equal(t, domain.StateUpcoming, v.State)
		require.False(t, v.StartsAt.Before(last), "soonest first")
		last = v.StartsAt
		seen[v.SaleID]++
		order = append(order, v.SaleID)
	}
	for id, n := range seen {
		require.Equal(t, 1, n, "sale %d listed %d times", id, n)
	}
	var got []int64
	for _, id := range order {
		if id >= mine[0] && id <= mine[4] {
			got = append(got, id)
		}
	}
	require.Equal(t, []int64{mine[4], mine[3], mine[2], mine[1], mine[0]}, got, "by opening, the newest sale first")

	admin := client.New(api.URL, testenv.MustToken(t, testenv.AdminUser), 15*time.Second)
	var newest []int64
	for s, err := range admin.AllOperatorSales(ctx, 3) {
		require.NoError(t, err)
		if len(newest) > 0 {
			require.Less(t, s.SaleID, newest[len(newest)-1], "newest first")
		}
		newest = append(newest, s.SaleID)
		if len(newest) == 4 {
			break // the walk stops with the loop, on its second page
		}
	}
	require.Len(t, newest, 4, "the test's five sales are there to page through")
	require.Contains(t, newest, mine[4])
	first, err := admin.Sales(ctx)
	require.NoError(t, err)
	require.Equal(t, newest[0], first[0].SaleID)

	var errs []error
	for _, err := range buyer.AllSales(ctx, client.SaleQuery{Limit: 1000}) {
		errs = append(errs, err)
	}
	require.Len(t, errs, 1)
	require.Equal(t, domain.EInvalid, domain.ErrorCode(errs[0]))
}
