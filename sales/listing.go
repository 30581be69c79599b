package sales

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/reqid"
	"github.com/seckill/seckill/salecache"
	"github.com/seckill/seckill/store"
)

// Page sizes of the listings: what a request that names none gets, and
// the most one may ask for.
const (
	StorefrontPageDefault = 50
	StorefrontPageMax     = 200
	OperatorPageDefault   = 100
	OperatorPageMax       = 500
)

// listTimeout bounds a page's reads.
const listTimeout = 3 * time.Second

// filter is which of the sales a buyer can see a storefront page lists.
type filter byte

const (
	filterAll      filter = 'a' // started and upcoming
	filterLive     filter = 'l' // started (the view's state live or sold_out)
	filterUpcoming filter = 'u'
)

func (f filter) valid() bool { return f == filterAll || f == filterLive || f == filterUpcoming }

// ListingDeps are what the listings need: the sales (on the replica while
// it is fresh), this instance's sale cache for their stock and waitlist,
// and the fleet's token key (and the one before a rotation) the cursors
// are signed with.
type ListingDeps struct {
	Store            *store.Store
	Cache            *salecache.Cache
	TokenKey         []byte
	PreviousTokenKey []byte
	Logger           *slog.Logger
}

// Listing pages through the sales: the storefront's listing of the sales
// a buyer can see, and the operators' of every sale. A page is one keyset
// query from the previous page's last sale, named by an opaque cursor, so
// pages never repeat a sale and never skip one that existed when the first
// page was read and is still listed.
type Listing struct {
	d       ListingDeps
	cursors *cursors
}

// NewListing is the listings of d.
func NewListing(d ListingDeps) *Listing {
	return &Listing{d: d, cursors: newCursors(d.TokenKey, d.PreviousTokenKey)}
}

// PageQuery is a listing's query parameters as the client sent them, ""
// for each one absent.
type PageQuery struct {
	Status, Sort, Cursor, Limit string
}

// StorefrontPage is one page of the storefront's listing: each sale as
// GET /api/v1/sales/{id} shows it, and the cursor of the next page ("" on
// the last).
type StorefrontPage struct {
	Sales      []domain.SaleView
	NextCursor string
}

// ListedSale is one sale of the operators' listing, with its stock left
// and waitlist as this instance last saw them.
type ListedSale struct {
	Sale      *domain.Sale
	StockLeft int64
	Waiting   int64
}

// OperatorPage is one page of the operators' listing.
type OperatorPage struct {
	Sales      []ListedSale
	NextCursor string
}

