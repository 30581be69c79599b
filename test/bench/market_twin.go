package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/store"
)

// twinSaleBase is where the ids of the twin's sales begin: below the bench
// database's, above the dev database's. The twin's sale workflows share
// the bench's Temporal namespace, so each run's ids start at a place of
// their own (twinSaleFloor): a workflow id of an earlier run's sale is
// never reused.
const twinSaleBase = 7_000_000_000_000

// twinSaleFloor is the first sale id of a twin made at now: the second
// (modulo 10⁷, about 115 days) times 10⁵ sales above twinSaleBase.
func twinSaleFloor(now time.Time) int64 {
	return twinSaleBase + now.Unix()%10_000_000*100_000
}

// marketTwin is scenario 13's few-live side: the same processes as the
// market's (an API and a worker, and a paths API whose task queue nobody
// polls) on a Redis and a database of their own on the same servers as
// the market's, with only the paths' two sales. Its rounds of the paths
// take turns with the market's, so the host's drift meets both sides
// alike.
type marketTwin struct {
	red                *marketRedis
	st                 *store.Store
	dsn                string
	api, worker, paths *Proc
	pathsPprof         string // the paths' API's profiler, when Options.ProfileDir asks for one
	run                func(label string) marketPaths
	live               int // its sales
}

// startMarketTwin starts the twin and makes its paths' sales; on an
// error, what started is stopped.
func (r *runner) startMarketTwin(ctx context.Context) (*marketTwin, error) {
	t := &marketTwin{}
	var err error
	if t.red, err = r.startMarketRedis(ctx, "redis-market-twin"); err != nil {
		return nil, err
	}
	if t.dsn, t.st, err = r.twinDatabase(ctx); err != nil {
		t.stop(ctx, r)
		return nil, err
	}
	restore := r.useStores(t.red.addr, t.red.rdb, t.dsn, t.st)
	defer restore()
	if err := r.startTwinProcs(ctx, t); err != nil {
		t.stop(ctx, r)
		return nil, err
	}
	made := len(r.saleIDs)
	run, _, err := r.marketPathsRunner(ctx, t.paths, t.pathsPprof)
	// The run's teardown reads the bench database: the twin's sales go
	// with the twin's database, their workflows with the run's.
	r.twinSaleIDs = append(r.twinSaleIDs, r.saleIDs[made:]...)
	t.live, r.saleIDs = len(r.saleIDs)-made, r.saleIDs[:made]
	if err != nil {
		t.stop(ctx, r)
		return nil, fmt.Errorf("scenario 13's twin: %w", err)
	}
	t.run = run
	return t, nil
}

// twinDatabase makes the twin's database afresh beside the bench's (its
// name + "_twin"), migrated, its sale ids from twinSaleFloor.
func (r *runner) twinDatabase(ctx context.Context) (string, *store.Store, error) {
	c, err := mysql.ParseDSN(r.o.MySQLDSN)
	if err != nil {
		return "", nil, fmt.Errorf("parse dsn: %w", err)
	}
	name := c.DBName + "_twin"
	if err := onServer(ctx, c, "DROP DATABASE IF EXISTS `"+name+"`", "CREATE DATABASE `"+name+"`"); err != nil {
		return "", nil, fmt.Errorf("twin database: %w", err)
	}
	c.DBName = name
	dsn := c.FormatDSN()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	st, err := openBenchStore(ctx, dsn, twinSaleFloor(time.Now()))
	if err != nil {
		return "", nil, fmt.Errorf("the twin's store: %w", err)
	}
	return dsn, st, nil
}

// startTwinProcs starts the twin's API and worker and its paths' API.
func (r *runner) startTwinProcs(ctx context.Context, t *marketTwin) error {
	var err error
	if t.api, t.worker, err = r.startStackEnv(ctx, "api-market-twin", "worker-market-twin", r.env("bench-market-twin-"+r.stamp)); err != nil {
		return err
	}
	t.paths, t.pathsPprof, err = r.startPathsAPI(ctx, "api-market-twin-paths", "bench-unpolled-market-twin-"+r.stamp)
	return err
}

// useStores points the runner (its clients and the processes it starts)
// at a Redis and a database until the returned function restores the
// run's own.
func (r *runner) useStores(redisAddr string, rdb redis.UniversalClient, dsn string, st *store.Store) func() {
	addr, client, dsn0, st0 := r.o.RedisAddr, r.rdb, r.o.MySQLDSN, r.st
	r.o.RedisAddr, r.rdb, r.o.MySQLDSN, r.st = redisAddr, rdb, dsn, st
	return func() { r.o.RedisAddr, r.rdb, r.o.MySQLDSN, r.st = addr, client, dsn0, st0 }
}

// stop stops the twin's processes, drops its database and stops its
// Redis (its data deleted); the run's cleanup terminates its sales'
// workflows.
func (t *marketTwin) stop(ctx context.Context, r *runner) {
	for _, p := range []*Proc{t.paths, t.worker, t.api} {
		if p != nil {
			p.Stop()
		}
	}
	if t.st != nil {
		if err := t.st.Close(); err != nil {
			r.o.Logger.Warn("scenario 13: close the twin's store", "err", err)
		}
		c, err := mysql.ParseDSN(t.dsn)
		if err == nil {
			err = onServer(ctx, c, "DROP DATABASE IF EXISTS `"+c.DBName+"`")
		}
		if err != nil {
			r.o.Logger.Warn("scenario 13: drop the twin's database", "err", err)
		}
	}
	if t.red != nil {
		t.red.stop(r)
	}
}
