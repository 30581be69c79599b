package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/seckill/seckill/redisgateway"
)

// Fault classes.
const (
	FAPIKill           = "api-sigkill"
	FAPIFreeze         = "api-sigstop"
	FWorkerKill        = "worker-sigkill"
	FWorkerFreeze      = "worker-sigstop"
	FRedisKill         = "redis-sigkill"
	FRedisFreeze       = "redis-sigstop"
	FMySQLKill         = "mysql-sigkill"
	FMySQLFreeze       = "mysql-sigstop"
	FMySQLDown         = "mysql-down-long"
	FTemporalKill      = "temporal-sigkill"
	FTemporalFreeze    = "temporal-sigstop"
	FLinkCut           = "link-cut"
	FLinkSlow          = "link-slow"
	FRedisAOFLoss      = "redis-aof-loss"     // restarted without its last second of AOF
	FRedisKeysDeleted  = "redis-keys-deleted" // one sale's keys deleted
	FWorkflowTerminate = "workflow-terminate" // an order workflow terminated with the CLI
	FAPIDeploy         = "api-deploy"         // SIGTERM, a graceful exit, the binary started again
	FWorkerDeploy      = "worker-deploy"
	FRedisFailover     = "redis-failover-lost-writes" // to a replica that missed the last writes (single Redis only)
	// The database's writer fails over (Galera only): the writer node
	// SIGKILLed, or its network cut while it runs; HAProxy moves every
	// connection to the next node, and the old writer rejoins at the heal.
	FDBFailoverKill = "db-failover-sigkill"
	FDBFailoverCut  = "db-failover-cut"
)

// AllFaults lists every class; -faults all.
var AllFaults = []string{FAPIKill, FAPIFreeze, FWorkerKill, FWorkerFreeze, FRedisKill, FRedisFreeze, FMySQLKill, FMySQLFreeze,
	FMySQLDown, FTemporalKill, FTemporalFreeze, FLinkCut, FLinkSlow, FRedisAOFLoss, FRedisKeysDeleted, FWorkflowTerminate,
	FAPIDeploy, FWorkerDeploy, FRedisFailover, FDBFailoverKill, FDBFailoverCut}

// singleDBFaults act on the one mariadbd; Galera's nodes have the failover
// classes instead (a whole-cluster outage is a bootstrap, not a fault).
var singleDBFaults = []string{FMySQLKill, FMySQLFreeze, FMySQLDown}

// galeraFaults need the Galera cluster.
var galeraFaults = []string{FDBFailoverKill, FDBFailoverCut}

// writesLost says which classes may lose acknowledged writes (contract 1.1).
func writesLost(class string) bool {
	return class == FRedisAOFLoss || class == FRedisKeysDeleted || class == FRedisFailover
}

// FaultsFor is the classes o's configuration can inject, in their order
// (so a configuration's schedule stays the one it drew before classes of
// other configurations were added): a Redis Cluster has no replica to
// fail over to; the database failover needs Galera, which has no single
// mariadbd to kill, freeze or hold down.
func (o Options) FaultsFor(classes []string) []string {
	return slices.DeleteFunc(slices.Clone(classes), func(c string) bool {
		switch {
		case c == FRedisFailover:
			return o.Cluster()
		case slices.Contains(singleDBFaults, c):
			return o.Galera()
		case slices.Contains(galeraFaults, c):
			return !o.Galera()
		}
		return false
	})
}

// resource is what a class acts on; two faults on one resource never overlap.
func resource(p Planned) string {
	switch p.Class {
	case FAPIKill, FAPIFreeze, FAPIDeploy:
		return fmt.Sprintf("api%d", p.Pick%2+1)
	case FWorkerKill, FWorkerFreeze, FWorkerDeploy:
		return fmt.Sprintf("worker%d", p.Pick%2+1)
	case FRedisKill, FRedisFreeze, FRedisAOFLoss, FRedisKeysDeleted, FRedisFailover:
		return "redis"
	case FMySQLKill, FMySQLFreeze, FMySQLDown, FDBFailoverKill, FDBFailoverCut:
		return "mysql"
	case FTemporalKill, FTemporalFreeze, FWorkflowTerminate:
		// The CLI needs the server: a terminate never lands in an outage.
		return "temporal"
	case FLinkCut, FLinkSlow:
		return "links"
	}
	return p.Class
}

