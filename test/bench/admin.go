package bench

import (
	"context"
	"fmt"
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

// stopSales stops every sale made so far through api (the store's rows
// say so at once, Redis follows).
func (r *runner) stopSales(ctx context.Context, api *Proc) {
	c, err := r.admin(api)
	if err != nil {
		r.o.Logger.Warn("stop bench sales", "err", err)
		return
	}
	for _, id := range r.saleIDs {
		if _, err := c.Stop(ctx, id); err != nil {
			r.o.Logger.Warn("stop bench sale", "sale_id", id, "err", err)
		}
	}
}
