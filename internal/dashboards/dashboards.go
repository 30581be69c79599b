// Package dashboards builds seckill's Grafana dashboards as code (the
// Grafana Foundation SDK). cmd/seckill-dashboards writes them as JSON to
// deploy/grafana/; ops tests that the committed JSON is what this package
// builds and that every metric a panel queries exists on a live process.
package dashboards

//lint:file-ignore SA1019 the classic dashboard JSON imports into every Grafana; the v2 schema the SDK prefers needs Grafana 12 with its new-layouts feature.

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// reserveRoute is the reservation route's template, the route label of the
// API's HTTP metrics.
const reserveRoute = "/api/v1/sales/:sale_id/reservations"

// Files returns each dashboard's file name and JSON.
func Files() (map[string][]byte, error) {
	out := map[string][]byte{}
	for name, b := range map[string]*dashboard.DashboardBuilder{
		"sale-overview.json": saleOverview(),
		"worker.json":        worker(),
	} {
		d, err := b.Build()
		if err != nil {
			return nil, fmt.Errorf("build dashboard %s: %w", name, err)
		}
		// Stable panel ids, so links to a panel survive regeneration.
		for i, p := range d.Panels {
			switch {
			case p.Panel != nil:
				p.Panel.Id = cog.ToPtr(uint32(i + 1))
			case p.RowPanel != nil:
				p.RowPanel.Id = uint32(i + 1)
			}
		}
		j, err := json.MarshalIndent(d, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("encode dashboard %s: %w", name, err)
		}
		out[name] = append(j, '\n')
	}
	return out, nil
}

// datasource is the dashboard's Prometheus, picked by a variable so the
// JSON imports into any Grafana.
func datasource() common.DataSourceRef {
	return common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}
}

func base(uid, title string) *dashboard.DashboardBuilder {
	return dashboard.NewDashboardBuilder(title).
		Uid(uid).
		Tags([]string{"seckill"}).
		Refresh("10s").
		Time("now-30m", "now").
		Timezone(common.TimeZoneUtc).
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").Label("Prometheus").Type("prometheus")).
		WithVariable(dashboard.NewQueryVariableBuilder("job").Label("Job").
			Description("The scrape jobs shown: one deployment (environment) or several.").
			Datasource(datasource()).
			Query(dashboard.StringOrMap{String: cog.ToPtr(`label_values(up, job)`)}).
			Regex(`/seckill/`).
			Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
			Multi(true).IncludeAll(true).AllValue(".*"))
}

// metricRef is a seckill or Temporal SDK metric in a panel's PromQL, with
// the opening brace of its selector when it has one.
var metricRef = regexp.MustCompile(`\b((?:seckill|temporal)_[a-z0-9_]+)(\{?)`)

// query is a panel's target; every metric it names is limited to the
// dashboard's job variable.
func query(expr, legend string) *prometheus.DataqueryBuilder {
	expr = metricRef.ReplaceAllStringFunc(expr, func(m string) string {
		if name, ok := strings.CutSuffix(m, "{"); ok {
			return name + `{job=~"$job",`
		}
		return m + `{job=~"$job"}`
	})
	return prometheus.NewDataqueryBuilder().Expr(expr).LegendFormat(legend)
}

func series(title, unit, desc string, targets ...*prometheus.DataqueryBuilder) *timeseries.PanelBuilder {
	p := timeseries.NewPanelBuilder().Title(title).Description(desc).Unit(unit).
		Datasource(datasource()).Height(8).Span(12).FillOpacity(10).Min(0).
		Legend(common.NewVizLegendOptionsBuilder().ShowLegend(true).
			DisplayMode(common.LegendDisplayModeList).Placement(common.LegendPlacementBottom)).
		Tooltip(common.NewVizTooltipOptionsBuilder().Mode(common.TooltipDisplayModeMulti).Sort(common.SortOrderDescending))
	for i, t := range targets {
		p.WithTarget(t.RefId(string(rune('A' + i))))
	}
	return p
}

func single(title, unit, desc string, target *prometheus.DataqueryBuilder) *stat.PanelBuilder {
	return stat.NewPanelBuilder().Title(title).Description(desc).Unit(unit).
		Datasource(datasource()).Height(5).Span(6).WithTarget(target.RefId("A")).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"}))
}