// spanRange is how long a class lasts before it heals.
func spanRange(class string, run time.Duration) (time.Duration, time.Duration) {
	switch class {
	case FMySQLDown:
		// "For minutes" in a long run; a quarter of a short one.
		return min(run/6, 60*time.Second), min(run/4, 150*time.Second)
	case FTemporalKill, FTemporalFreeze:
		// Long enough, in a long run, to pass the dead-letter age (60 s).
		return 5 * time.Second, min(run/5, 90*time.Second)
	case FRedisKeysDeleted, FWorkflowTerminate, FRedisAOFLoss:
		return 0, 2 * time.Second
	case FAPIDeploy, FWorkerDeploy:
		return 500 * time.Millisecond, 5 * time.Second // between the old exit and the new start
	case FRedisFailover:
		return 2 * time.Second, 6 * time.Second // the writes the replica misses
	case FDBFailoverKill, FDBFailoverCut:
		// Past galera.Tuning's 6 s, after which the others go on without
		// the node, so a cut is seen before it heals.
		return 10 * time.Second, 40 * time.Second
	}
	return 2 * time.Second, 15 * time.Second
}

// Planned is one fault of the schedule.
type Planned struct {
	ID    int
	At    time.Duration // from the start of the workload
	Span  time.Duration
	Class string
	Pick  int // which target: API, worker, link, sale, token
}

// Schedule draws the nemesis's faults for a run from its seed: one fault or
// two overlapping at a time, never two on one resource, every class at
// least once before any repeats (as long as the run has room).
func Schedule(seed int64, run time.Duration, classes []string) []Planned {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x6e656d65736973))
	var out []Planned
	var bag []string
	t := 5 * time.Second
	end := run - 5*time.Second
	for t < end && len(classes) > 0 {
		if len(bag) == 0 {
			bag = slices.Clone(classes)
			rng.Shuffle(len(bag), func(i, j int) { bag[i], bag[j] = bag[j], bag[i] })
		}
		p := Planned{ID: len(out) + 1, Class: bag[0], Pick: rng.IntN(1 << 20)}
		bag = bag[1:]
		lo, hi := spanRange(p.Class, run)
		p.Span = lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
		p.Span = p.Span.Round(100 * time.Millisecond)
		// The next start: while this one lasts (overlap) one time in three.
		at := t
		for !fits(out, p, at) {
			at += 500 * time.Millisecond
		}
		p.At = at
		if p.At+p.Span > end {
			p.Span = max(0, end-p.At)
		}
		out = append(out, p)
		gap := time.Duration(2+rng.IntN(6)) * time.Second
		if rng.IntN(3) == 0 {
			t = p.At + p.Span/3
		} else {
			t = p.At + p.Span + gap
		}
	}
	return out
}

// fits reports whether p may start at `at`: fewer than two faults active,
// none on its resource.
func fits(done []Planned, p Planned, at time.Duration) bool {
	active := 0
	for _, q := range done {
		if at >= q.At && at < q.At+q.Span+time.Second {
			active++
			if resource(q) == resource(p) {
				return false
			}
		}
	}
	return active < 2
}

// Nemesis runs a schedule against a deployment, recording each fault.
type Nemesis struct {
	D      *Deployment
	H      *Recorder
	Sales  []int64
	Tokens func(pick int) (token string, sale int64, ok bool) // a live token to terminate
	Logf   func(format string, args ...any)

	// SaleNodes: the Redis node holding each sale's keys (with a cluster,
	// the master of its slot), looked up before the faults begin.
	SaleNodes map[int64]*RedisNode

	mu      sync.Mutex
	aofSize map[string][]aofSample // by node dir
	busy    map[string]*sync.Mutex // per resource: a restart that runs late delays the next fault on it
}

func (n *Nemesis) lock(res string) *sync.Mutex {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.busy == nil {
		n.busy = map[string]*sync.Mutex{}
	}
	m, ok := n.busy[res]
	if !ok {
		m = &sync.Mutex{}
		n.busy[res] = m
	}
	return m
}

type aofSample struct {
	at   time.Time
	file string // the incr AOF (a rewrite starts another)
	size int64
}

