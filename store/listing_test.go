package store_test

import (
	"cmp"
	"database/sql"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/store"
)

// listAll pages through the storefront's listing as q asks, limit a page,
// and answers the sales in the order listed.
func listAll(t *testing.T, st *store.Store, q store.ListingQuery) []*domain.Sale {
	t.Helper()
	var all []*domain.Sale
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10_000, "the listing does not end")
		page, err := st.ListBuyableSales(ctx(t), q)
		require.NoError(t, err)
		require.LessOrEqual(t, len(page), q.Limit)
		all = append(all, page...)
		if len(page) < q.Limit {
			return all
		}
		last := page[len(page)-1]
		q.After = &store.ListingKey{StartsAt: last.StartsAt, ID: last.ID}
	}
}

// The storefront's listing holds the sales a buyer can see (started and
// upcoming, not ended, stopped or retired), each once, in opening order
// both ways, whatever the page size; ties on the opening go by id.
func TestBuyableSalesListEachVisibleSaleOnceInOpeningOrder(t *testing.T) {
	st := testenv.MustStore(t)
	now := time.Now().UTC()
	at := func(d time.Duration) testenv.SaleOption {
		return func(s *domain.Sale) { s.StartsAt, s.EndsAt = now.Add(d), now.Add(d+2*time.Hour) }
	}
	var live, upcoming []int64
	for i := range 4 {
		live = append(live, testenv.MustSale(t, st, 1, at(-time.Duration(i+1)*time.Minute)).ID)
		upcoming = append(upcoming, testenv.MustSale(t, st, 1, at(time.Duration(i+1)*time.Minute)).ID)
	}
	tie := testenv.MustSale(t, st, 1, at(-time.Minute)).ID // opens with live[0]
	live = append(live, tie)
	ended := testenv.MustSale(t, st, 1, func(s *domain.Sale) { s.StartsAt, s.EndsAt = now.Add(-2*time.Hour), now.Add(-time.Hour) }).ID
	stopped := testenv.MustSale(t, st, 1, at(-time.Minute)).ID
	_, err := st.SetSaleControl(ctx(t), stopped, domain.ControlStopped)
	require.NoError(t, err)
	retired := testenv.MustSale(t, st, 1, at(-time.Minute)).ID
	require.NoError(t, st.MarkFinished(ctx(t), retired))

	for _, c := range []struct {
		name              string
		started, upcoming bool
		want              []int64
	}{
		{"both", true, true, append(slices.Clone(live), upcoming...)},
		{"started", true, false, live},
		{"upcoming", false, true, upcoming},
	} {
		for _, asc := range []bool{false, true} {
			for _, limit := range []int{1, 3, 200} {
				got := listAll(t, st, store.ListingQuery{Now: now, Started: c.started, Upcoming: c.upcoming, Ascending: asc, Limit: limit})
				ids := make([]int64, len(got))
				for i, s := range got {
					ids[i] = s.ID
				}
				require.Len(t, ids, len(slices.Compact(slices.Sorted(slices.Values(ids)))), "%s asc=%v limit=%d: a sale listed twice", c.name, asc, limit)
				for _, id := range c.want {
					require.Contains(t, ids, id, "%s asc=%v limit=%d", c.name, asc, limit)
				}
				for _, id := range []int64{ended, stopped, retired} {
					require.NotContains(t, ids, id, "%s asc=%v limit=%d", c.name, asc, limit)
				}
				require.True(t, slices.IsSortedFunc(got, func(a, b *domain.Sale) int {
					if c := a.StartsAt.Compare(b.StartsAt); c != 0 {
						return c
					}
					return cmp.Compare(a.ID, b.ID)
				}) == asc || len(got) < 2, "%s asc=%v limit=%d: out of order", c.name, asc, limit)
				for _, s := range got {
					require.True(t, s.EndsAt.After(now))
					require.True(t, c.upcoming || !s.StartsAt.After(now), "an upcoming sale among the started ones")
					require.True(t, c.started || s.StartsAt.After(now), "a started sale among the upcoming ones")
				}
			}
		}
	}
}

