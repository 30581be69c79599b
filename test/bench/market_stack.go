package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/testkit/netproxy"
	"github.com/seckill/seckill/internal/testkit/proc"
	"github.com/seckill/seckill/internal/testkit/redisnode"
)

// marketRedis is scenario 13's own redis-server: the scenario freezes it,
// so it serves nothing but the scenario, and its INFO counts only the
// scenario's sales and processes. The scenario's worker rebuilds into it
// every live sale of the bench database it does not find there (the run's
// earlier scenarios' sales, stopped only at its end), so another bench
// run on the same database meanwhile disturbs both.
type marketRedis struct {
	*proc.Proc
	addr string
	rdb  redis.UniversalClient
	dir  string
}

// startMarketRedis starts a redis-server named name with the product's
// settings (redisnode.Args) on a free port, its data under the log
// directory.
func (r *runner) startMarketRedis(ctx context.Context, name string) (*marketRedis, error) {
	addr, err := proc.FreeAddr()
	if err != nil {
		return nil, err
	}
	_, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("%s: address %q: %w", name, addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("%s: port %q: %w", name, portStr, err)
	}
	dir := filepath.Join(r.o.LogDir, name+"-"+r.stamp)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%s: dir: %w", name, err)
	}
	m := &marketRedis{addr: addr, dir: dir,
		rdb: redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{addr}, PoolSize: 256, ReadTimeout: 10 * time.Second})}
	m.Proc = &proc.Proc{Name: name, Bin: "redis-server", LogPath: filepath.Join(r.o.LogDir, name+".log"),
		Args:  redisnode.Args(redisnode.Options{Port: port, Dir: dir}),
		Ready: func(ctx context.Context) error { return m.rdb.Ping(ctx).Err() }}
	if err := m.Start(ctx, 60*time.Second); err != nil {
		m.stop(r)
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return m, nil
}

// stop ends the server and deletes its data (its log stays).
func (m *marketRedis) stop(r *runner) {
	m.Stop(20 * time.Second)
	if err := m.rdb.Close(); err != nil {
		r.o.Logger.Warn("scenario 13: close the Redis client", "err", err)
	}
	if err := os.RemoveAll(m.dir); err != nil {
		r.o.Logger.Warn("scenario 13: delete the Redis data", "dir", m.dir, "err", err)
	}
}

// useRedis points the runner (its client and the processes it starts) at
// m until the returned function restores the run's Redis.
func (r *runner) useRedis(m *marketRedis) func() {
	addr, rdb := r.o.RedisAddr, r.rdb
	r.o.RedisAddr, r.rdb = m.addr, m.rdb
	return func() { r.o.RedisAddr, r.rdb = addr, rdb }
}

// marketStack are scenario 13's processes: an API and a worker; the
// paths' API, whose task queue nobody polls; and an API that reaches
// Redis through a proxy the scenario cuts.
type marketStack struct {
	api, worker, paths, cut *Proc
	proxy                   *netproxy.Proxy
	pathsPprof              string // the paths' API's profiler, when Options.ProfileDir asks for one
}

// procs are the stack's instances, metered in the idle windows.
func (s *marketStack) procs() []*Proc { return []*Proc{s.api, s.worker, s.paths, s.cut} }

// stop stops every process of the stack that started, then the proxy.
func (s *marketStack) stop(r *runner) {
	for _, p := range s.procs() {
		if p != nil {
			p.Stop()
		}
	}
	if s.proxy != nil {
		if err := s.proxy.Close(); err != nil {
			r.o.Logger.Warn("scenario 13: close the cut instance's proxy", "err", err)
		}
	}
}

// startPathsAPI starts an API for the paths' runs on the task queue
// queue, which no worker polls, with its profiler when Options.ProfileDir
// asks for profiles (pprofURL, else "").
func (r *runner) startPathsAPI(ctx context.Context, name, queue string) (api *Proc, pprofURL string, err error) {
	env := r.env(queue)
	if r.o.ProfileDir != "" {
		addr, err := proc.FreeAddr()
		if err != nil {
			return nil, "", err
		}
		pprofURL, env["SECKILL_PPROF_ADDR"] = "http://"+addr, addr
	}
	api, err = r.startAPIEnv(ctx, name, env)
	return api, pprofURL, err
}

// startMarketStack starts the stack on the runner's Redis; on an error,
// what started is stopped.
func (r *runner) startMarketStack(ctx context.Context) (*marketStack, error) {
	s := &marketStack{}
	var err error
	if s.api, s.worker, err = r.startStackEnv(ctx, "api-market", "worker-market", r.env("bench-market-"+r.stamp)); err != nil {
		s.stop(r)
		return nil, err
	}
	unpolled := "bench-unpolled-market-" + r.stamp
	if s.paths, s.pathsPprof, err = r.startPathsAPI(ctx, "api-market-paths", unpolled); err != nil {
		s.stop(r)
		return nil, err
	}
	if s.proxy, err = netproxy.Start(r.o.RedisAddr, 0); err != nil {
		s.stop(r)
		return nil, err
	}
	env := r.env(unpolled)
	env["REDIS_ADDR"] = s.proxy.Addr()
	if s.cut, err = r.startAPIEnv(ctx, "api-market-cut", env); err != nil {
		s.stop(r)
		return nil, err
	}
	return s, nil
}
