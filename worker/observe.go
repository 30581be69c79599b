package worker

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/redisgateway"
)

// startFunc starts an order workflow (idempotently).
type startFunc = func(ctx context.Context, in domain.OrderInput) error

// startTimer times workflow starts on seckill_workflow_start_duration_seconds,
// by caller (inbox relay, outbox relay, reconciliation) and result.
type startTimer struct{ hist *prometheus.HistogramVec }

func newStartTimer(reg prometheus.Registerer) (*startTimer, error) {
	hist := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "seckill_workflow_start_duration_seconds",
		Help:    "Time to start (or find started) an order workflow in Temporal, by caller and result.",
		Buckets: redisgateway.LatencyBuckets,
	}, []string{"caller", "result"})
	if err := reg.Register(hist); err != nil {
		return nil, fmt.Errorf("register start latency: %w", err)
	}
	return &startTimer{hist: hist}, nil
}

// wrap returns start timed under caller; both results exist from the start.
func (t *startTimer) wrap(caller string, start startFunc) startFunc {
	ok, failed := t.hist.WithLabelValues(caller, "ok"), t.hist.WithLabelValues(caller, "error")
	return func(ctx context.Context, in domain.OrderInput) error {
		begin := time.Now()
		err := start(ctx, in)
		if err != nil {
			failed.Observe(time.Since(begin).Seconds())
		} else {
			ok.Observe(time.Since(begin).Seconds())
		}
		return err
	}
}

// seeSale creates a sale's series at zero when the relay first reads its
// inbox, so increase() and the alerts see the first dead letter as a step
// from 0, not as a new series.
func (m *Metrics) seeSale(saleID int64) {
	if m == nil {
		return
	}
	label := strconv.FormatInt(saleID, 10)
	m.DeadLetters.WithLabelValues(label)
	m.Lag.WithLabelValues(label)
	m.Pending.WithLabelValues(label)
}
