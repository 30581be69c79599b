package degraded

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/promreg"
)

// FleetStore is where the processes publish their views of Redis and read
// the fleet's (store.Store).
type FleetStore interface {
	PublishRedisView(ctx context.Context, name, role string, up bool) error
	RedisFleetView(ctx context.Context, fresh time.Duration) (domain.RedisFleetView, error)
	SweepRedisObservers(ctx context.Context, olderThan time.Duration) error
}

// FleetDown is the majority rule: most of the processes seen lately find
// Redis down. It is the evidence a sale needs to move to the database
// path, and its absence what a sale needs to come back; one process cut
// from a Redis the rest reach is not enough.
func FleetDown(v domain.RedisFleetView) bool { return v.Down > 0 && 2*v.Down > v.Up+v.Down }

// Timing of the views. A process's row counts while it was refreshed
// within FleetFresh, so a frozen or dead process drops out of the vote; a
// process that finds Redis down re-reads the fleet's view every
// FleetCheck, so a cut instance fails readiness within DownAfter +
// FleetCheck + a query.
const (
	FleetPublish = time.Second
	FleetCheck   = 250 * time.Millisecond
	FleetFresh   = 3 * time.Second
	DownAfter    = time.Second // no answer from Redis for this long: down
	sweepAge     = time.Hour
	callLimit    = time.Second // each MySQL call
)

var named atomic.Int64

// ObserverName is an observer's row name: the role and the instance, numbered
// after the first in one process (tests run several servers in one).
func ObserverName(role, instance string) string {
	if n := named.Add(1); n > 1 {
		return fmt.Sprintf("%s/%s#%d", role, instance, n)
	}
	return role + "/" + instance
}

// Observer publishes this process's view of Redis and keeps the fleet's.
// A process cut from a Redis the others reach is "cut off": it refuses
// reservations (outcome unknown) and fails readiness so a load balancer
// takes it out, and never moves a sale.
type Observer struct {
	Store FleetStore
	// Name is unique per process (host and pid); Role is "api" or "worker".
	Name, Role string
	// Up reports this process's own view: Redis answered within DownAfter.
	Up     func() bool
	Logger *slog.Logger

	selfUp    atomic.Bool
	fleetDown atomic.Bool
	// unitsOK: at the last look no worker of an older release ran, so
	// holds may take their unit when recorded (HoldsTakeUnits).
	unitsOK atomic.Bool
}

// HoldsTakeUnits reports whether a Redis hold may take its unit when it is
// recorded: every worker seen at the last look (each second) places such
// holds' orders (domain.HoldRecordVersion). False before the first look
// and while a worker of an older release runs, during a rolling deploy.
func (o *Observer) HoldsTakeUnits() bool { return o.unitsOK.Load() }

// NewObserver is an Observer whose views start healthy: a process does
// not refuse or fail readiness before its first look.
func NewObserver(st FleetStore, name, role string, up func() bool, logger *slog.Logger) *Observer {
	o := &Observer{Store: st, Name: name, Role: role, Up: up, Logger: logger}
	o.selfUp.Store(true)
	return o
}

// RedisDown reports whether most of the fleet found Redis down at the last
// look (a look happens every FleetCheck while this process finds it down too).
func (o *Observer) RedisDown() bool { return o.fleetDown.Load() }

// CutOff reports whether this process finds Redis down while the fleet
// does not.
func (o *Observer) CutOff() bool { return !o.selfUp.Load() && !o.fleetDown.Load() }

