package client

import (
	"context"
	"iter"
	"net/http"
	"net/url"
	"strconv"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/wire"
)

// SaleQuery selects pages of GET /api/v1/sales: Status "live" or
// "upcoming" ("" for both), Sort "-starts_at" (newest opening first, the
// server's default) or "starts_at", Limit 1..200 (0 for the server's
// default, 50), Cursor a page's NextCursor ("" for the first page).
type SaleQuery struct {
	Status string
	Sort   string
	Cursor string
	Limit  int
}

// SaleList is one page of the sales a buyer can see; its NextCursor is ""
// on the last page.
func (c *Client) SaleList(ctx context.Context, q SaleQuery) (wire.SalePage, error) {
	v := url.Values{}
	for k, s := range map[string]string{"status": q.Status, "sort": q.Sort, "cursor": q.Cursor} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var p wire.SalePage
	return p, c.do(ctx, call{method: http.MethodGet, path: withQuery(SalesPath, v), noAuth: true, idempotent: true}, &p)
}

// AllSales walks the sales a buyer can see from q's page on, page after
// page: each sale once, an error as the last pair.
func (c *Client) AllSales(ctx context.Context, q SaleQuery) iter.Seq2[domain.SaleView, error] {
	return walk(q.Cursor, func(cursor string) ([]domain.SaleView, string, error) {
		q.Cursor = cursor
		p, err := c.SaleList(ctx, q)
		return p.Sales, p.NextCursor, err
	})
}

// SalesPage is one page of every sale as operators see it, newest first,
// after cursor ("" for the first page), limit sales (0 for the server's
// default, 100); its NextCursor is "" on the last page.
func (c *Client) SalesPage(ctx context.Context, cursor string, limit int) (wire.OperatorSales, error) {
	v := url.Values{}
	if cursor != "" {
		v.Set("cursor", cursor)
	}
	if limit > 0 {
		v.Set("limit", strconv.Itoa(limit))
	}
	var p wire.OperatorSales
	return p, c.do(ctx, call{method: http.MethodGet, path: withQuery(AdminSalesPath, v), idempotent: true}, &p)
}

// AllOperatorSales walks every sale as operators see it, newest first,
// limit a page: each sale once, an error as the last pair.
func (c *Client) AllOperatorSales(ctx context.Context, limit int) iter.Seq2[wire.OperatorSale, error] {
	return walk("", func(cursor string) ([]wire.OperatorSale, string, error) {
		p, err := c.SalesPage(ctx, cursor, limit)
		return p.Sales, p.NextCursor, err
	})
}

// walk yields the items of the pages page reads from cursor on, until a
// page has no next cursor, the loop stops, or a page fails (yielded once).
func walk[T any](cursor string, page func(cursor string) ([]T, string, error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		for {
			items, next, err := page(cursor)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, it := range items {
				if !yield(it, nil) {
					return
				}
			}
			if next == "" {
				return
			}
			cursor = next
		}
	}
}

// withQuery is path with q, when it has any.
func withQuery(path string, q url.Values) string {
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}