// quantiles are the p50, p99 and p99.9 of a histogram's rate, summed by by.
func quantiles(bucket, selector, by, legend string) []*prometheus.DataqueryBuilder {
	var out []*prometheus.DataqueryBuilder
	for _, q := range []struct{ q, name string }{{"0.5", "p50"}, {"0.99", "p99"}, {"0.999", "p99.9"}} {
		out = append(out, query(
			fmt.Sprintf(`histogram_quantile(%s, sum by (le%s) (rate(%s%s[$__rate_interval])))`, q.q, by, bucket, selector),
			q.name+legend))
	}
	return out
}

func saleOverview() *dashboard.DashboardBuilder {
	sel := `{route="` + reserveRoute + `"}`
	return base("seckill-sale-overview", "seckill / sale overview").
		Description("One flash sale end to end: the filters, the answers, latency, the inbox, the Redis path and reconciliation.").
		WithVariable(dashboard.NewQueryVariableBuilder("sale").Label("Sale").
			Datasource(datasource()).
			Query(dashboard.StringOrMap{String: cog.ToPtr(`label_values(seckill_inbox_lag{job=~"$job"}, sale)`)}).
			Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
			Multi(true).IncludeAll(true).AllValue(".*")).
		WithRow(dashboard.NewRowBuilder("Reservations")).
		WithPanel(series("Filter funnel", "reqps",
			"Reservation requests per second by filter layer and outcome (pass, or the rejection), cheapest layer first.",
			query(`sum by (layer, outcome) (rate(seckill_filter_total[$__rate_interval]))`, "{{layer}} {{outcome}}"))).
		WithPanel(series("Answers by code", "reqps",
			"Reservation answers per second by HTTP status (202 queued, 410 sold out, 409 already, 429 limited...).",
			query(`sum by (status) (rate(seckill_http_requests_total`+sel+`[$__rate_interval]))`, "{{status}}"))).
		WithPanel(series("Reservation latency", "s",
			"Time the APIs took to answer the reservation route. The SeckillReservationLatencyHigh alert fires on p99 over 250 ms for 5 minutes.",
			quantiles("seckill_http_request_duration_seconds_bucket", sel, "", "")...)).
		WithPanel(series("Redis script latency (p99)", "s",
			"p99 round trip of each Lua script (redisgateway/) from the API and the worker.",
			query(`histogram_quantile(0.99, sum by (le, script) (rate(seckill_redis_script_duration_seconds_bucket[$__rate_interval])))`, "{{script}}"))).
		WithRow(dashboard.NewRowBuilder("Inbox and workflows")).
		WithPanel(series("Inbox lag and pending", "short",
			"Entries Redis accepted that no relay has read (lag), and entries read but not acknowledged (pending).",
			query(`max by (sale) (seckill_inbox_lag{sale=~"$sale"})`, "lag {{sale}}"),
			query(`max by (sale) (seckill_inbox_pending{sale=~"$sale"})`, "pending {{sale}}"))).
		WithPanel(series("Inbox drain rate", "ops",
			"Inbox entries acknowledged per second (their workflow started), start errors and dead letters.",
			query(`sum(rate(seckill_inbox_acked_total[$__rate_interval]))`, "acked"),
			query(`sum(rate(seckill_inbox_start_errors_total[$__rate_interval]))`, "start errors"),
			query(`sum by (sale) (increase(seckill_inbox_dead_letters_total{sale=~"$sale"}[$__rate_interval]))`, "dead letters {{sale}}"))).
		WithPanel(series("Workflow start latency (p99)", "s",
			"p99 of starting an order workflow in Temporal, by caller (inbox relay, outbox relay, reconciliation).",
			query(`histogram_quantile(0.99, sum by (le, caller) (rate(seckill_workflow_start_duration_seconds_bucket[$__rate_interval])))`, "{{caller}}"))).
		WithPanel(series("Orders ended", "ops",
			"Reservations reaching an end state per second, by status.",
			query(`sum by (status) (rate(seckill_orders_ended_total[$__rate_interval]))`, "{{status}}"))).
		WithRow(dashboard.NewRowBuilder("Redis path and reconciliation")).
		WithPanel(single("Redis breaker", "none",
			"Worst breaker state over the APIs: 0 closed, 1 half-open, 2 open (reservations leave Redis).",
			query(`max(seckill_redis_breaker_state)`, "breaker"))).
		WithPanel(single("Sales on the database path", "none",
			"Sales taking reservations on the database path (1 each) because Redis failed.",
			query(`count(max by (sale) (seckill_sale_database_mode{sale=~"$sale"})) or vector(0)`, "database mode"))).
		WithPanel(single("Starter queue", "short",
			"Workflow starts waiting in the APIs' in-process queues.",
			query(`sum(seckill_starter_queue_length)`, "queued"))).
		WithPanel(single("Reservations without workflow", "short",
			"Live reservations holding a unit with no order workflow (the relay or reconciliation starts one).",
			query(`sum(max by (sale) (seckill_reservations_without_workflow{sale=~"$sale"})) or vector(0)`, "without workflow"))).
		WithPanel(series("Reconciliation", "short",
			"The sale workflow's latest reconciliation: discrepancies listed (seen in two passes) and consistency (1 consistent).",
			query(`max by (sale) (seckill_reconciliation_discrepancies{sale=~"$sale"})`, "discrepancies {{sale}}"),
			query(`min by (sale) (seckill_reconciliation_consistent{sale=~"$sale"})`, "consistent {{sale}}")))
}