// explain is EXPLAIN's row of the one table query reads.
func explain(t *testing.T, st *store.Store, query string) map[string]string {
	t.Helper()
	rows, err := st.DB.QueryContext(ctx(t), "EXPLAIN "+query)
	require.NoError(t, err)
	defer rows.Close()
	cols, err := rows.Columns()
	require.NoError(t, err)
	var out map[string]string
	for rows.Next() {
		require.Nil(t, out, "one table, one row")
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		require.NoError(t, rows.Scan(ptrs...))
		out = map[string]string{}
		for i, c := range cols {
			out[c] = vals[i].String
		}
	}
	require.NoError(t, rows.Err())
	return out
}

// The operators' listing is every sale, newest first, a page before the
// last id of the previous one.
func TestListSalesBeforeIsNewestFirst(t *testing.T) {
	st := testenv.MustStore(t)
	var ids []int64
	for range 3 {
		ids = append(ids, testenv.MustSale(t, st, 1).ID)
	}
	require.NoError(t, st.MarkFinished(ctx(t), ids[1]))
	page, err := st.ListSalesBefore(ctx(t), 0, 2)
	require.NoError(t, err)
	require.Len(t, page, 2)
	require.GreaterOrEqual(t, page[0].ID, ids[2])
	page, err = st.ListSalesBefore(ctx(t), ids[2], 2)
	require.NoError(t, err)
	require.Equal(t, []int64{ids[1], ids[0]}, []int64{page[0].ID, page[1].ID}, "retired or not")
}

// Both listings are read from a fresh replica: a sale appears in them once
// the replica has applied it.
func TestSaleListingsReadTheReplica(t *testing.T) {
	pair := testenv.MustReplicaPair(t)
	st := mustReplicated(t, pair, time.Hour)
	sale := testenv.MustSale(t, st, 1)
	require.NoError(t, pair.CaughtUp(ctx(t)))
	require.NoError(t, pair.StopSQLThread(ctx(t)))
	t.Cleanup(func() { require.NoError(t, pair.StartSQLThread(ctx(t))) })
	unapplied := testenv.MustSale(t, st, 1)

	before := st.Replica().Reads(store.FromReplica)
	buyable, err := st.ListBuyableSales(ctx(t), store.ListingQuery{Now: time.Now(), Started: true, Upcoming: true, Limit: 1000})
	require.NoError(t, err)
	all, err := st.ListSalesBefore(ctx(t), 0, 1000)
	require.NoError(t, err)
	require.Equal(t, before+2, st.Replica().Reads(store.FromReplica))
	for _, list := range [][]*domain.Sale{buyable, all} {
		ids := make([]int64, len(list))
		for i, s := range list {
			ids[i] = s.ID
		}
		require.Contains(t, ids, sale.ID)
		require.NotContains(t, ids, unapplied.ID, "the replica has not applied it")
	}
}

// handlerReads is the rows the session's storage engine calls have read
// so far (MariaDB's Handler_read_* counters but the key lookups' own).
func handlerReads(t *testing.T, st *store.Store) int64 {
	t.Helper()
	rows, err := st.DB.QueryContext(ctx(t), "SHOW SESSION STATUS LIKE 'Handler_read%'")
	require.NoError(t, err)
	defer rows.Close()
	var total int64
	for rows.Next() {
		var name string
		var n int64
		require.NoError(t, rows.Scan(&name, &n))
		total += n
	}
	require.NoError(t, rows.Err())
	return total
}