// Run injects each planned fault at its time and heals it after its span;
// it returns when every fault has healed.
func (n *Nemesis) Run(ctx context.Context, start time.Time, plan []Planned) {
	sctx, stop := context.WithCancel(ctx)
	go n.sampleAOF(sctx)
	defer stop()
	var wg sync.WaitGroup
	for _, p := range plan {
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(start.Add(p.At))):
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() { n.one(ctx, p) })
	}
	wg.Wait()
}

// one injects p, waits its span, heals it.
func (n *Nemesis) one(ctx context.Context, p Planned) {
	m := n.lock(resource(p))
	m.Lock()
	defer m.Unlock()
	// The span begins when the injection does: some faults take their
	// whole effect inside inject (an AOF loss kills, truncates and
	// restarts Redis), and what the system does meanwhile is their doing.
	ev := Event{Kind: KindFault, Op: p.Class, FaultID: p.ID, WritesLost: writesLost(p.Class), T: time.Now()}
	heal, target, sale, err := n.inject(ctx, p)
	ev.Target, ev.Sale = target, sale
	if err != nil {
		ev.Detail = "inject failed: " + err.Error()
		n.Logf("fault %d %s %s: %v", p.ID, p.Class, target, err)
	} else {
		ev.Detail = fmt.Sprintf("for %s", p.Span)
	}
	ev = n.H.Add(ev)
	if err == nil {
		select {
		case <-ctx.Done():
		case <-time.After(p.Span):
		}
	}
	herr := error(nil)
	if heal != nil {
		// Healing must happen even when the run is cancelled.
		herr = heal(context.WithoutCancel(ctx))
	}
	h := Event{Kind: KindHeal, Op: p.Class, FaultID: p.ID, Target: target, Sale: sale}
	if herr != nil {
		h.Detail = "heal failed: " + herr.Error()
		n.Logf("heal %d %s %s: %v", p.ID, p.Class, target, herr)
	}
	n.H.Add(h)
}

// inject starts a fault and returns how to heal it.
func (n *Nemesis) inject(ctx context.Context, p Planned) (func(context.Context) error, string, int64, error) {
	switch p.Class {
	case FLinkCut, FLinkSlow:
		return n.injectLink(p)
	case FRedisAOFLoss:
		return n.aofLoss(ctx, p.Pick)
	case FRedisFailover:
		return n.failoverCut(ctx, p)
	case FDBFailoverKill, FDBFailoverCut:
		return n.dbFailover(ctx, p)
	case FRedisKeysDeleted:
		return n.deleteSaleKeys(ctx, p.Pick)
	case FWorkflowTerminate:
		return n.terminateWorkflow(ctx, p.Pick)
	}
	return n.injectProcess(p)
}

// injectProcess kills, freezes or deploys the process the fault picks.
func (n *Nemesis) injectProcess(p Planned) (func(context.Context) error, string, int64, error) {
	d := n.D
	restart := func(pr *Proc) func(context.Context) error {
		return func(ctx context.Context) error { return pr.Start(ctx, 3*time.Minute) }
	}
	kill := func(pr *Proc) (func(context.Context) error, string, int64, error) {
		if err := pr.Kill(); err != nil {
			return nil, pr.Name, 0, err
		}
		return restart(pr), pr.Name, 0, nil
	}
	// A deploy: the process exits gracefully (its drain bounded as an
	// orchestrator bounds it) and the same binary starts after the span.
	deploy := func(pr *Proc) (func(context.Context) error, string, int64, error) {
		return restart(pr), pr.Name, 0, pr.StopGracefully(30 * time.Second)
	}
	freeze := func(pr *Proc) (func(context.Context) error, string, int64, error) {
		if err := pr.Freeze(); err != nil {
			return nil, pr.Name, 0, err
		}
		return func(context.Context) error { return pr.Thaw() }, pr.Name, 0, nil
	}
	switch p.Class {
	case FAPIKill:
		return kill(d.APIs[p.Pick%len(d.APIs)].Proc)
	case FAPIFreeze:
		return freeze(d.APIs[p.Pick%len(d.APIs)].Proc)
	case FAPIDeploy:
		return deploy(d.APIs[p.Pick%len(d.APIs)].Proc)
	case FWorkerKill:
		return kill(d.Workers[p.Pick%len(d.Workers)].Proc)
	case FWorkerDeploy:
		return deploy(d.Workers[p.Pick%len(d.Workers)].Proc)
	case FWorkerFreeze:
		return freeze(d.Workers[p.Pick%len(d.Workers)].Proc)
	case FRedisKill, FRedisFreeze:
		node, what := n.redisNode(p.Pick)
		pr := node.Proc
		var (
			heal   func(context.Context) error
			target string
			err    error
		)
		if p.Class == FRedisKill {
			heal, target, _, err = kill(pr)
		} else {
			heal, target, _, err = freeze(pr)
		}
		return heal, target + what, 0, err
	case FMySQLKill, FMySQLDown:
		if d.MySQL == nil {
			return nil, "mariadb", 0, fmt.Errorf("%s needs the single mariadbd", p.Class)
		}
		return kill(d.MySQL)
	case FMySQLFreeze:
		if d.MySQL == nil {
			return nil, "mariadb", 0, fmt.Errorf("%s needs the single mariadbd", p.Class)
		}
		return freeze(d.MySQL)
	case FTemporalKill:
		return kill(d.Temporal)
	case FTemporalFreeze:
		return freeze(d.Temporal)
	}
	return nil, "", 0, fmt.Errorf("unknown fault class %q", p.Class)
}