// Storefront is one page of the sales a buyer can see at now, started and
// upcoming (status "live" or "upcoming" for one kind), ended and stopped
// ones left out, by opening newest first (sort "-starts_at", the default)
// or soonest first ("starts_at"). A bad parameter is 400 invalid_request;
// the database failing, 503.
func (l *Listing) Storefront(ctx context.Context, q PageQuery, now time.Time) (StorefrontPage, error) {
	at, limit, err := l.storefrontQuery(q)
	if err != nil {
		return StorefrontPage{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	sq := store.ListingQuery{Now: now, Started: at.filter != filterUpcoming, Upcoming: at.filter != filterLive,
		Ascending: at.asc, Limit: limit + 1}
	if at.id > 0 {
		sq.After = &store.ListingKey{StartsAt: time.UnixMicro(at.startsAt).UTC(), ID: at.id}
	}
	rows, err := l.d.Store.ListBuyableSales(ctx, sq)
	if err != nil {
		return StorefrontPage{}, l.failed(ctx, err)
	}
	var page StorefrontPage
	if len(rows) > limit {
		rows = rows[:limit]
		at.startsAt, at.id = rows[limit-1].StartsAt.UnixMicro(), rows[limit-1].ID
		page.NextCursor = l.cursors.encode(at)
	}
	listed, err := l.listed(ctx, rows)
	if err != nil {
		return StorefrontPage{}, err
	}
	page.Sales = make([]domain.SaleView, len(listed))
	for i, s := range listed {
		page.Sales[i] = s.Sale.View(now, s.StockLeft, s.Waiting)
	}
	return page, nil
}

// storefrontQuery is where a storefront page starts and how long it is.
// With a cursor, status and sort are the cursor's; given as well, they
// must be the same.
func (l *Listing) storefrontQuery(q PageQuery) (position, int, error) {
	limit, err := pageLimit(q.Limit, StorefrontPageDefault, StorefrontPageMax)
	if err != nil {
		return position{}, 0, err
	}
	at := position{listing: listingStorefront, filter: filterAll}
	switch q.Status {
	case "":
	case "live":
		at.filter = filterLive
	case "upcoming":
		at.filter = filterUpcoming
	default:
		return position{}, 0, domain.Errorf(domain.EInvalid, "status must be live or upcoming (ended sales are not listed)")
	}
	switch q.Sort {
	case "", "-starts_at":
	case "starts_at":
		at.asc = true
	default:
		return position{}, 0, domain.Errorf(domain.EInvalid, "sort must be -starts_at or starts_at")
	}
	if q.Cursor == "" {
		return at, limit, nil
	}
	from, err := l.cursors.decode(q.Cursor, listingStorefront)
	if err != nil {
		return position{}, 0, err
	}
	if (q.Status != "" && from.filter != at.filter) || (q.Sort != "" && from.asc != at.asc) {
		return position{}, 0, domain.Errorf(domain.EInvalid, "status and sort must be those of the page the cursor came from")
	}
	return from, limit, nil
}

// Operators is one page of every sale, retired or not, newest first, with
// cursor and limit as the client sent them ("" for none). A bad one is
// 400 invalid_request; the database failing, 503.
func (l *Listing) Operators(ctx context.Context, cursor, limit string) (OperatorPage, error) {
	n, err := pageLimit(limit, OperatorPageDefault, OperatorPageMax)
	if err != nil {
		return OperatorPage{}, err
	}
	var before int64
	if cursor != "" {
		from, err := l.cursors.decode(cursor, listingOperators)
		if err != nil {
			return OperatorPage{}, err
		}
		before = from.id
	}
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	rows, err := l.d.Store.ListSalesBefore(ctx, before, n+1)
	if err != nil {
		return OperatorPage{}, l.failed(ctx, err)
	}
	var page OperatorPage
	if len(rows) > n {
		rows = rows[:n]
		page.NextCursor = l.cursors.encode(position{listing: listingOperators, filter: filterAll, id: rows[n-1].ID})
	}
	if page.Sales, err = l.listed(ctx, rows); err != nil {
		return OperatorPage{}, err
	}
	return page, nil
}

// pageLimit is a page's length: def when absent, else 1..most.
func pageLimit(raw string, def, most int) (int, error) {
	if raw == "" {
		return def, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 || n > most {
		return 0, domain.Errorf(domain.EInvalid, "limit must be an integer from 1 to %d", most)
	}
	return n, nil
}

// listed is each sale with its stock left and waitlist: as this instance's
// cache has it (the sale too, as GET /api/v1/sales/{id} shows it), or, for
// a sale the cache does not hold (retired, or created elsewhere within
// the last second), the database's units left, in one query.
func (l *Listing) listed(ctx context.Context, rows []*domain.Sale) ([]ListedSale, error) {
	out := make([]ListedSale, len(rows))
	var uncached []int64
	for i, s := range rows {
		if e := l.d.Cache.Cached(s.ID); e != nil && e.Sale() != nil {
			out[i] = ListedSale{Sale: e.Sale(), StockLeft: e.StockLeft(), Waiting: e.Waiting()}
			continue
		}
		out[i] = ListedSale{Sale: s}
		uncached = append(uncached, s.ID)
	}
	if len(uncached) == 0 {
		return out, nil
	}
	stocks, err := l.d.Store.DBStocks(ctx, uncached)
	if err != nil {
		return nil, l.failed(ctx, err)
	}
	for i := range out {
		if n, ok := stocks[out[i].Sale.ID]; ok {
			out[i].StockLeft = n
		}
	}
	return out, nil
}

// failed is a failed read as the client is answered: 503, logged here.
func (l *Listing) failed(ctx context.Context, err error) error {
	reqid.Logger(ctx, l.d.Logger).Warn("list sales", "err", err)
	return domain.Unavailable("sale data unavailable")
}
