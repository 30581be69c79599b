// Package sales is the service for the operations on a sale that touch
// Redis and the database together — warm-up, tear-down, pause, resume and
// stop, stock changes and their rollback, the switches between Redis and
// database mode both ways and the rollback of a stalled one, the rebuild
// of lost keys, a token's Redis sync — so that the admin API, the
// reservation path, the worker and the activities do them the same way
// and stay thin.
package sales

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/redisgateway"
	"github.com/seckill/seckill/store"
)

// Warmup loads a sale's stock, buyers, metadata and inbox consumer group
// into Redis in one script. Before the first reservation it may be repeated;
// afterwards it answers redisgateway.WarmupAlreadyLive and changes nothing while
// Redis holds the sale. A warmed sale whose keys Redis lost is rebuilt by
// RebuildLost instead (every recorded reservation counted, none resold).
func Warmup(ctx context.Context, st *store.Store, rdb *redisgateway.Client, tc client.Client, saleID int64) (outcome string, redisStock int64, err error) {
	sale, err := st.GetSale(ctx, saleID)
	if err != nil {
		return "", 0, fmt.Errorf("warm up sale %d: %w", saleID, err)
	}
	if sale.Warmed {
		lost, err := rdb.SaleKeysLost(ctx, saleID)
		if err != nil {
			return "", 0, fmt.Errorf("warm up sale %d: %w", saleID, err)
		}
		if lost {
			if _, err := RebuildLost(ctx, st, rdb, tc, saleID); err != nil {
				return "", 0, fmt.Errorf("warm up sale %d: %w", saleID, err)
			}
			stock, ok, err := rdb.Stock(ctx, saleID)
			if err == nil && !ok {
				err = errors.New("no stock key")
			}
			if err != nil {
				return "", 0, fmt.Errorf("warm up sale %d: read rebuilt stock: %w", saleID, err)
			}
			return redisgateway.WarmupOK, stock, nil
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
	outcome, redisStock, err = rdb.Warmup(ctx, redisgateway.WarmupArgs{
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
	if outcome == redisgateway.WarmupOK {
		if err := followControl(ctx, st, rdb, saleID, sale.Control); err != nil {
			return "", 0, fmt.Errorf("warm up sale %d: %w", saleID, err)
		}
		if err := st.MarkWarmed(ctx, saleID); err != nil {
			return "", 0, fmt.Errorf("warm up sale %d: %w", saleID, err)
		}
	}
	return outcome, redisStock, nil
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
func RebuildLost(ctx context.Context, st *store.Store, rdb *redisgateway.Client, tc client.Client, saleID int64) (bool, error) {
	// No hold-off: with its keys gone the reserve script takes nothing for
	// this sale, and the resync begins at once, so the database path never
	// sells in between.
	if _, err := st.SwitchToDatabase(ctx, saleID, 0); err != nil {
		return false, fmt.Errorf("rebuild lost sale %d: %w", saleID, err)
	}
	done, err := Resync(ctx, st, rdb, tc, saleID)
	if err != nil {
		return false, fmt.Errorf("rebuild lost sale %d: %w", saleID, err)
	}
	return done, nil
}

// Teardown removes a finished sale's Redis keys and streams and records it;
// the reports and every row stay in the database.
func Teardown(ctx context.Context, st *store.Store, rdb *redisgateway.Client, saleID int64) error {
	if err := rdb.DeleteSale(ctx, saleID); err != nil {
		return fmt.Errorf("tear down sale %d: %w", saleID, err)
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
func Resync(ctx context.Context, st *store.Store, rdb *redisgateway.Client, tc client.Client, saleID int64) (bool, error) {
	// The full listing of the sale's QUEUED workflows first, while the
	// database path still sells: with thousands of orders it takes
	// seconds, and the stopped rebuild then lists only what started since.
	listed, err := listQueued(ctx, tc, saleID)
	if err != nil {
		return false, fmt.Errorf("resync sale %d: %w", saleID, err)
	}
	epoch, err := st.BeginResync(ctx, saleID)
	if errors.Is(err, domain.ErrSaleResyncing) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("resync sale %d: %w", saleID, err)
	}
	if err := rebuild(ctx, st, rdb, tc, saleID, epoch, listed); err != nil {
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

func rebuild(ctx context.Context, st *store.Store, rdb *redisgateway.Client, tc client.Client, saleID, epoch int64, listed *queuedListing) error {
	sale, err := st.GetSale(ctx, saleID)
	if err != nil {
		return err
	}
	inputs := map[string]domain.OrderInput{}
	for attempt := 1; ; attempt++ {
		// The fence first, then the snapshot: a release whose database
		// write the snapshot missed runs its Redis step after this read,
		// so either the script sees the fence moved or the step runs on
		// the rebuilt token.
		fence, err := rdb.ReadFence(ctx, saleID)
		if err != nil {
			return err
		}
		// Tokens Redis still has records or inbox entries of: their ended
		// reservations are written back (a rebuild keeps an inbox entry of
		// a token it does not know as a live hold); other ended ones stay
		// retired (redisgateway.Client.Retire), bounding the script by live holds.
		present, err := rdb.PresentTokens(ctx, saleID)
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
		d := redisgateway.RebuildData{
			Stock: state.Stock, Epoch: epoch, Fence: fence,
			StartsMS: sale.StartsAt.UnixMilli(), EndsMS: sale.EndsAt.UnixMilli(), Control: string(sale.Control),
			Buyers: make([]string, len(state.Buyers)), Added: state.AddedRefs, Seq: state.Seq,
		}
		for i, b := range state.Buyers {
			d.Buyers[i] = strconv.FormatInt(b, 10)
		}
		known := make(map[string]bool, len(state.Tokens))
		for _, h := range state.Tokens {
			known[h.Token] = true
			if h.State == domain.TokenReleased && !present[h.Token] {
				d.AddRetired(h.UserID)
				continue
			}
			d.AddReservation(h.Token, h.State, h.UserID, h.RequestID)
		}
		// After the snapshot: a workflow that recorded its hold since is
		// in the list and not in the snapshot, so it is counted once.
		unrecorded, err := unrecordedHolds(ctx, tc, saleID, func(token string) bool { return known[token] }, inputs, listed)
		if err != nil {
			return err
		}
		for _, in := range unrecorded {
			d.AddReservation(in.Token, domain.TokenHeld, in.UserID, in.RequestID)
			d.Buyers = append(d.Buyers, strconv.FormatInt(in.UserID, 10))
			d.Stock--
		}
		d.Stock = max(d.Stock, 0)
		_, err = rdb.Rebuild(ctx, saleID, d)
		if errors.Is(err, redisgateway.ErrFenceMoved) && attempt < rebuildAttempts {
			continue
		}
		if err != nil {
			return err
		}
		if err := restoreWaitlist(ctx, st, rdb, saleID); err != nil {
			return err
		}
		if err := followControl(ctx, st, rdb, saleID, sale.Control); err != nil {
			return err
		}
		return st.FinishResync(ctx, saleID, epoch)
	}
}

// restoreWaitlist puts back the waitlist joins the database kept that
// Redis forgot (it lost writes or the sale's keys), at their places: each
// join answered 200 keeps its place through the rebuild.
func restoreWaitlist(ctx context.Context, st *store.Store, rdb *redisgateway.Client, saleID int64) error {
	joins, err := st.WaitingJoins(ctx, saleID)
	if err != nil {
		return err
	}
	waiters := make([]redisgateway.Waiter, len(joins))
	for i, j := range joins {
		waiters[i] = redisgateway.Waiter{UserID: j.UserID, Joined: j.Joined}
	}
	if _, err := rdb.RestoreWaitlist(ctx, saleID, waiters); err != nil {
		return err
	}
	return nil
}