// Run publishes and reads until stop.
func (o *Observer) Run(stop <-chan struct{}) {
	t := time.NewTicker(FleetCheck)
	defer t.Stop()
	var published, looked time.Time
	last := true
	for n := 0; ; n++ {
		up := o.Up()
		o.selfUp.Store(up)
		if up != last || time.Since(published) >= FleetPublish {
			if o.publish(up) {
				published, last = time.Now(), up
			}
		}
		if !up || o.fleetDown.Load() || time.Since(looked) >= FleetPublish {
			o.look()
			looked = time.Now()
		}
		if n%int(time.Minute/FleetCheck) == 0 {
			o.sweep()
		}
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

func (o *Observer) publish(up bool) bool {
	ctx, cancel := context.WithTimeout(context.Background(), callLimit)
	defer cancel()
	if err := o.Store.PublishRedisView(ctx, o.Name, o.Role, up); err != nil {
		o.Logger.Warn("fleet: publish this process's view of redis", "err", err)
		return false
	}
	return true
}

// Look reads the fleet's view once now (bounded by a MySQL call's limit),
// as Run does every period. A process looks before it serves: until a
// look says no worker of an older release runs, its holds are recorded
// without their unit (HoldsTakeUnits), which their orders must then take.
func (o *Observer) Look() { o.look() }

// look reads the fleet's view; when MySQL does not answer the last view
// stands (the database path needs MySQL anyway).
func (o *Observer) look() {
	v, err := o.View(context.Background())
	if err != nil {
		o.Logger.Warn("fleet: read the fleet's view of redis", "err", err)
		return
	}
	if down := FleetDown(v); down != o.fleetDown.Swap(down) {
		o.Logger.Warn("fleet: the fleet's view of redis changed", "redis_down", down, "up", v.Up, "down", v.Down)
	}
	if ok := v.OldWorkers == 0; ok != o.unitsOK.Swap(ok) {
		o.Logger.Info("fleet: holds take their unit when recorded", "on", ok, "old_workers", v.OldWorkers)
	}
}

// View reads the fleet's view now.
func (o *Observer) View(ctx context.Context) (domain.RedisFleetView, error) {
	ctx, cancel := context.WithTimeout(ctx, callLimit)
	defer cancel()
	return o.Store.RedisFleetView(ctx, FleetFresh)
}

func (o *Observer) sweep() {
	ctx, cancel := context.WithTimeout(context.Background(), callLimit)
	defer cancel()
	if err := o.Store.SweepRedisObservers(ctx, sweepAge); err != nil {
		o.Logger.Warn("fleet: sweep", "err", err)
	}
}

// Pinger is a process's own view of Redis when it has no heartbeat of its
// own (the worker): a ping every FleetCheck.
type Pinger struct {
	Ping     func(context.Context) error
	answered atomic.Int64 // unix ns of the last answer
}

// NewPinger is a Pinger whose start counts as an answer: a process is not
// "down" before its first ping had time to come back.
func NewPinger(ping func(context.Context) error) *Pinger {
	p := &Pinger{Ping: ping}
	p.answered.Store(time.Now().UnixNano())
	return p
}

// Run pings until stop.
func (p *Pinger) Run(stop <-chan struct{}) {
	t := time.NewTicker(FleetCheck)
	defer t.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), DownAfter/2)
		if err := p.Ping(ctx); err == nil {
			p.answered.Store(time.Now().UnixNano())
		}
		cancel()
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// Up reports whether Redis answered within DownAfter.
func (p *Pinger) Up() bool {
	at := p.answered.Load()
	return at != 0 && time.Since(time.Unix(0, at)) < DownAfter
}

// Gauges export the fleet's view of Redis as this instance last saw it:
// seckill_redis_cut_off (1: Redis fails this instance alone; it refuses
// reservations and fails /readyz), seckill_redis_fleet_down (1: most of
// the fleet finds Redis down; sales may move to the database path) and
// seckill_holds_take_units (HoldsTakeUnits).
func (o *Observer) Gauges() []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "seckill_redis_cut_off",
			Help: "1 while Redis fails this instance but not most of the fleet: reservations answer 503 and /readyz fails."},
			func() float64 { return promreg.Bool(o.CutOff()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "seckill_redis_fleet_down",
			Help: "1 while most of the fleet finds Redis down: the evidence a sale needs to move to the database path."},
			func() float64 { return promreg.Bool(o.RedisDown()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "seckill_holds_take_units",
			Help: "1 while Redis holds take their unit when they are recorded; 0 while a worker of an older release runs (a rolling deploy), when holds are recorded without it."},
			func() float64 { return promreg.Bool(o.HoldsTakeUnits()) }),
	}
}
