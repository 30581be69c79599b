package bench

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"time"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/domain"
)

// burstProfileSeconds is the length of scenario 3's CPU profiles: the
// burst and most of its drain on this machine.
const burstProfileSeconds = 20

// burstMeters read the CPU of a stack's processes: the API and worker,
// the Temporal server, and Redis with MariaDB (scenario 3's figures,
// scenario 5's split of the cores).
type burstMeters struct {
	api, worker, server, services cpuMeter
	serverName                    string
	notes                         []string
}

func (r *runner) burstMeters(api, worker *Proc) *burstMeters {
	m := &burstMeters{api: cpuMeter{api.CPU}, worker: cpuMeter{worker.CPU}}
	var err error
	if m.server, m.serverName, err = temporalServerCPU(r.o.TemporalAddress); err != nil {
		m.serverName = "the Temporal server (not found)"
		m.notes = append(m.notes, fmt.Sprintf("Temporal server CPU not measured: %v", err))
	}
	ports, err := mysqlPorts(r.o.MySQLDSN, r.o.MySQLPorts)
	if err == nil {
		m.services, err = servicesCPU(r.o.RedisAddr, ports)
	}
	if err != nil {
		m.notes = append(m.notes, fmt.Sprintf("Redis and MariaDB CPU not measured: %v", err))
	}
	return m
}

// read is a meter's reading, 0 (and a note) when it cannot be read.
func (m *burstMeters) read(c cpuMeter) float64 {
	if c == nil {
		return 0
	}
	v, err := c.read()
	if err != nil {
		m.notes = append(m.notes, fmt.Sprintf("CPU not read: %v", err))
		return 0
	}
	return v
}

// burst: scenario 3, a flash sale of BurstStock units to BurstUsers users
// on 256 connections, then the drain to PENDING_PAYMENT against hello
// workflows on the same Temporal server.
func (r *runner) burst(ctx context.Context, api, worker *Proc) error {
	const conns = 256
	s, err := r.sale(ctx, api, "burst", r.o.BurstStock, 16, true)
	if err != nil {
		return err
	}
	toks, _, err := r.users(r.o.BurstUsers)
	if err != nil {
		return err
	}
	c := newDoer(conns)
	url := api.URL + client.ReservationsPath(s.ID)

	m := r.burstMeters(api, worker)
	api0, worker0, server0, svc0 := m.read(m.api), m.read(m.worker), m.read(m.server), m.read(m.services)
	relay0 := r.relayCalls(ctx, worker, m)
	workerCalls0, apiCalls0 := r.temporalCalls(ctx, m, worker), r.temporalCalls(ctx, m, api)
	// The drain clock runs from the burst's first request until every
	// unit's order is PENDING_PAYMENT in MySQL.
	start := time.Now()
	waitProfiles := r.profileBurst(ctx, worker, burstProfileSeconds)
	pollCtx, stopPoll := context.WithTimeout(ctx, runLimit(int(r.o.BurstStock)))
	defer stopPoll()
	drained := r.watchDrain(pollCtx, s.ID, start)
	res, settled, err := ClosedLoopSettled(ctx, "burst reserve", conns, 3*time.Minute, int64(len(toks)), reserveOp(c, url, toks))
	if err != nil {
		return err
	}
	reserved := settled.Accepted(res)
	drain, ok := <-drained
	api1, worker1, server1, svc1 := m.read(m.api), m.read(m.worker), m.read(m.server), m.read(m.services)
	var notes []string
	if !ok {
		// Slow, not wrong: reported, and the checks below still run.
		notes = append(notes, fmt.Sprintf("the %d orders did not all reach PENDING_PAYMENT within %v; drain figures are 0", r.o.BurstStock, runLimit(int(r.o.BurstStock))))
	}
	if reserved != r.o.BurstStock {
		r.violation("scenario 3: %d reservations accepted, want exactly %d", reserved, r.o.BurstStock)
	}
	if n := settled.Final[http.StatusServiceUnavailable]; n > 0 {
		r.violation("scenario 3: %d requests still 503 after %d retries", n, settleRounds)
	}
	if err := r.checkBurst(ctx, api, s.ID, ok); err != nil {
		return err
	}
	br := burstRuns{stock: r.o.BurstStock, users: len(toks), conns: conns, res: res, settled: settled, reserved: reserved, drain: drain, m: m}
	br.relayPerOrder = (r.relayCalls(ctx, worker, m) - relay0) / float64(r.o.BurstStock)
	br.workerCalls, br.workerCallOps = r.temporalCalls(ctx, m, worker).perOrder(workerCalls0, r.o.BurstStock)
	br.apiCalls, br.apiCallOps = r.temporalCalls(ctx, m, api).perOrder(apiCalls0, r.o.BurstStock)
	br.notes = append(notes, waitProfiles()...) // before the hello run, which they must not see
	helloServer0 := m.read(m.server)
	if br.helloRate, br.helloTime, err = HelloRate(ctx, r.tc, "bench-hello-"+r.stamp, int(r.o.BurstStock), 64); err != nil {
		return fmt.Errorf("hello baseline: %w", err)
	}
	helloServer1 := m.read(m.server)
	if br.histories, err = r.orderHistories(ctx, api); err != nil {
		return err
	}
	br.serverPerOrder = perRequestMS(server1-server0, r.o.BurstStock)
	br.serverPerHello = perRequestMS(helloServer1-helloServer0, r.o.BurstStock)
	br.stackPerOrder = perRequestMS(api1-api0+worker1-worker0, r.o.BurstStock)
	br.workerPerOrder = perRequestMS(worker1-worker0, r.o.BurstStock)
	br.apiPerRequest = perRequestMS(api1-api0, res.Requests+int64(settled.Retried)) * 1000 // µs
	br.svcPerOrder = perRequestMS(svc1-svc0, r.o.BurstStock)
	r.add(br.scenario())
	return nil
}