// With 10,000 sales on show among 60,000 held, every page of the
// storefront's listing is one range of sales_listing read in the index's
// order (no pass over the sales, no sort), and paging through all of them
// each page reads about its own rows: its cost does not grow with the
// sales before it.
func TestBuyableSalesPagesAreIndexRangesAmongTenThousand(t *testing.T) {
	st, err := store.Open(ctx(t), testenv.MustEmptyDatabase(t))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	require.NoError(t, st.Migrate(ctx(t)))
	st.DB.SetMaxOpenConns(1) // one session: its counters are the listing's
	// 50,000 retired sales, then 10,000 open ones opening over the last
	// and the next five hours, twenty to a minute.
	_, err = st.DB.ExecContext(ctx(t), `INSERT INTO sales (goods_id, title, price_cents, stock_total, buckets, starts_at, ends_at,
		payment_window_seconds, finished_at)
		SELECT 1, CONCAT('sale ', seq), 100, 1, 1, NOW(3) + INTERVAL CAST(seq MOD 600 AS SIGNED) - 300 MINUTE, NOW(3) + INTERVAL 1 DAY, 900,
		IF(seq <= 50000, NOW(3), NULL) FROM seq_1_to_60000`)
	require.NoError(t, err)
	_, err = st.DB.ExecContext(ctx(t), "ANALYZE TABLE sales")
	require.NoError(t, err)

	requireIndexRanges(t, st)

	const limit = 200
	q := store.ListingQuery{Now: time.Now(), Started: true, Upcoming: true, Limit: limit + 1}
	overhead := -handlerReads(t, st) + handlerReads(t, st) // what the SHOW itself reads
	seen, pages, most := map[int64]bool{}, 0, int64(0)
	began := time.Now()
	for {
		before := handlerReads(t, st)
		page, err := st.ListBuyableSales(ctx(t), q)
		require.NoError(t, err)
		read := handlerReads(t, st) - before - overhead
		most = max(most, read)
		pages++
		if len(page) <= limit {
			for _, s := range page {
				seen[s.ID] = true
			}
			break
		}
		for _, s := range page[:limit] {
			seen[s.ID] = true
		}
		last := page[limit-1]
		q.After = &store.ListingKey{StartsAt: last.StartsAt, ID: last.ID}
	}
	took := time.Since(began)
	t.Logf("10,000 sales on show among 60,000: %d pages of %d in %s (%s a page), at most %d rows read by a page",
		pages, limit, took.Round(time.Millisecond), (took / time.Duration(pages)).Round(time.Microsecond), most)
	require.Len(t, seen, 10_000)
	require.LessOrEqual(t, most, int64(3*(limit+1)), "a page reads its own rows, not the sales around them")
}

// requireIndexRanges EXPLAINs a first and a later page of each filter and
// order of the storefront's listing.
func requireIndexRanges(t *testing.T, st *store.Store) {
	t.Helper()
	now := time.Now()
	first, err := st.ListBuyableSales(ctx(t), store.ListingQuery{Now: now, Started: true, Upcoming: true, Limit: 3000})
	require.NoError(t, err)
	last := first[len(first)-1]
	after := &store.ListingKey{StartsAt: last.StartsAt, ID: last.ID}
	for _, q := range []store.ListingQuery{
		{Started: true, Upcoming: true},
		{Started: true, Upcoming: true, After: after},
		{Started: true, Upcoming: true, Ascending: true, After: after},
		{Started: true, After: after},
		{Upcoming: true, Ascending: true},
	} {
		q.Now, q.Limit = now, 201
		stmt := st.BuyableSalesStatement(q)
		plan := explain(t, st, stmt)
		require.Equal(t, "sales_listing", plan["key"], "%s\n%v", stmt, plan)
		require.Equal(t, "range", plan["type"], "%s\n%v", stmt, plan)
		require.NotContains(t, plan["Extra"], "filesort", "%s\n%v", stmt, plan)
	}
}

// The listings' statements parse as MySQL 8.0.
func TestMySQL8ListingStatementsParse(t *testing.T) {
	st, rec := speakingMySQL8(t)
	sale := testenv.MustSale(t, st, 1)
	after := &store.ListingKey{StartsAt: sale.StartsAt, ID: sale.ID}
	for _, q := range []store.ListingQuery{{Started: true, Upcoming: true}, {Started: true, After: after}, {Upcoming: true, Ascending: true, After: after}} {
		q.Now, q.Limit = time.Now(), 10
		_, err := st.ListBuyableSales(ctx(t), q)
		require.NoError(t, err)
	}
	_, err := st.ListSalesBefore(ctx(t), sale.ID, 10)
	require.NoError(t, err)
	require.Contains(t, requireMySQL8(t, rec), "listed_starts_at")
}
