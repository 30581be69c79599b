package testenv

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Commands records the commands a Redis client sends (each of a
// pipeline's too), as Statements records a store's statements: each as its
// arguments joined by spaces, the command's name in lower case.
type Commands struct {
	mu   sync.Mutex
	sent []string
}

// MustRecordedRedis is a Redis client of its own whose commands the
// answer records.
func MustRecordedRedis(tb testing.TB) (redis.UniversalClient, *Commands) {
	tb.Helper()
	rdb := MustRedis(tb)
	rec := &Commands{}
	rdb.AddHook(rec)
	return rdb, rec
}

func (r *Commands) add(cmds ...redis.Cmder) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cmds {
		args := make([]string, len(c.Args()))
		for i, a := range c.Args() {
			args[i] = fmt.Sprint(a)
		}
		args[0] = strings.ToLower(args[0])
		r.sent = append(r.sent, strings.Join(args, " "))
	}
}

func (r *Commands) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return next(ctx, network, addr)
	}
}

func (r *Commands) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.add(cmd)
		return next(ctx, cmd)
	}
}

func (r *Commands) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.add(cmds...)
		return next(ctx, cmds)
	}
}

// Take is every command recorded since the last Take.
func (r *Commands) Take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.sent
	r.sent = nil
	return n
}