func worker() *dashboard.DashboardBuilder {
	return base("seckill-worker", "seckill / worker (Temporal SDK)").
		Description("The worker's Temporal SDK series (go.temporal.io/sdk/contrib/tally): workflow tasks, activities, pollers, slots, sticky cache, client requests.").
		WithRow(dashboard.NewRowBuilder("Workflow tasks")).
		WithPanel(series("Workflow task schedule-to-start", "s",
			"Time a workflow task waited in the task queue: high means too few workers or pollers.",
			quantiles("temporal_workflow_task_schedule_to_start_latency_seconds_bucket", "", "", "")...)).
		WithPanel(series("Workflow task execution", "s",
			"Time the worker spent running workflow code per task.",
			quantiles("temporal_workflow_task_execution_latency_seconds_bucket", "", "", "")...)).
		WithPanel(series("Sticky cache", "short",
			"Workflows cached on this worker, and cache hits per second (misses replay the history).",
			query(`sum(temporal_sticky_cache_size)`, "size"),
			query(`sum(rate(temporal_sticky_cache_hit_total[$__rate_interval]))`, "hits/s"))).
		WithPanel(series("Workflow task replay", "s",
			"Replay time of workflow tasks (a sticky cache miss replays the whole history).",
			query(`histogram_quantile(0.99, sum by (le) (rate(temporal_workflow_task_replay_latency_seconds_bucket[$__rate_interval])))`, "p99"))).
		WithRow(dashboard.NewRowBuilder("Activities")).
		WithPanel(series("Activity execution (p99)", "s",
			"p99 of each activity's execution, by activity type.",
			query(`histogram_quantile(0.99, sum by (le, activity_type) (rate(temporal_activity_execution_latency_seconds_bucket[$__rate_interval])))`, "{{activity_type}}"))).
		WithPanel(series("Activity schedule-to-start (p99)", "s",
			"Time activities waited in the task queue, by activity type.",
			query(`histogram_quantile(0.99, sum by (le, activity_type) (rate(temporal_activity_schedule_to_start_latency_seconds_bucket[$__rate_interval])))`, "{{activity_type}}"))).
		WithPanel(series("Activities succeeded end to end (p99)", "s",
			"From scheduling to success, retries included, by activity type.",
			query(`histogram_quantile(0.99, sum by (le, activity_type) (rate(temporal_activity_succeed_endtoend_latency_seconds_bucket[$__rate_interval])))`, "{{activity_type}}"))).
		WithRow(dashboard.NewRowBuilder("Pollers, slots and the client")).
		WithPanel(series("Pollers", "short",
			"Pollers per task queue kind.",
			query(`sum by (poller_type) (temporal_num_pollers)`, "{{poller_type}}"))).
		WithPanel(series("Task slots", "short",
			"Slots used and available per worker type: none available means the worker is saturated.",
			query(`sum by (worker_type) (temporal_worker_task_slots_used)`, "used {{worker_type}}"),
			query(`sum by (worker_type) (temporal_worker_task_slots_available)`, "available {{worker_type}}"))).
		WithPanel(series("Temporal requests", "reqps",
			"Client requests to the Temporal frontend per second, by operation.",
			query(`sum by (operation) (rate(temporal_request_total[$__rate_interval]))`, "{{operation}}"))).
		WithPanel(series("Temporal request latency (p99)", "s",
			"p99 of client requests to the Temporal frontend, by operation.",
			query(`histogram_quantile(0.99, sum by (le, operation) (rate(temporal_request_latency_seconds_bucket[$__rate_interval])))`, "{{operation}}")))
}