// relayCalls is the worker's workflow starts so far, failed ones included.
func (r *runner) relayCalls(ctx context.Context, worker *Proc, m *burstMeters) float64 {
	var n float64
	for _, name := range []string{"seckill_inbox_started_total", "seckill_inbox_start_errors_total"} {
		v, err := metricSum(ctx, worker.URL+"/metrics", name)
		if err != nil {
			m.notes = append(m.notes, fmt.Sprintf("relay starts not read: %v", err))
		}
		n += v
	}
	return n
}

// watchDrain sends how long after start every unit of the sale had its
// order PENDING_PAYMENT in MySQL, or closes the channel when ctx ends
// first.
func (r *runner) watchDrain(ctx context.Context, saleID int64, start time.Time) <-chan time.Duration {
	drained := make(chan time.Duration, 1)
	go func() {
		for ctx.Err() == nil {
			qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			counts, err := r.st.CountReservations(qctx, saleID)
			cancel()
			if err == nil && counts[domain.StatusPendingPayment] >= r.o.BurstStock {
				drained <- time.Since(start)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		close(drained)
	}()
	return drained
}

// burstRuns are scenario 3's measurements.
type burstRuns struct {
	stock, reserved                               int64
	users, conns                                  int
	res                                           Result
	settled                                       Settled
	drain, helloTime                              time.Duration
	helloRate, relayPerOrder                      float64
	workerCalls, apiCalls                         float64
	workerCallOps, apiCallOps                     string
	serverPerOrder, serverPerHello, stackPerOrder float64
	workerPerOrder, apiPerRequest, svcPerOrder    float64
	histories                                     orderHistories
	m                                             *burstMeters
	notes                                         []string
}

func (br burstRuns) scenario() Scenario {
	stock, res, settled, m, notes := br.stock, br.res, br.settled, br.m, br.notes
	serverPerOrder, serverPerHello, stackPerOrder, svcPerOrder := br.serverPerOrder, br.serverPerHello, br.stackPerOrder, br.svcPerOrder
	allPerOrder := serverPerOrder + stackPerOrder + svcPerOrder
	drainRate := 0.0
	if br.drain > 0 {
		drainRate = float64(stock) / br.drain.Seconds()
	}
	hello := Result{Name: fmt.Sprintf("%d hello workflows", stock), Mode: "closed", Connections: 64, Requests: stock, Seconds: br.helloTime.Seconds(), RPS: br.helloRate, Status: map[string]int64{"completed": stock}}
	return Scenario{
		ID: "3 burst", Title: fmt.Sprintf("Flash-sale burst: stock %d, %d users, %d connections", stock, br.users, br.conns),
		Runs: []Result{res, hello},
		Figures: append([]Figure{
			{Name: "reservation answers/s", Value: res.RPS, Unit: "req/s", Published: pubJMeter},
			{Name: "burst p99", Value: res.P99MS, Unit: "ms", Published: "p99 95 ms (same JMeter run)"},
			{Name: "units reserved", Value: float64(br.reserved), Unit: "units", Target: fmt.Sprintf("exactly %d", stock)},
			{Name: "503s retried (outcome unknown)", Value: float64(settled.Retried), Unit: "requests"},
			{Name: "of them 202 on the retry", Value: float64(settled.Final[http.StatusAccepted]), Unit: "requests"},
			{Name: "drain time to all PENDING_PAYMENT", Value: br.drain.Seconds(), Unit: "s", Target: drainTarget(stock)},
			{Name: "orders drained/s", Value: drainRate, Unit: "orders/s", Published: pubConsumer},
			{Name: "hello workflows/s (baseline)", Value: br.helloRate, Unit: "wf/s"},
			{Name: "drain / hello rate", Value: ratio(drainRate, br.helloRate), Unit: "×", Target: "≥ 3"},
			{Name: "Temporal server CPU per order", Value: serverPerOrder, Unit: "ms"},
			{Name: "Temporal server CPU per hello workflow", Value: serverPerHello, Unit: "ms"},
			{Name: "server CPU per order / per hello workflow", Value: ratio(serverPerOrder, serverPerHello), Unit: "×"},
			{Name: "API + worker CPU per order", Value: stackPerOrder, Unit: "ms"},
			{Name: "worker CPU per order", Value: br.workerPerOrder, Unit: "ms"},
			{Name: "relay's workflow starts per order", Value: br.relayPerOrder, Unit: "calls"},
			{Name: "worker's Temporal calls per order", Value: br.workerCalls, Unit: "calls"},
			{Name: "API's Temporal calls per order", Value: br.apiCalls, Unit: "calls"},
			{Name: "API CPU per burst request (refusals included)", Value: br.apiPerRequest, Unit: "µs"},
			{Name: "Redis + MariaDB CPU per order", Value: svcPerOrder, Unit: "ms"},
			{Name: "CPU per order, every process", Value: allPerOrder, Unit: "ms"},
			{Name: "drain ceiling of this host's cores", Value: ratio(float64(runtime.NumCPU())*1000, allPerOrder), Unit: "orders/s"},
		}, br.histories.figures()...),
		Notes: append(append(notes, br.histories.note(), "Temporal calls per order over the burst and drain, by operation (the SDK's temporal_request_total and temporal_long_request_total): the worker's "+orNone(br.workerCallOps)+"; the API's "+orNone(br.apiCallOps),
			"the drain clock starts at the burst's first request, so it includes the burst itself; the hello baseline runs right after, on an idle API, with 64 starters",
			settleNote,
			"CPU: user + system time (/proc) of "+m.serverName+" over the burst and drain, per order, and over the hello run, per hello workflow; of the API and worker together, and of Redis and MariaDB together, over the burst and drain, per order (it includes the burst's refusals); the drain ceiling is the host's cores over every process's CPU per order: the rate at which the cores would be fully busy"), m.notes...),
	}
}

// drainTarget is the drain's target: a 10,000-unit sale drained within a
// minute, the pace at which buyers still wait for their order.
func drainTarget(stock int64) string {
	if stock < 10_000 {
		return ""
	}
	return "≤ 60 at 10,000 units"
}

// checkBurst checks the burst sale in MySQL (no oversell, no user twice)
// and, once drained, with the API's reconciliation.
func (r *runner) checkBurst(ctx context.Context, api *Proc, saleID int64, drained bool) error {
	qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var total, users, orders int64
	if err := r.st.DB.QueryRowContext(qctx, "SELECT COUNT(*), COUNT(DISTINCT user_id) FROM reservations WHERE sale_id = ?", saleID).Scan(&total, &users); err != nil {
		return fmt.Errorf("count burst reservations: %w", err)
	}
	if err := r.st.DB.QueryRowContext(qctx, "SELECT COUNT(*) FROM orders WHERE sale_id = ?", saleID).Scan(&orders); err != nil {
		return fmt.Errorf("count burst orders: %w", err)
	}
	if total > r.o.BurstStock || orders > r.o.BurstStock {
		r.violation("scenario 3: oversell: %d reservations, %d orders for %d units", total, orders, r.o.BurstStock)
	}
	if users != total {
		r.violation("scenario 3: %d reservations but only %d distinct users", total, users)
	}
	if !drained {
		r.o.Logger.Warn("burst sale not drained: not reconciled", "sale_id", saleID)
		return nil
	}
	c, err := r.admin(api)
	if err != nil {
		return err
	}
	rctx, cancel2 := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel2()
	rep, err := c.Reconcile(rctx, saleID, false)
	if err != nil {
		return fmt.Errorf("reconcile burst sale: %w", err)
	}
	if !rep.Consistent {
		kinds := map[string]int{}
		for _, d := range rep.Discrepancies {
			kinds[string(d.Kind)]++
		}
		r.violation("scenario 3: reconciliation inconsistent: redis_stock %d, db_stock %d, in_flight %d, orders %v, discrepancies by kind %v", rep.RedisStock, rep.DBStock, rep.InFlight, rep.Orders, kinds)
	}
	return nil
}
