package conn

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/uber-go/tally/v4"
	tallyprom "github.com/uber-go/tally/v4/prometheus"
	"go.temporal.io/sdk/client"
	sdktally "go.temporal.io/sdk/contrib/tally"
)

// TemporalOption adjusts the Temporal client options of Temporal and
// LazyTemporal.
type TemporalOption func(*client.Options)

// WithMetrics reports the Temporal SDK's metrics through h.
func WithMetrics(h client.MetricsHandler) TemporalOption {
	return func(o *client.Options) { o.MetricsHandler = h }
}

// TemporalMetrics returns a handler that exports the Temporal SDK's metrics
// (workflow-task latency, schedule-to-start, sticky cache, pollers, activity
// outcomes, all named temporal_*) on reg, the registry the process serves on
// /metrics, with timers as histograms. Close flushes and stops the scope.
func TemporalMetrics(reg *prometheus.Registry, logger *slog.Logger) (client.MetricsHandler, io.Closer) {
	reporter := tallyprom.NewReporter(tallyprom.Options{
		Registerer:       reg,
		DefaultTimerType: tallyprom.HistogramTimerType,
		// A clash is a programming error, but losing a metric is better
		// than a process that panics mid-sale.
		OnRegisterError: func(err error) { logger.Error("temporal metrics: register", "err", err) },
	})
	scope, closer := tally.NewRootScope(tally.ScopeOptions{
		CachedReporter:  reporter,
		Separator:       tallyprom.DefaultSeparator,
		SanitizeOptions: &sdktally.PrometheusSanitizeOptions,
	}, time.Second)
	return sdktally.NewMetricsHandler(sdktally.NewPrometheusNamingScope(scope)), closeWrapper{closer}
}

type closeWrapper struct{ c io.Closer }

func (w closeWrapper) Close() error {
	if err := w.c.Close(); err != nil {
		return fmt.Errorf("close temporal metrics scope: %w", err)
	}
	return nil
}
