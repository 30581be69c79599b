package bench

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// Scenario 13's costs: what a run took of the processes' CPU, so two runs
// on a shared machine compare by work done per answer, not only by rate.

// runCost is the paths' API over one run: its CPU (user + system, s), its
// heap in use at the run's end, and over the run its GC cycles, heap
// allocations and bytes allocated (-1: not read).
type runCost struct {
	cpu, heap, gcs float64
	allocs, bytes  float64
}

// unreadCost is a runCost none of whose readings was taken.
var unreadCost = runCost{cpu: -1, heap: -1, gcs: -1, allocs: -1, bytes: -1}

// perAnswerUS is the run's CPU per answer of res, in µs (-1 unread).
func (c runCost) perAnswerUS(res Result) float64 {
	if c.cpu < 0 || res.Requests == 0 {
		return -1
	}
	return c.cpu * 1e6 / float64(res.Requests)
}

// perAnswer is a count over the run per answer of res (-1 unread): the
// heap allocations or bytes, which the machine's other work does not move.
func perAnswer(v float64, res Result) float64 {
	if v < 0 || res.Requests == 0 {
		return -1
	}
	return v / float64(res.Requests)
}

// apiGauges are an API's Go runtime readings so far, from one read of its
// /metrics (Go's collector).
type apiGauges struct {
	heap, gcs, allocs, bytes float64
}

// readGauges reads an API's apiGauges.
func readGauges(ctx context.Context, api *Proc) (apiGauges, error) {
	page, err := metricsPage(ctx, api.URL+"/metrics")
	if err != nil {
		return apiGauges{}, err
	}
	return apiGauges{
		heap: samplesIn(page, "go_memstats_heap_inuse_bytes")[""], gcs: samplesIn(page, "go_gc_duration_seconds_count")[""],
		allocs: samplesIn(page, "go_memstats_mallocs_total")[""], bytes: samplesIn(page, "go_memstats_alloc_bytes_total")[""],
	}, nil
}

// costed runs run and answers its result with api's cost over it; an
// unreadable reading leaves the cost -1, logged. The CPU window lies
// inside the two reads of /metrics: a scrape is no part of the run.
func (r *runner) costed(ctx context.Context, api *Proc, run func() Result) (Result, runCost) {
	cost := unreadCost
	g0, errGC := readGauges(ctx, api)
	cpu0, errCPU := api.CPU()
	res := run()
	if cpu1, err := api.CPU(); err == nil && errCPU == nil {
		cost.cpu = cpu1 - cpu0
	} else {
		r.o.Logger.Warn("scenario 13: the paths' API's CPU", "err", cmp.Or(errCPU, err))
	}
	if g1, err := readGauges(ctx, api); err == nil && errGC == nil {
		cost.heap, cost.gcs, cost.allocs, cost.bytes = g1.heap, g1.gcs-g0.gcs, g1.allocs-g0.allocs, g1.bytes-g0.bytes
	} else {
		r.o.Logger.Warn("scenario 13: the paths' API's heap", "err", cmp.Or(errGC, err))
	}
	return res, cost
}

// profiledRun runs run while the paths' API is profiled over it, when
// asked for (Options.ProfileDir and the API's profiler), into a file
// named by label; a note of where, or why not, joins notes.
func (r *runner) profiledRun(ctx context.Context, pprofURL, label string, notes *[]string, run func() Result) Result {
	if r.o.ProfileDir == "" || pprofURL == "" {
		return run()
	}
	path := filepath.Join(r.o.ProfileDir, "market-"+slug(label)+".pprof")
	done := make(chan error, 1)
	go func() { done <- profileCPU(ctx, pprofURL, int(max(1, r.o.Dur.Seconds())), path) }()
	res := run()
	if err := <-done; err != nil {
		*notes = append(*notes, fmt.Sprintf("%s: %v", label, err))
	} else {
		*notes = append(*notes, label+": "+path)
	}
	return res
}

