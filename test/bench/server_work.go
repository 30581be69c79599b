package bench

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"
)

// serverWork is the Temporal dev server's own count of the work it did,
// from its metrics page: history tasks (task_requests) and persistence
// calls (persistence_requests) by operation, summed over the other
// labels, and its Go runtime's collections so far and heap in use. An
// idle window that costs the server CPU says what the CPU went on: work,
// or a collection of a heap that grew with the open workflows.
type serverWork struct {
	counts    map[string]float64
	gcs, heap float64
}

// serverWorkMetrics are the counters serverWork reads, by their name in
// it.
var serverWorkMetrics = map[string]string{"task_requests": "task", "persistence_requests": "persistence"}

// devServerMetrics finds the metrics page of the dev server serving the
// Temporal address: the dev server picks its metrics port at random, so
// each port it listens on is asked for /metrics until one serves
// Temporal's counters.
func devServerMetrics(ctx context.Context, addr string) (string, error) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("dev server metrics: %w", err)
	}
	procs, err := procfs.AllProcs()
	if err != nil {
		return "", fmt.Errorf("dev server metrics: %w", err)
	}
	pid, ok := devServer(procs, port)
	if !ok {
		return "", fmt.Errorf("dev server metrics: no dev server serves %s", addr)
	}
	ports, err := listeningPorts(pid)
	if err != nil {
		return "", fmt.Errorf("dev server metrics: %w", err)
	}
	for _, p := range ports {
		url := "http://127.0.0.1:" + strconv.FormatUint(p, 10) + "/metrics"
		if page, err := metricsPage(ctx, url); err == nil && strings.Contains(page, "task_requests") {
			return url, nil
		}
	}
	return "", fmt.Errorf("dev server metrics: none of its ports %v serves them", ports)
}

// listeningPorts are the TCP ports pid listens on: its sockets (by inode)
// that /proc/net/tcp and tcp6 list listening.
func listeningPorts(pid int) ([]uint64, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return nil, err
	}
	targets, err := p.FileDescriptorTargets()
	if err != nil {
		return nil, err
	}
	var ports []uint64
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(table)
		if err != nil {
			return nil, fmt.Errorf("listening ports: %w", err)
		}
		for line := range strings.Lines(string(b)) {
			// sl local_address rem_address st ... uid timeout inode
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" { // 0A: LISTEN
				continue
			}
			_, hexPort, ok := strings.Cut(f[1], ":")
			port, err := strconv.ParseUint(hexPort, 16, 16)
			if ok && err == nil && slices.Contains(targets, "socket:["+f[9]+"]") && !slices.Contains(ports, port) {
				ports = append(ports, port)
			}
		}
	}
	return ports, nil
}

// readServerWork reads the dev server's counters at url.
func readServerWork(ctx context.Context, url string) (serverWork, error) {
	page, err := metricsPage(ctx, url)
	if err != nil {
		return serverWork{}, fmt.Errorf("dev server work: %w", err)
	}
	w := serverWork{counts: map[string]float64{}}
	for metric, short := range serverWorkMetrics {
		for labels, v := range samplesIn(page, metric) {
			w.counts[short+" "+cmp.Or(labelValue(labels, "operation"), "?")] += v
		}
	}
	// One runtime serves every service: each reports the same figures.
	for _, v := range samplesIn(page, "memory_num_gc_last") {
		w.gcs = max(w.gcs, v)
	}
	for _, v := range samplesIn(page, "memory_heapinuse") {
		w.heap = max(w.heap, v)
	}
	return w, nil
}

// since is what the server did from before to w, in words: its
// collections and heap, then the n largest counts.
func (w serverWork) since(before serverWork, n int) string {
	return fmt.Sprintf("%.0f GC cycles, heap in use %.0f MB; %s", w.gcs-before.gcs, w.heap/(1<<20), w.countsSince(before, n))
}

// countsSince is the n largest counts from before to w, in words.
func (w serverWork) countsSince(before serverWork, n int) string {
	type count struct {
		what string
		d    float64
	}
	var counts []count
	for k, v := range w.counts {
		if d := v - before.counts[k]; d > 0 {
			counts = append(counts, count{k, d})
		}
	}
	slices.SortFunc(counts, func(a, b count) int { return cmp.Or(cmp.Compare(b.d, a.d), cmp.Compare(a.what, b.what)) })
	parts := make([]string, 0, n)
	for _, c := range counts[:min(n, len(counts))] {
		parts = append(parts, fmt.Sprintf("%s %s", c.what, num(c.d)))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// serverWorkOver reads the dev server's work counters now and returns a
// function that says, in words, what it did since; "not read" (why) when
// the server is not a dev server here or its counters do not answer.
func (r *runner) serverWorkOver(ctx context.Context) func() string {
	notRead := func(err error) string { return "not read (" + err.Error() + ")" }
	url, err := devServerMetrics(ctx, r.o.TemporalAddress)
	var w0 serverWork
	if err == nil {
		w0, err = readServerWork(ctx, url)
	}
	if err != nil {
		return func() string { return notRead(err) }
	}
	return func() string {
		w1, err := readServerWork(ctx, url)
		if err != nil {
			return notRead(err)
		}
		return w1.since(w0, 8)
	}
}
