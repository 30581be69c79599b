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
	if len(w.counts) == 0 {
		t.Fatalf("%s: no task or persistence counter", url)
	}
	if w.gcs < 1 || w.heap < 1<<20 {
		t.Fatalf("%s: runtime read as %v collections, %v bytes of heap in use", url, w.gcs, w.heap)
	}
	before := serverWork{counts: map[string]float64{}, gcs: w.gcs - 2}
	for k, v := range w.counts {
		before.counts[k] = v - 1
	}
	if got := w.countsSince(before, 2); strings.Count(got, ", ") != 1 || !strings.Contains(got, " 1") {
		t.Fatalf("since: %q, want two counts of 1", got)
	}
	if got := w.since(before, 0); !strings.HasPrefix(got, "2 GC cycles, heap in use ") {
		t.Fatalf("since: %q, want its 2 collections first", got)
	}
	if got := w.countsSince(w, 3); got != "none" {
		t.Fatalf("since itself: %q, want none", got)
	}
}
