package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/testenv"
)

// The test services' Temporal is a dev server: its metrics page is found
// among its ports, and its work counters read and compared.
func TestDevServerWorkIsReadFromItsMetricsPage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url, err := devServerMetrics(ctx, testenv.TemporalAddress())
	if err != nil {
		t.Fatal(err)
	}
	w, err := readServerWork(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if len(w) == 0 {
		t.Fatalf("%s: no task or persistence counter", url)
	}
	before := serverWork{}
	for k, v := range w {
		before[k] = v - 1
	}
	if got := w.since(before, 2); strings.Count(got, ", ") != 1 || !strings.Contains(got, " 1") {
		t.Fatalf("since: %q, want two counts of 1", got)
	}
	if got := w.since(w, 3); got != "none" {
		t.Fatalf("since itself: %q, want none", got)
	}
}