// injectLink cuts or slows the link the fault picks: one process's to
// Redis, MySQL or Temporal, or on a cluster everyone's to one master.
func (n *Nemesis) injectLink(p Planned) (func(context.Context) error, string, int64, error) {
	d := n.D
	apps := d.Apps()
	a := apps[p.Pick%len(apps)]
	links := []string{LinkRedis, LinkMySQL, LinkTemporal}
	link := links[(p.Pick/len(apps))%len(links)]
	px := a.Links[link]
	target := a.Name + "<->" + link
	if link == LinkRedis && d.Cluster {
		// Every process reaches a master through its one proxy.
		node, what := n.redisNode(p.Pick / (len(apps) * len(links)))
		px = node.Proxy
		target = "all<->" + node.Name + what
	}
	if p.Class == FLinkCut {
		px.SetCut(true)
		return func(context.Context) error { px.SetCut(false); return nil }, target, 0, nil
	}
	delay := time.Duration(100+(p.Pick%9)*100) * time.Millisecond
	px.SetDelay(delay)
	return func(context.Context) error { px.SetDelay(0); return nil }, fmt.Sprintf("%s +%s", target, delay), 0, nil
}

// deleteSaleKeys deletes every Redis key of the sale the fault picks.
func (n *Nemesis) deleteSaleKeys(ctx context.Context, pick int) (func(context.Context) error, string, int64, error) {
	sale := n.Sales[pick%len(n.Sales)]
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// One slot (the keys' hash tag): one DEL on a cluster too.
	if err := n.D.RDB.Del(dctx, redisgateway.SaleKeys(sale).All()...).Err(); err != nil {
		return nil, "redis", sale, fmt.Errorf("delete keys of sale %d: %w", sale, err)
	}
	target := fmt.Sprintf("sale %d keys", sale)
	if n.D.Cluster {
		if node := n.SaleNodes[sale]; node != nil {
			target += " on " + node.Name
		}
	}
	return nil, target, sale, nil
}

// terminateWorkflow terminates a pending reservation's workflow, as an
// operator's mistake would.
func (n *Nemesis) terminateWorkflow(ctx context.Context, pick int) (func(context.Context) error, string, int64, error) {
	tok, sale, ok := n.Tokens(pick)
	if !ok {
		var err error
		if tok, sale, err = n.pendingToken(ctx, pick); err != nil {
			return nil, "none", 0, err
		}
	}
	var err error
	for attempt := 0; attempt < 15; attempt++ { // the server may still be starting
		if err = n.D.TerminateWorkflow(ctx, "order:"+tok); err == nil {
			break
		}
		if strings.Contains(err.Error(), "already completed") || strings.Contains(err.Error(), "not found") {
			// It ended meanwhile (paid, cancelled, expired): another one.
			var perr error
			if tok, sale, perr = n.pendingToken(ctx, pick+attempt+1); perr != nil {
				return nil, "none", 0, errors.Join(err, perr)
			}
			continue
		}
		time.Sleep(2 * time.Second)
	}
	if err != nil {
		return nil, "order:" + tok, sale, err
	}
	return nil, "order:" + tok, sale, nil
}

