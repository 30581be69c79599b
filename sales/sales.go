// Package sales holds the operations on a sale that touch Redis and the
// database together — warm-up, tear-down — so that the admin API and the
// sale workflow do them the same way.
package sales

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/store"
)

// Warmup loads a sale's stock, buyers, metadata and inbox consumer group
// into Redis in one script. Before the first reservation it may be repeated;
// afterwards it answers lua.WarmupAlreadyLive and changes nothing while
// Redis holds the sale. A warmed sale whose keys Redis lost is rebuilt by
// RebuildLost instead (every recorded reservation counted, none resold).
func Warmup(ctx context.Context, st *store.Store, rdb redis.UniversalClient, scripts *lua.Scripts, saleID int64) (outcome string, redisStock int64, err error) {
	sale, err := st.GetSale(ctx, saleID)
	if err != nil {
		return "", 0, fmt.Errorf("warm up sale %d: %w", saleID, err)
	}
	if sale.Warmed {
		lost, err := KeysLost(ctx, rdb, saleID)
		if err != nil {
			return "", 0, fmt.Errorf("warm up sale %d: %w", saleID, err)
		}
		if lost {
			if _, err := RebuildLost(ctx, st, rdb, scripts, saleID); err != nil {
				return "", 0, fmt.Errorf("warm up sale %d: %w", saleID, err)
			}
			stock, err := rdb.Get(ctx, lua.SaleKeys(saleID).Stock).Int64()
			if err != nil {
				return "", 0, fmt.Errorf("warm up sale %d: read rebuilt stock: %w", saleID, err)
			}
			return lua.WarmupOK, stock, nil
		}
	}
	dbStock, err := st.DBStock(ctx, saleID)
	if err != nil {
		return "", 0, fmt.Errorf("warm up sale %d: %w", saleID, err)
	}
	buyers, err := st.LiveBuyers(ctx, saleID)
	if err != nil {
		return "", 0, fmt.Errorf("warm up sale %d: %w", saleID, err)
	}
	outcome, redisStock, err = scripts.Warmup(ctx, rdb, lua.WarmupArgs{
		SaleID:   saleID,
		StartsMS: sale.StartsAt.UnixMilli(),
		EndsMS:   sale.EndsAt.UnixMilli(),
		Control:  string(sale.Control),
		Epoch:    sale.ModeEpoch,
		Mode:     string(sale.Mode),
		Stock:    dbStock,
		Buyers:   buyers,
	})
	if err != nil {
		return "", 0, fmt.Errorf("warm up sale %d: %w", saleID, err)
	}
	if outcome == lua.WarmupOK {
		if err := st.MarkWarmed(ctx, saleID); err != nil {
			return "", 0, fmt.Errorf("warm up sale %d: %w", saleID, err)
		}
	}
	return outcome, redisStock, nil
}

// KeysLost reports whether Redis lacks a sale's metadata or stock, the two
// keys the reserve script needs: for a warmed sale that is a Redis fault
// (a key deleted, a restart without its AOF, a failover to an empty
// replica), not "not warmed yet".
func KeysLost(ctx context.Context, rdb redis.UniversalClient, saleID int64) (bool, error) {
	k := lua.SaleKeys(saleID)
	// One key per call: EXISTS of several keys is one slot here, but the
	// per-key form also works across a cluster reshard.
	for _, key := range []string{k.Meta, k.Stock} {
		n, err := rdb.Exists(ctx, key).Result()
		if err != nil {
			return false, fmt.Errorf("check keys of sale %d: %w", saleID, err)
		}
		if n == 0 {
			return true, nil
		}
	}
	return false, nil
}

// RebuildLost rebuilds a warmed sale whose keys Redis lost, by the resync's
// procedure: the sale moves to database mode (new epoch, so no instance
// reserves on Redis's stale or empty copy), then is rebuilt from the
// database plus what survives in Redis (held tokens, inbox entries the
// database does not know yet) and returns to Redis mode. Every recorded
// reservation keeps its unit and its buyer mark, so earlier buyers cannot
// buy twice; holds Redis lost before they were recorded end FAILED when
// their workflow finds no unit, never sold twice. It reports false when
// another instance is resynchronising the sale.
func RebuildLost(ctx context.Context, st *store.Store, rdb redis.UniversalClient, scripts *lua.Scripts, saleID int64) (bool, error) {
	// No hold-off: with its keys gone the reserve script takes nothing for
	// this sale, and the resync begins at once, so the database path never
	// sells in between.
	if _, err := st.SwitchToDatabase(ctx, saleID, 0); err != nil {
		return false, fmt.Errorf("rebuild lost sale %d: %w", saleID, err)
	}
	done, err := Resync(ctx, st, rdb, scripts, saleID)
	if err != nil {
		return false, fmt.Errorf("rebuild lost sale %d: %w", saleID, err)
	}
	return done, nil
}

