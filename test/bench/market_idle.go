package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/sales"
)

// marketIdleCost is what scenario 13's idle window measured.
type marketIdleCost struct {
	instances         int
	window            time.Duration
	commands          int64            // Redis calls, the bench's own INFO taken out
	byCommand         map[string]int64 // the same, by command
	apiCPU, workerCPU float64          // seconds over the window (the APIs together)
	temporalCPU       float64          // seconds; -1 when the server was not found here
	temporalWhat      string
	serverWork        string // what the dev server did over the window, by its own counters
	mem               int64  // Redis used_memory at the window's end
	profile           string // the worker's CPU profile over the window, when taken
}

// measureIdle meters the fleet over marketIdle with nobody buying: procs
// are the instances (the worker by its name), the Temporal server is the
// one the bench talks to when it runs on this host.
func (r *runner) measureIdle(ctx context.Context, procs []*Proc) (marketIdleCost, error) {
	ic := marketIdleCost{instances: len(procs), window: marketIdle, temporalCPU: -1}
	var meters []func() (float64, error)
	for _, p := range procs {
		meters = append(meters, p.CPU)
	}
	tm, what, err := temporalServerCPU(r.o.TemporalAddress)
	if err != nil {
		r.o.Logger.Warn("scenario 13: Temporal server CPU not metered", "err", err)
	} else {
		meters, ic.temporalWhat = append(meters, tm.read), what
	}
	work := r.serverWorkOver(ctx)
	cs0, err := commandStats(ctx, r.rdb)
	if err != nil {
		return ic, err
	}
	cpu0, err := readAll(meters)
	if err != nil {
		return ic, err
	}
	start := time.Now()
	sleepCtx(ctx, marketIdle)
	cpu1, err := readAll(meters)
	if err != nil {
		return ic, err
	}
	cs1, err := commandStats(ctx, r.rdb)
	if err != nil {
		return ic, err
	}
	ic.window = time.Since(start)
	ic.serverWork = work()
	ic.byCommand = map[string]int64{}
	for name, n := range cs1 {
		if d := n - cs0[name]; d > 0 {
			ic.byCommand[name] = d
			ic.commands += d
		}
	}
	// The bench's own two INFO calls.
	ic.byCommand["info"] -= 2
	ic.commands -= 2
	for i, p := range procs {
		if strings.HasPrefix(p.Name, "worker") {
			ic.workerCPU += cpu1[i] - cpu0[i]
		} else {
			ic.apiCPU += cpu1[i] - cpu0[i]
		}
	}
	if len(meters) > len(procs) {
		ic.temporalCPU = cpu1[len(procs)] - cpu0[len(procs)]
	}
	ic.mem, err = redisUsedMemory(ctx, r.rdb)
	return ic, err
}

func readAll(meters []func() (float64, error)) ([]float64, error) {
	out := make([]float64, len(meters))
	for i, m := range meters {
		v, err := m()
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// commandStats is INFO commandstats: calls by command name.
func commandStats(ctx context.Context, rdb redis.UniversalClient) (map[string]int64, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := rdb.Info(cctx, "commandstats").Result()
	if err != nil {
		return nil, fmt.Errorf("redis INFO commandstats: %w", err)
	}
	return parseCommandStats(s)
}

// parseCommandStats reads INFO commandstats' calls by command name
// (a subcommand as "xinfo|groups").
func parseCommandStats(s string) (map[string]int64, error) {
	out := map[string]int64{}
	for _, line := range strings.Split(s, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, isCmd := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isCmd {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		n, err := strconv.ParseInt(calls, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("redis INFO commandstats: %q: %w", line, err)
		}
		out[name] = n
	}
	return out, nil
}

// redisUsedMemory is INFO memory's used_memory, in bytes.
func redisUsedMemory(ctx context.Context, rdb redis.UniversalClient) (int64, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := rdb.Info(cctx, "memory").Result()
	if err != nil {
		return 0, fmt.Errorf("redis INFO memory: %w", err)
	}
	for _, line := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("redis INFO memory: used_memory %q: %w", v, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("redis INFO memory: no used_memory")
}

// topCommands names the n commands called most, with their calls per
// second over the window.
func (ic marketIdleCost) topCommands(n int) string {
	names := make([]string, 0, len(ic.byCommand))
	for name := range ic.byCommand {
		names = append(names, name)
	}
	slices.SortFunc(names, func(a, b string) int { return cmp.Compare(ic.byCommand[b], ic.byCommand[a]) })
	var parts []string
	for _, name := range names[:min(n, len(names))] {
		parts = append(parts, fmt.Sprintf("%s %s/s", strings.ToUpper(name), num(float64(ic.byCommand[name])/ic.window.Seconds())))
	}
	return strings.Join(parts, ", ")
}

// teardownSale stops one market sale through the admin API, then deletes
// its keys and marks it finished.
func (r *runner) teardownSale(ctx context.Context, c *client.Client, id int64) error {
	if err := r.checkOwn(ctx, id); err != nil {
		return err
	}
	if _, err := c.Stop(ctx, id); err != nil {
		return fmt.Errorf("stop sale %d: %w", id, err)
	}
	if _, err := r.st.SetSaleControl(ctx, id, domain.ControlStopped); err != nil {
		return fmt.Errorf("stop sale %d: %w", id, err)
	}
	return sales.Teardown(ctx, r.st, redisgateway.NewClient(r.rdb), id)
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// marketKeySample is how many sales' keys scenario 13 weighs with MEMORY
// USAGE.
const marketKeySample = 100

// saleKeyBytes is the mean MEMORY USAGE of a sale's keys, over the first
// marketKeySample of ids.
func (r *runner) saleKeyBytes(ctx context.Context, ids []int64) (float64, error) {
	ids = ids[:min(len(ids), marketKeySample)]
	if len(ids) == 0 {
		return 0, nil
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var total int64
	for _, id := range ids {
		for _, k := range redisgateway.SaleKeys(id).All() {
			n, err := r.rdb.MemoryUsage(cctx, k).Result()
			if errors.Is(err, redis.Nil) {
				continue
			}
			if err != nil {
				return 0, fmt.Errorf("redis MEMORY USAGE %s: %w", k, err)
			}
			total += n
		}
	}
	return float64(total) / float64(len(ids)), nil
}
