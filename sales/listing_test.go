package sales_test

import (
	"context"
	"encoding/base64"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/sales"
	"github.com/seckill/seckill/store"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// listing is the listings on st with a sale cache of their own, their
// cursors signed under key (and previous, when not nil).
func listing(t *testing.T, st *store.Store, key, previous []byte) *sales.Listing {
	t.Helper()
	_, cache := viewOperator(t, st)
	return sales.NewListing(sales.ListingDeps{Store: st, Cache: cache, TokenKey: key, PreviousTokenKey: previous, Logger: quietLogger()})
}

func listCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// A cursor is the listing's own: any byte changed, another listing's
// cursor, one signed under another key, or status and sort other than
// the page's are 400 invalid_request; the token key before a rotation
// still reads it.
func TestListingCursorsAreRefusedWhenTamperedWith(t *testing.T) {
	st := testenv.MustStore(t)
	for range 2 {
		testenv.MustSale(t, st, 1)
	}
	l := listing(t, st, tokenKey, nil)
	now := time.Now()
	page, err := l.Storefront(listCtx(t), sales.PageQuery{Limit: "1", Status: "live"}, now)
	require.NoError(t, err)
	require.Len(t, page.Sales, 1)
	require.NotEmpty(t, page.NextCursor)
	next, err := l.Storefront(listCtx(t), sales.PageQuery{Cursor: page.NextCursor, Limit: "1"}, now)
	require.NoError(t, err, "the cursor's status holds when the query names none")
	require.Len(t, next.Sales, 1)
	require.NotEqual(t, page.Sales[0].SaleID, next.Sales[0].SaleID)

	raw, err := base64.RawURLEncoding.DecodeString(page.NextCursor)
	require.NoError(t, err)
	invalid := func(q sales.PageQuery, what string) {
		t.Helper()
		_, err := l.Storefront(listCtx(t), q, now)
		require.Equal(t, domain.EInvalid, domain.ErrorCode(err), "%s: %v", what, err)
	}
	for i := range raw {
		for _, bit := range []byte{0x01, 0x80} {
			b := slices.Clone(raw)
			b[i] ^= bit
			invalid(sales.PageQuery{Cursor: base64.RawURLEncoding.EncodeToString(b)}, "byte "+strconv.Itoa(i)+" changed")
		}
	}
	invalid(sales.PageQuery{Cursor: base64.RawURLEncoding.EncodeToString(raw[:len(raw)-1])}, "cut short")
	invalid(sales.PageQuery{Cursor: page.NextCursor + "A"}, "lengthened")
	invalid(sales.PageQuery{Cursor: "not a cursor!"}, "not base64")
	invalid(sales.PageQuery{Cursor: page.NextCursor, Status: "upcoming"}, "another status")
	invalid(sales.PageQuery{Cursor: page.NextCursor, Sort: "starts_at"}, "another order")
	_, err = l.Operators(listCtx(t), page.NextCursor, "")
	require.Equal(t, domain.EInvalid, domain.ErrorCode(err), "the storefront's cursor on the operators' listing")

	other := listing(t, st, []byte("another-token-key"), nil)
	_, err = other.Storefront(listCtx(t), sales.PageQuery{Cursor: page.NextCursor}, now)
	require.Equal(t, domain.EInvalid, domain.ErrorCode(err), "signed under another key")
	rotated := listing(t, st, []byte("another-token-key"), tokenKey)
	again, err := rotated.Storefront(listCtx(t), sales.PageQuery{Cursor: page.NextCursor, Limit: "1"}, now)
	require.NoError(t, err, "signed under the key before the rotation")
	require.Equal(t, next.Sales[0].SaleID, again.Sales[0].SaleID)
}

// A page's length is 1..the listing's most, its default when absent;
// status and sort take their documented values only.
func TestListingLimitsAndParameters(t *testing.T) {
	st := testenv.MustStore(t)
	testenv.MustSale(t, st, 1)
	l := listing(t, st, tokenKey, nil)
	now := time.Now()
	for _, bad := range []sales.PageQuery{{Limit: "0"}, {Limit: "-1"}, {Limit: "201"}, {Limit: "x"}, {Limit: " 5"}, {Limit: "1.5"},
		{Status: "ended"}, {Status: "LIVE"}, {Sort: "id"}, {Sort: "-id"}} {
		_, err := l.Storefront(listCtx(t), bad, now)
		require.Equal(t, domain.EInvalid, domain.ErrorCode(err), "%+v: %v", bad, err)
	}
	for _, bad := range []string{"0", "501", "many"} {
		_, err := l.Operators(listCtx(t), "", bad)
		require.Equal(t, domain.EInvalid, domain.ErrorCode(err), "limit %s: %v", bad, err)
	}
	for _, ok := range []sales.PageQuery{{Limit: "1"}, {Limit: "200"}, {Status: "live", Sort: "starts_at"}, {Status: "upcoming", Sort: "-starts_at"}} {
		page, err := l.Storefront(listCtx(t), ok, now)
		require.NoError(t, err, "%+v", ok)
		if ok.Limit != "" {
			n, _ := strconv.Atoi(ok.Limit)
			require.LessOrEqual(t, len(page.Sales), n)
		}
	}
	page, err := l.Operators(listCtx(t), "", "500")
	require.NoError(t, err)
	require.LessOrEqual(t, len(page.Sales), 500)
}

// The operators' listing is every sale newest first, retired or not, each
// with its units left (the database's for a sale the cache does not hold),
// page after page without repeats.
func TestOperatorListingPagesNewestFirst(t *testing.T) {
	st := testenv.MustStore(t)
	var ids []int64
	for i := range 5 {
		ids = append(ids, testenv.MustSale(t, st, int64(i+1)).ID)
	}
	require.NoError(t, st.MarkFinished(listCtx(t), ids[0]))
	l := listing(t, st, tokenKey, nil)
	first, err := l.Operators(listCtx(t), "", "")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(first.Sales), 5)
	require.LessOrEqual(t, len(first.Sales), sales.OperatorPageDefault)

	seen := map[int64]int64{}
	var last int64
	cursor := ""
	for {
		page, err := l.Operators(listCtx(t), cursor, "2")
		require.NoError(t, err)
		for _, s := range page.Sales {
			if last > 0 {
				require.Less(t, s.Sale.ID, last, "newest first, no repeat")
			}
			last = s.Sale.ID
			seen[s.Sale.ID] = s.StockLeft
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	for i, id := range ids {
		require.Contains(t, seen, id)
		require.Equal(t, int64(i+1), seen[id], "sale %d's units left", id)
	}
}
