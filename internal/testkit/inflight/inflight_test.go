package inflight

import (
	"sync"
	"testing"
)

// Four calls held together are four in flight at most; all left, none now.
func TestGaugeCountsTheMostInFlight(t *testing.T) {
	var g Gauge
	var entered, wg sync.WaitGroup
	release := make(chan struct{})
	entered.Add(4)
	for range 4 {
		wg.Go(func() {
			defer g.Enter()()
			entered.Done()
			<-release
		})
	}
	entered.Wait()
	if got := g.Now(); got != 4 {
		t.Fatalf("in flight while held: %d, want 4", got)
	}
	close(release)
	wg.Wait()
	if got := g.Most(); got != 4 {
		t.Fatalf("most: %d, want 4", got)
	}
	if got := g.Now(); got != 0 {
		t.Fatalf("in flight after: %d, want 0", got)
	}
}
