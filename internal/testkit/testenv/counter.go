package testenv

import (
	"context"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// RedisCounter counts what a Redis client sends or tries to send: its
// commands (each of a pipeline's) and its round trips (a command or a
// pipeline). Add it with AddHook; unlike Commands it keeps no text, so a
// benchmark's allocations stay its own.
type RedisCounter struct{ commands, trips atomic.Int64 }

// Commands is the commands counted since the last Reset.
func (c *RedisCounter) Commands() int64 { return c.commands.Load() }

// RoundTrips is the round trips counted since the last Reset.
func (c *RedisCounter) RoundTrips() int64 { return c.trips.Load() }

// Reset starts both counts again from zero.
func (c *RedisCounter) Reset() {
	c.commands.Store(0)
	c.trips.Store(0)
}

func (c *RedisCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *RedisCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.commands.Add(1)
		c.trips.Add(1)
		return next(ctx, cmd)
	}
}

func (c *RedisCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.commands.Add(int64(len(cmds)))
		c.trips.Add(1)
		return next(ctx, cmds)
	}
}
