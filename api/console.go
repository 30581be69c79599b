package api

import (
	"cmp"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"path"
	"slices"
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

// reportTimeout bounds the query of a sale workflow's last report.
const reportTimeout = 3 * time.Second

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

// GET /admin/v1/sales: the newest sales (at most listLimit), finished or
// not, each with its stock left, waitlist, control and mode.
func (s *server) listSales(c *fiber.Ctx) error {
	ctx, cancel := context.WithTimeout(c.UserContext(), adminTimeout)
	defer cancel()
	ids, err := s.st.SaleIDs(ctx)
	if err != nil {
		s.log(c).Warn("list sales", "err", err)
		return unavailable(c, 1, "sale data unavailable")
	}
	slices.SortFunc(ids, func(a, b int64) int { return cmp.Compare(b, a) })
	ids = ids[:min(len(ids), listLimit)]
	now := time.Now()
	out := make([]wire.OperatorSale, 0, len(ids))
	for _, id := range ids {
		e, err := s.cache.Get(ctx, id)
		if domain.ErrorCode(err) == domain.ENotFound {
			continue // deleted since the ids were read
		}
		if err != nil {
			return s.saleLookupError(c, err)
		}
		out = append(out, operatorView(e.Sale(), now, e.StockLeft(), e.Waiting()))
	}
	return c.JSON(wire.OperatorSales{Sales: out})
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
		e, err := s.cache.Get(ctx, id)
		if err != nil {
			return s.saleLookupError(c, err)
		}
		sale, err := s.st.GetSale(ctx, id) // the cache may be a second behind an operator's change
		if err != nil {
			return s.saleLookupError(c, err)
		}
		orders, err := s.st.CountReservations(ctx, id)
		if err != nil {
			s.log(c).Warn("count reservations", "sale_id", id, "err", err)
			return unavailable(c, 1, "order data unavailable")
		}
		refunds, err := s.st.CountRefunds(ctx, id)
		if err != nil {
			s.log(c).Warn("count refunds", "sale_id", id, "err", err)
			return unavailable(c, 1, "refund data unavailable")
		}
		report, reportErr := s.lastReport(ctx, id)
		if reportErr != "" {
			s.log(c).Info("sale report unavailable", "sale_id", id, "reason", reportErr)
		}
		funnel, err := filterCounts(reg)
		if err != nil {
			return fmt.Errorf("read the filter counters: %w", err)
		}
		return c.JSON(wire.OperatorSaleDetail{
			Sale:   operatorView(sale, time.Now(), e.StockLeft(), e.Waiting()),
			Orders: orders, Refunds: refunds, Report: report, ReportError: reportErr, Funnel: funnel,
		})
	}
}

// lastReport is the sale workflow's answer to its report query: its last
// reconciliation report, or where it stands before the first. Without it
// (no Temporal, no workflow, no worker answering) it is nil and the reason.
func (s *server) lastReport(ctx context.Context, saleID int64) (json.RawMessage, string) {
	if s.temporal == nil {
		return nil, "temporal is not configured"
	}
	ctx, cancel := context.WithTimeout(ctx, reportTimeout)
	defer cancel()
	v, err := s.temporal.QueryWorkflow(ctx, domain.SaleWorkflowID(saleID), "", domain.QueryReport)
	if err != nil {
		return nil, fmt.Sprintf("query the sale workflow: %v", err)
	}
	var raw json.RawMessage
	if err := v.Get(&raw); err != nil {
		return nil, fmt.Sprintf("decode the sale workflow's report: %v", err)
	}
	return raw, ""
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
