// Package inflight counts a fake's calls in flight at once, so a test can
// hold a bound on concurrency: that it is never passed, and that it is
// reached (a bound never reached proves nothing).
package inflight

import "sync"

// Gauge counts the calls in flight and the most there ever were. Its zero
// value is ready; it is safe for concurrent use.
type Gauge struct {
	mu        sync.Mutex
	now, most int
}

// Enter counts a call in; the answered function counts it out (defer it).
func (g *Gauge) Enter() (leave func()) {
	g.mu.Lock()
	g.now++
	g.most = max(g.most, g.now)
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		g.now--
		g.mu.Unlock()
	}
}

// Most is the most calls ever in flight at once.
func (g *Gauge) Most() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.most
}

// Now is the calls in flight now.
func (g *Gauge) Now() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.now
}
