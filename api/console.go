package api

import (
	"context"
	"embed"
	"fmt"
	"path"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/wire"
)

// consoleWeb is the operator console: static HTML, CSS and JavaScript
// modules, no build step. It reads and writes through the admin routes
// only, with the bearer token the operator pastes.
//
//go:embed console
var consoleWeb embed.FS

// consoleCSP is the storefront's policy: the page's own origin only.
const consoleCSP = storefrontCSP

// GET /console and /console/{file}: the operator console.
func (s *server) console(c *fiber.Ctx) error {
	name := c.Params("file")
	if name == "" {
		name = "index.html"
	}
	if path.Base(name) != name {
		return sendError(c, domain.ENotFound, "no such resource")
	}
	return sendEmbedded(c, consoleWeb, "console/"+name, consoleCSP)
}

// GET /admin/v1/sales?cursor=&limit=: every sale, finished or not,
// newest first, a page at a time (100 by default, at most 500), each with
// its stock left, waitlist, control and mode.
func (s *server) listSales(c *fiber.Ctx) error {
	if err := queryOnce(c, "cursor", "limit"); err != nil {
		return sendErr(c, err)
	}
	page, err := s.svc.Listing.Operators(c.UserContext(), c.Query("cursor"), c.Query("limit"))
	if err != nil {
		return sendErr(c, err)
	}
	now := time.Now()
	out := make([]wire.OperatorSale, len(page.Sales))
	for i, l := range page.Sales {
		out[i] = operatorView(l.Sale, now, l.StockLeft, l.Waiting)
	}
	return c.JSON(wire.OperatorSales{Sales: out, NextCursor: page.NextCursor})
}

func operatorView(sale *domain.Sale, now time.Time, stockLeft, waiting int64) wire.OperatorSale {
	return wire.OperatorSale{
		SaleView: sale.View(now, stockLeft, waiting),
		Control:  sale.Control, Mode: sale.Mode, Warmed: sale.Warmed, Buckets: sale.Buckets,
		Created: sale.CreatedAt, WentBack: sale.RedisWentBack,
	}
}

// GET /admin/v1/sales/{sale_id}: one sale's live view for an operator:
// the sale, its reservations by status, its refunds, the sale workflow's
// last reconciliation report, and this instance's reservation funnel.
func (s *server) saleDetail(reg *prometheus.Registry) fiber.Handler {
	return func(c *fiber.Ctx) error {
		id, err := saleIDParam(c, "sale_id")
		if err != nil {
			return sendErr(c, err)
		}
		ctx, cancel := context.WithTimeout(c.UserContext(), adminTimeout)
		defer cancel()
		d, err := s.svc.Operator.Detail(ctx, id)
		if err != nil {
			return sendErr(c, err)
		}
		funnel, err := filterCounts(reg)
		if err != nil {
			return fmt.Errorf("read the filter counters: %w", err)
		}
		return c.JSON(wire.OperatorSaleDetail{
			Sale:   operatorView(d.Sale, time.Now(), d.StockLeft, d.Waiting),
			Orders: d.Orders, Refunds: d.Refunds, Report: d.Report, ReportError: d.ReportError, Funnel: funnel,
		})
	}
}

// filterCounts reads seckill_filter_total from reg: every layer's passes
// and refusals on this instance since it started, across all sales.
func filterCounts(reg *prometheus.Registry) ([]wire.FunnelCount, error) {
	families, err := reg.Gather()
	if err != nil {
		return nil, fmt.Errorf("gather metrics: %w", err)
	}
	out := []wire.FunnelCount{}
	for _, f := range families {
		if f.GetName() != "seckill_filter_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			fc := wire.FunnelCount{Count: m.GetCounter().GetValue()}
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "layer":
					fc.Layer = l.GetValue()
				case "outcome":
					fc.Outcome = l.GetValue()
				}
			}
			out = append(out, fc)
		}
	}
	return out, nil
}
