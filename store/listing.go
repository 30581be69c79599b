package store

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/seckill/seckill/domain"
)

// ListingKey is where a sale stands in the storefront's listing: its
// opening, then its id. Neither changes once the sale exists, so a page
// that starts after a key never repeats or skips a sale listed before it.
type ListingKey struct {
	StartsAt time.Time
	ID       int64
}

// ListingQuery asks for one page of the sales a buyer can see at Now: not
// retired, not ended, not stopped; those opened by Now (Started), those
// opening later (Upcoming), or both. The page is in (starts_at, id) order,
// descending unless Ascending, after After (nil: from the first).
type ListingQuery struct {
	Now       time.Time
	Started   bool
	Upcoming  bool
	Ascending bool
	After     *ListingKey
	Limit     int
}

// ListBuyableSales is one page of the storefront's listing: one range of
// the index sales_listing (listed_starts_at, id), where listed_starts_at
// is the opening of a sale not retired, on the replica while it is fresh;
// a page reads its own rows and the ended or stopped sales among them,
// never a pass over every sale.
func (s *Store) ListBuyableSales(ctx context.Context, q ListingQuery) ([]*domain.Sale, error) {
	var rows []saleRow
	err := s.listMayLag(ctx, "sales listing", func(db querier) error {
		rows = nil
		return buyableSales(db, q, &rows).Scan(ctx)
	})
	if err != nil {
		return nil, fmt.Errorf("list buyable sales: %w", err)
	}
	return salesOf(rows), nil
}

// buyableSales is ListBuyableSales' statement, selecting into rows.
func buyableSales(db querier, q ListingQuery, rows *[]saleRow) *bun.SelectQuery {
	now := q.Now.UTC()
	// listed_starts_at is NULL once the sale is retired.
	sel := db.NewSelect().Model(rows).Where("listed_starts_at IS NOT NULL").
		Where("ends_at > ?", now).Where("control <> ?", string(domain.ControlStopped))
	switch {
	case q.Started && !q.Upcoming:
		sel = sel.Where("listed_starts_at <= ?", now)
	case q.Upcoming && !q.Started:
		sel = sel.Where("listed_starts_at > ?", now)
	}
	cmp, dir := "<", "DESC"
	if q.Ascending {
		cmp, dir = ">", "ASC"
	}
	if a := q.After; a != nil {
		// The first term bounds the index range at the previous page's
		// last opening; the second leaves out that opening's sales up to
		// the last one listed.
		at := a.StartsAt.UTC()
		sel = sel.Where("listed_starts_at "+cmp+"= ?", at).Where("(listed_starts_at "+cmp+" ? OR id "+cmp+" ?)", at, a.ID)
	}
	return sel.OrderExpr("listed_starts_at " + dir + ", id " + dir).Limit(int64(q.Limit))
}

// ListSalesBefore is one page of every sale, retired or not, newest
// first: up to limit sales with ids below before (0: from the newest), on
// the replica while it is fresh. A sale created while an operator pages
// has a higher id than any listed, so pages neither repeat nor skip one.
func (s *Store) ListSalesBefore(ctx context.Context, before int64, limit int) ([]*domain.Sale, error) {
	var rows []saleRow
	err := s.listMayLag(ctx, "sales", func(db querier) error {
		rows = nil
		q := db.NewSelect().Model(&rows).Order("id DESC").Limit(int64(limit))
		if before > 0 {
			q = q.Where("id < ?", before)
		}
		return q.Scan(ctx)
	})
	if err != nil {
		return nil, fmt.Errorf("list sales before %d: %w", before, err)
	}
	return salesOf(rows), nil
}

func salesOf(rows []saleRow) []*domain.Sale {
	out := make([]*domain.Sale, len(rows))
	for i := range rows {
		out[i] = rows[i].domain()
	}
	return out
}
