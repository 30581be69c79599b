package redisgateway

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/redis/go-redis/v9"
)

//go:embed sync.lua
var syncSrc string

// syncSource is sync.lua behind its step script and status.lua, each as
// the function sync.lua calls.
func syncSource(stepSrc string) string {
	return "local function step(KEYS, ARGV)\n" + stepSrc + "\nend\n" +
		"local function status(KEYS, ARGV)\n" + statusSrc + "\nend\n" + syncSrc
}

// The sync scripts: advance.lua and release.lua, each followed by
// status.lua in the same call.
var (
	syncAdvanceSrc = syncSource(advanceSrc)
	syncReleaseSrc = syncSource(releaseSrc)

	syncAdvanceScript = redis.NewScript(syncAdvanceSrc)
	syncReleaseScript = redis.NewScript(syncReleaseSrc)
)

// runSync runs a sync script: the status record's keys and arguments
// first, then the step's.
func runSync(ctx context.Context, rdb redis.Scripter, sc *redis.Script, saleID int64, token string, rec StatusRecord, keys []string, args []any) (bool, error) {
	sk, sa := statusCall(saleID, token, rec)
	n, err := sc.Run(ctx, rdb, append(sk, keys...), append(sa, args...)...).Int64()
	if err != nil {
		return false, err
	}
	return n == 1, nil
}

// AdvanceWithStatus is Advance, then WriteStatus of rec, in one script
// call; it reports whether the token's state moved.
func (c *Client) AdvanceWithStatus(ctx context.Context, saleID int64, token string, rec StatusRecord, to string, from ...string) (bool, error) {
	defer c.NoteChange(saleID)
	keys, args := advanceCall(saleID, token, to, from)
	moved, err := runSync(ctx, c.rdb, syncAdvanceScript, saleID, token, rec, keys, args)
	if err != nil {
		return false, fmt.Errorf("advance script with status: %w", err)
	}
	return moved, nil
}

// ReleaseWithStatus is Release, then WriteStatus of rec, in one script
// call; it reports whether the hold was released now.
func (c *Client) ReleaseWithStatus(ctx context.Context, saleID, userID int64, token string, restore, keepBuyer bool, rec StatusRecord) (bool, error) {
	defer c.NoteChange(saleID)
	keys, args := releaseCall(saleID, userID, token, restore, keepBuyer)
	released, err := runSync(ctx, c.rdb, syncReleaseScript, saleID, token, rec, keys, args)
	if err != nil {
		return false, fmt.Errorf("release script with status: %w", err)
	}
	return released, nil
}