// redisNode is the Redis node a fault with this pick acts on: the single
// one, or the master holding the keys of the sale the pick names (every
// key of a sale shares its slot). what describes it for the target.
func (n *Nemesis) redisNode(pick int) (node *RedisNode, what string) {
	nodes := n.D.Nodes
	if !n.D.Cluster || len(n.Sales) == 0 {
		return nodes[0], ""
	}
	sale := n.Sales[pick%len(n.Sales)]
	if node := n.SaleNodes[sale]; node != nil {
		return node, fmt.Sprintf(" (master of sale %d)", sale)
	}
	return nodes[pick%len(nodes)], ""
}

// aofLoss kills a Redis node, cuts its AOF back to its size a second ago
// (what a host crash under appendfsync everysec may leave) and starts it
// again.
func (n *Nemesis) aofLoss(ctx context.Context, pick int) (func(context.Context) error, string, int64, error) {
	node, what := n.redisNode(pick)
	name := node.Name + what
	incr, err := aofIncr(node.Dir)
	if err != nil {
		return nil, name, 0, err
	}
	n.mu.Lock()
	cut := int64(-1)
	for _, s := range n.aofSize[node.Dir] {
		if s.file == incr && time.Since(s.at) >= time.Second {
			cut = s.size
		}
	}
	n.mu.Unlock()
	if err := node.Kill(); err != nil {
		return nil, name, 0, err
	}
	fi, err := os.Stat(incr)
	if err != nil {
		return restartOnly(node.Proc), name, 0, fmt.Errorf("stat AOF: %w", err)
	}
	lost := int64(0)
	if cut >= 0 && cut < fi.Size() {
		lost = fi.Size() - cut
		if err := os.Truncate(incr, cut); err != nil {
			return restartOnly(node.Proc), name, 0, fmt.Errorf("truncate AOF: %w", err)
		}
	}
	if err := node.Start(ctx, 2*time.Minute); err != nil {
		return nil, name, 0, err
	}
	return nil, fmt.Sprintf("%s (AOF -%d bytes)%s", node.Name, lost, what), 0, nil
}

func restartOnly(p *Proc) func(context.Context) error {
	return func(ctx context.Context) error { return p.Start(ctx, 2*time.Minute) }
}

// sampleAOF records the AOF's size every 100 ms, keeping five seconds.
func (n *Nemesis) sampleAOF(ctx context.Context) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, node := range n.D.Nodes {
			incr, err := aofIncr(node.Dir)
			if err != nil {
				continue
			}
			fi, err := os.Stat(incr)
			if err != nil {
				continue
			}
			n.mu.Lock()
			if n.aofSize == nil {
				n.aofSize = map[string][]aofSample{}
			}
			ss := append(n.aofSize[node.Dir], aofSample{at: time.Now(), file: incr, size: fi.Size()})
			for len(ss) > 0 && time.Since(ss[0].at) > 5*time.Second {
				ss = ss[1:]
			}
			n.aofSize[node.Dir] = ss
			n.mu.Unlock()
		}
	}
}

func aofIncr(dir string) (string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "appendonlydir", "*.incr.aof"))
	if err != nil || len(files) != 1 {
		return "", fmt.Errorf("one incr AOF in %s: %v %v", dir, files, err)
	}
	return files[0], nil
}

// pendingToken picks a PENDING_PAYMENT reservation from MySQL (a client
// may have walked away from it), waiting up to 20 s for one.
func (n *Nemesis) pendingToken(ctx context.Context, pick int) (string, int64, error) {
	for attempt := 0; attempt < 20; attempt++ {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		rows, err := n.D.DB.QueryContext(qctx, "SELECT token, sale_id FROM reservations WHERE status = 'PENDING_PAYMENT' ORDER BY created_at, token LIMIT 50")
		var toks []string
		var sales []int64
		if err == nil {
			for rows.Next() {
				var t string
				var s int64
				if rows.Scan(&t, &s) == nil {
					toks, sales = append(toks, t), append(sales, s)
				}
			}
			rows.Close()
		}
		cancel()
		if len(toks) > 0 {
			i := pick % len(toks)
			return toks[i], sales[i], nil
		}
		time.Sleep(time.Second)
	}
	return "", 0, fmt.Errorf("no PENDING_PAYMENT reservation to terminate")
}
