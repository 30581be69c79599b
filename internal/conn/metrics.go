package conn

import (
	"fmt"
	"io"
	"log/slog"
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/uber-go/tally/v4"
	tallyprom "github.com/uber-go/tally/v4/prometheus"
	"go.temporal.io/sdk/client"
	sdktally "go.temporal.io/sdk/contrib/tally"

	"github.com/seckill/seckill/store"
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

// InstrumentReplica exports, when st has a replica (MYSQL_READ_DSN), its
// lag (seckill_mysql_replica_lag_seconds, as the heartbeat last found it,
// -1 before it was found at all) and the reads that may lag by where they
// were answered (seckill_mysql_lagging_reads_total{from}: replica,
// primary_after_replica when the replica lacked the row, primary when it
// was behind its bound or failed).
func InstrumentReplica(reg prometheus.Registerer, st *store.Store) error {
	r := st.Replica()
	if r == nil {
		return nil
	}
	lag := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "seckill_mysql_replica_lag_seconds",
		Help: "How far the read replica is behind the primary, by the heartbeat (-1: never seen caught up)."},
		func() float64 {
			if l := r.Lag(); l != math.MaxInt64 {
				return l.Seconds()
			}
			return -1
		})
	if err := reg.Register(lag); err != nil {
		return fmt.Errorf("instrument the replica: %w", err)
	}
	for _, from := range []store.ReadSource{store.FromReplica, store.FromPrimaryAfterReplica, store.FromPrimary} {
		c := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "seckill_mysql_lagging_reads_total",
			Help: "Reads that may lag, by the database that answered them.", ConstLabels: prometheus.Labels{"from": from.String()}},
			func() float64 { return float64(r.Reads(from)) })
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("instrument the replica: %w", err)
		}
	}
	return nil
}