// slug is label as a file name: lower case, words joined by dashes.
func slug(label string) string {
	f := strings.FieldsFunc(strings.ToLower(label), func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9')
	})
	return strings.Join(f, "-")
}

// cutCost is what the processes around the cut took over one run of the
// healthy API: CPU (s) of the healthy (paths') API, the cut instance,
// MariaDB and Redis, and the statements MariaDB received (its Questions
// counter, every client's), all -1 when unread.
type cutCost struct {
	paths, cut, mysql, redis, statements float64
	seconds                              float64
}

// cutMeter reads the processes of cutCost.
type cutMeter struct {
	paths, cut, mysql, redis cpuMeter
	statements               func(context.Context) (float64, error)
}

// newCutMeter meters st's paths and cut APIs, red and the MariaDB of the
// run.
func (r *runner) newCutMeter(st *marketStack, red *marketRedis) (*cutMeter, error) {
	ports, err := mysqlPorts(r.o.MySQLDSN, r.o.MySQLPorts)
	if err != nil {
		return nil, err
	}
	mysqlCPU, err := mariadbCPU(ports)
	if err != nil {
		return nil, err
	}
	return &cutMeter{
		paths: cpuMeter{st.paths.CPU}, cut: cpuMeter{st.cut.CPU}, mysql: mysqlCPU,
		redis:      cpuMeter{func() (float64, error) { return pidCPU(red.Pid()) }},
		statements: r.mysqlQuestions,
	}, nil
}

// mysqlQuestions is MariaDB's count of statements received so far.
func (r *runner) mysqlQuestions(ctx context.Context) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var name string
	var n float64
	if err := r.st.DB.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Questions'").Scan(&name, &n); err != nil {
		return 0, fmt.Errorf("mariadb questions: %w", err)
	}
	return n, nil
}

// read is every reading now, -1 for one unread.
func (m *cutMeter) read(ctx context.Context) [5]float64 {
	var out [5]float64
	for i, f := range []func() (float64, error){m.paths.read, m.cut.read, m.mysql.read, m.redis.read,
		func() (float64, error) { return m.statements(ctx) }} {
		v, err := f()
		if err != nil {
			v = -1
		}
		out[i] = v
	}
	return out
}

// over runs run and answers its result with the cost over it.
func (m *cutMeter) over(ctx context.Context, run func() Result) (Result, cutCost) {
	before := m.read(ctx)
	res := run()
	after := m.read(ctx)
	var d [5]float64
	for i := range d {
		d[i] = -1
		if before[i] >= 0 && after[i] >= 0 {
			d[i] = after[i] - before[i]
		}
	}
	return res, cutCost{paths: d[0], cut: d[1], mysql: d[2], redis: d[3], statements: d[4], seconds: res.Seconds}
}

// per202MS is a CPU reading per 202 of res, in ms (-1 unread).
func per202MS(cpu float64, res Result) float64 {
	n := res.Count(202)
	if cpu < 0 || n == 0 {
		return -1
	}
	return cpu * 1000 / float64(n)
}

// rate is a count over the run, a second (-1 unread).
func (c cutCost) rate(v float64) float64 {
	if v < 0 || c.seconds == 0 {
		return -1
	}
	return v / c.seconds
}

// share is a CPU reading over the run in % of a core (-1 unread).
func (c cutCost) share(cpu float64) float64 {
	if cpu < 0 || c.seconds == 0 {
		return -1
	}
	return cpu / c.seconds * 100
}

// line renders the cost over res: each process's CPU per 202 and the cut
// instance's share of a core, MariaDB's statements a second.
func (c cutCost) line(res Result) string {
	return fmt.Sprintf("CPU ms per 202: healthy API %s, cut instance %s, MariaDB %s, Redis %s; cut instance %s %% of a core; MariaDB %s statements/s",
		num(per202MS(c.paths, res)), num(per202MS(c.cut, res)), num(per202MS(c.mysql, res)), num(per202MS(c.redis, res)),
		num(c.share(c.cut)), num(c.rate(c.statements)))
}
