package conn_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/conn"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

// BenchmarkTemporalStartGzip compares, in one run, the client's CPU per
// workflow start (an order's input) with TEMPORAL_GZIP off, the default,
// and on, against the test Temporal server. The workflows start on a task
// queue no worker polls and time out after a minute. cpu-ns/op, the
// process's CPU time per start, is the figure; the server's share is not
// measured here.
func BenchmarkTemporalStartGzip(b *testing.B) {
	cfg := testenv.Config(b)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	queue := "gzip-bench-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	for _, gzip := range []bool{false, true} {
		b.Run(fmt.Sprintf("gzip=%v", gzip), func(b *testing.B) {
			cfg.TemporalGzip = gzip
			c, err := conn.Temporal(b.Context(), cfg, logger, 10*time.Second)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			i := 0
			cpu0 := benchCPU(b)
			for b.Loop() {
				i++
				in := domain.OrderInput{Token: fmt.Sprintf("%s-%v-%d", queue, gzip, i), SaleID: 9_000_000_000_000, UserID: int64(i), RequestID: "bench-request-" + strconv.Itoa(i)}
				ctx, cancel := context.WithTimeout(b.Context(), 10*time.Second)
				_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: domain.OrderWorkflowID(in.Token), TaskQueue: queue,
					WorkflowExecutionTimeout: time.Minute}, domain.OrderWorkflowName, in)
				cancel()
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(benchCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// benchCPU is the user and system CPU time the process has used, in
// nanoseconds.
func benchCPU(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