// Teardown removes a finished sale's Redis keys and streams and records it;
// the reports and every row stay in the database.
func Teardown(ctx context.Context, st *store.Store, rdb redis.UniversalClient, saleID int64) error {
	// One key at a time: DEL of several keys is fine in one slot, but the
	// per-key form also works across a cluster reshard.
	for _, k := range lua.SaleKeys(saleID).All() {
		if err := rdb.Del(ctx, k).Err(); err != nil {
			return fmt.Errorf("tear down sale %d: delete %s: %w", saleID, k, err)
		}
	}
	if err := st.MarkFinished(ctx, saleID); err != nil {
		return fmt.Errorf("tear down sale %d: %w", saleID, err)
	}
	return nil
}

// Resync brings a sale in database mode back to Redis: it stops both paths
// (resync mode, new epoch — the database's conditional mode update is the
// lock, so one instance wins), rebuilds the sale in Redis from the database
// in one script, and returns the sale to Redis mode. On failure it rolls
// back to database mode. It reports false when the sale was not in
// database mode.
//
// The invariant this keeps: units sold by both paths together never exceed
// the stock. Redis is rebuilt as stock net of holds from the database, which
// no path can change during the rebuild; a hold Redis promised that the
// database cannot honour ends FAILED, never as a unit sold twice.
func Resync(ctx context.Context, st *store.Store, rdb redis.UniversalClient, scripts *lua.Scripts, saleID int64) (bool, error) {
	epoch, err := st.BeginResync(ctx, saleID)
	if errors.Is(err, store.ErrNotDatabaseMode) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("resync sale %d: %w", saleID, err)
	}
	if err := rebuild(ctx, st, rdb, scripts, saleID, epoch); err != nil {
		if _, aerr := st.AbortResync(context.WithoutCancel(ctx), saleID, epoch, 0); aerr != nil {
			return false, fmt.Errorf("resync sale %d: %w (and rolling back: %v)", saleID, err, aerr)
		}
		return false, fmt.Errorf("resync sale %d: %w", saleID, err)
	}
	return true, nil
}

// rebuildAttempts bounds how often a rebuild starts over because releases
// ran in Redis meanwhile; after that the resync rolls back and the next
// round tries again.
const rebuildAttempts = 5

// afterSnapshot, when set (tests), runs between the database snapshot and
// the rebuild script: where a release racing the resync lands.
var afterSnapshot func()

func rebuild(ctx context.Context, st *store.Store, rdb redis.UniversalClient, scripts *lua.Scripts, saleID, epoch int64) error {
	sale, err := st.GetSale(ctx, saleID)
	if err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		// The fence first, then the snapshot: a release whose database
		// write the snapshot missed runs its Redis step after this read,
		// so either the script sees the fence moved or the step runs on
		// the rebuilt token.
		fence, err := scripts.ReadFence(ctx, rdb, saleID)
		if err != nil {
			return err
		}
		state, err := st.ReadRedisState(ctx, saleID)
		if err != nil {
			return err
		}
		if afterSnapshot != nil {
			afterSnapshot()
		}
		buyers := make([]string, len(state.Buyers))
		for i, b := range state.Buyers {
			buyers[i] = strconv.FormatInt(b, 10)
		}
		_, err = scripts.Rebuild(ctx, rdb, saleID, lua.RebuildData{
			Stock: state.Stock, Epoch: epoch, Fence: fence,
			StartsMS: sale.StartsAt.UnixMilli(), EndsMS: sale.EndsAt.UnixMilli(), Control: string(sale.Control),
			Buyers: buyers, Tokens: state.Tokens, Requests: state.Requests, Added: state.AddedRefs,
		})
		if errors.Is(err, lua.ErrFenceMoved) && attempt < rebuildAttempts {
			continue
		}
		if err != nil {
			return err
		}
		return st.FinishResync(ctx, saleID, epoch)
	}
}
