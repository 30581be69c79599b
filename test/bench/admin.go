package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/authtoken"
)

// adminTimeout bounds each attempt of an admin call to a bench API; the
// longest is the burst sale's reconciliation (two passes, at most 15 s in
// the API).
const adminTimeout = 30 * time.Second

// admin is the Go client of api with an operator's token, one per API,
// retrying as the contract says.
func (r *runner) admin(api *Proc) (*client.Client, error) {
	r.adminMu.Lock()
	defer r.adminMu.Unlock()
	if c, ok := r.admins[api.URL]; ok {
		return c, nil
	}
	tok, err := authtoken.MintDev(0, true, 6*time.Hour)
	if err != nil {
		return nil, fmt.Errorf("admin token: %w", err)
	}
	if r.admins == nil {
		r.admins = map[string]*client.Client{}
	}
	c := client.New(api.URL, tok, adminTimeout)
	r.admins[api.URL] = c
	return c, nil
}

// sale creates and warms a sale for a scenario through api.
func (r *runner) sale(ctx context.Context, api *Proc, title string, stock int64, buckets int, warm bool) (*domain.Sale, error) {
	return r.saleWindow(ctx, api, title, stock, buckets, warm, 900)
}

// saleTitle is the title of a sale this run makes: "bench", the run's
// stamp, then what the sale is for.
func (r *runner) saleTitle(what string) string { return "bench " + r.stamp + " " + what }

// saleWindow is sale with a payment window of window seconds.
func (r *runner) saleWindow(ctx context.Context, api *Proc, title string, stock int64, buckets int, warm bool, window int) (*domain.Sale, error) {
	now := time.Now().UTC()
	return r.createSale(ctx, api, client.NewSale{GoodsID: 1, Title: r.saleTitle(title), PriceCents: 999,
		Stock: stock, Buckets: buckets, StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour), PaymentWindowSeconds: window}, warm)
}

// createSale creates a sale through api's admin routes, warms it up when
// warm, and reads it back from the database: the scenarios need fields
// the sale view does not carry (its mode epoch).
func (r *runner) createSale(ctx context.Context, api *Proc, ns client.NewSale, warm bool) (*domain.Sale, error) {
	c, err := r.admin(api)
	if err != nil {
		return nil, err
	}
	v, err := c.CreateSale(ctx, ns, "")
	if err != nil {
		return nil, fmt.Errorf("create sale %q: %w", ns.Title, err)
	}
	r.saleIDs = append(r.saleIDs, v.SaleID)
	if warm {
		if _, err := c.Warmup(ctx, v.SaleID); err != nil {
			return nil, fmt.Errorf("warm up sale %d: %w", v.SaleID, err)
		}
	}
	gctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s, err := r.st.GetSale(gctx, v.SaleID)
	if err != nil {
		return nil, fmt.Errorf("read sale %d back: %w", v.SaleID, err)
	}
	return s, nil
}

// errNotOurs: a sale id this run holds names a sale it cannot tell it
// made.
var errNotOurs = errors.New("left alone: not known to be this run's sale (its title must carry the run's stamp; the database may have been started anew under the run)")

// checkOwn answers nil when this run made sale id: its title carries the
// run's stamp (saleTitle); a sale only in Redis (fakeSaleBase) has no row
// to tell and is the run's. Sale ids start over with a new database, so a
// run whose services were started anew under it holds ids that name the
// next run's sales: stopped and finished, such a sale refuses every
// reservation before Redis. A sale it cannot read is left alone too.
func (r *runner) checkOwn(ctx context.Context, id int64) error {
	if id >= fakeSaleBase {
		return nil
	}
	s, err := r.st.GetSale(ctx, id)
	if err != nil {
		return fmt.Errorf("%w: %w", errNotOurs, err)
	}
	if !strings.HasPrefix(s.Title, r.saleTitle("")) {
		return fmt.Errorf("%w: sale %d is %q", errNotOurs, id, s.Title)
	}
	return nil
}

// ownSaleIDs is the sales this run made (saleIDs) that checkOwn finds its
// own; each other is logged and left alone.
func (r *runner) ownSaleIDs(ctx context.Context) []int64 {
	own := make([]int64, 0, len(r.saleIDs))
	for _, id := range r.saleIDs {
		if err := r.checkOwn(ctx, id); err != nil {
			r.o.Logger.Warn("tear down bench sale", "sale_id", id, "err", err)
			continue
		}
		own = append(own, id)
	}
	return own
}

// stopSales stops every sale made so far through api (the store's rows
// say so at once, Redis follows).
func (r *runner) stopSales(ctx context.Context, api *Proc) {
	c, err := r.admin(api)
	if err != nil {
		r.o.Logger.Warn("stop bench sales", "err", err)
		return
	}
	for _, id := range r.ownSaleIDs(ctx) {
		if _, err := c.Stop(ctx, id); err != nil {
			r.o.Logger.Warn("stop bench sale", "sale_id", id, "err", err)
		}
	}
}
