package redisgateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/promreg"
)

// LatencyBuckets are the bounds (seconds) of seckill's latency histograms:
// fine below 10 ms where a healthy hot path lives, and a bound at 250 ms,
// the reservation path's alert threshold.
var LatencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// ScriptLatencyHook returns a go-redis hook that times every call of
// seckill's scripts (EVALSHA, and EVAL after a NOSCRIPT) by script name and
// result, on seckill_redis_script_duration_seconds registered on reg. Other
// commands pass through untimed. Every script's series exists from the
// start, so a dashboard shows the idle scripts too.
func (s *Scripts) ScriptLatencyHook(reg prometheus.Registerer) (redis.Hook, error) {
	hist := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "seckill_redis_script_duration_seconds",
		Help:    "Round trip of seckill's Redis scripts (redisgateway/), by script and result (ok, or error: a Redis or network failure, not a script's refusal).",
		Buckets: LatencyBuckets,
	}, []string{"script", "result"})
	hist, err := promreg.Register(reg, hist)
	if err != nil {
		return nil, fmt.Errorf("script latency: %w", err)
	}
	h := &scriptHook{byKey: map[string]scriptObservers{}}
	for name, sc := range map[string]*redis.Script{
		"reserve": s.reserve, "release": s.release, "advance": s.advance, "warmup": s.warmup,
		"adjust": s.adjust, "snapshot": s.snapshot, "repair_stock": s.repairStock, "rebuild": s.rebuild,
		"restore": s.restore, "retire": retireScript,
		"sync_advance": syncAdvanceScript, "sync_release": syncReleaseScript,
	} {
		obs := scriptObservers{ok: hist.WithLabelValues(name, "ok"), failed: hist.WithLabelValues(name, "error")}
		h.byKey[sc.Hash()] = obs
		h.byKey[scriptSources[name]] = obs
	}
	return h, nil
}

// scriptSources are the scripts' texts by name: EVAL carries the text.
var scriptSources = map[string]string{
	"reserve": reserveSrc, "release": releaseSrc, "advance": advanceSrc, "warmup": warmupSrc,
	"adjust": adjustSrc, "snapshot": snapshotSrc, "repair_stock": repairStockSrc, "rebuild": rebuildSrc,
	"restore": restoreSrc, "retire": retireSrc,
	"sync_advance": syncAdvanceSrc, "sync_release": syncReleaseSrc,
}

type scriptObservers struct{ ok, failed prometheus.Observer }

// scriptHook maps a script's SHA1 (EVALSHA) or text (EVAL) to its series;
// the map is read-only after construction.
type scriptHook struct{ byKey map[string]scriptObservers }

func (h *scriptHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return next(ctx, network, addr)
	}
}

func (h *scriptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		obs, ok := h.observers(cmd)
		if !ok {
			return next(ctx, cmd)
		}
		start := time.Now()
		err := next(ctx, cmd)
		if err != nil && !errors.Is(err, redis.Nil) {
			obs.failed.Observe(time.Since(start).Seconds())
		} else {
			obs.ok.Observe(time.Since(start).Seconds())
		}
		return err
	}
}

func (h *scriptHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *scriptHook) observers(cmd redis.Cmder) (scriptObservers, bool) {
	switch cmd.Name() {
	case "evalsha", "eval", "evalsha_ro", "eval_ro":
	default:
		return scriptObservers{}, false
	}
	args := cmd.Args()
	if len(args) < 2 {
		return scriptObservers{}, false
	}
	key, ok := args[1].(string)
	if !ok {
		return scriptObservers{}, false
	}
	obs, ok := h.byKey[key]
	return obs, ok
}
