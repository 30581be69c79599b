package degraded

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/domain"
)

// ResyncStore rolls back stalled resyncs in the database (store.Store).
type ResyncStore interface {
	// AbortResync rolls a resync at epoch (0: any) older than staleAfter
	// back to database mode with a new epoch, and reports whether it did.
	AbortResync(ctx context.Context, saleID, epoch int64, staleAfter time.Duration) (bool, error)
}

// FleetView reads the fleet's view of Redis now (Observer.View).
type FleetView interface {
	View(ctx context.Context) (domain.RedisFleetView, error)
}

// Comeback is the way back to Redis, as the worker decides it: a sale on
// the database path returns once Redis has answered this worker for
// RedisHealthyFor, the sale has dwelt ModeMinDwell on the database path,
// and the fleet does not find Redis down (a worker whose own link works
// while the API instances' do not would otherwise take it back into
// failure). A resync older than StaleAfter is rolled back. One worker
// loop uses it: it is not safe for concurrent use.
type Comeback struct {
	Settings config.Degraded
	Store    ResyncStore
	// Fleet, when set, is read before a sale goes back.
	Fleet FleetView
	// StaleAfter is how long a resync may take before it is rolled back
	// (StaleResync).
	StaleAfter time.Duration
	Logger     *slog.Logger

	healthySince time.Time
}

// NewComeback is the way back of set, on st, reading fleet.
func NewComeback(set config.Degraded, st ResyncStore, fleet FleetView, logger *slog.Logger) *Comeback {
	return &Comeback{Settings: set, Store: st, Fleet: fleet, StaleAfter: StaleResync, Logger: logger}
}

// Pinged records whether Redis answered this worker's ping at now: an
// unanswered ping starts the healthy time over.
func (c *Comeback) Pinged(answered bool, now time.Time) {
	switch {
	case !answered:
		c.healthySince = time.Time{}
	case c.healthySince.IsZero():
		c.healthySince = now
	}
}

// MayReturn reports whether a sale on the database path may go back to
// Redis at now.
func (c *Comeback) MayReturn(ctx context.Context, s *domain.Sale, now time.Time) bool {
	if c.healthySince.IsZero() || now.Sub(c.healthySince) < c.Settings.RedisHealthyFor || now.Sub(s.ModeChangedAt) < c.Settings.ModeMinDwell {
		return false
	}
	if c.Fleet == nil {
		return true
	}
	v, err := c.Fleet.View(ctx)
	if err != nil {
		c.Logger.Warn("resync: read the fleet's view of redis", "sale_id", s.ID, "err", err)
		return false
	}
	return !FleetDown(v)
}

// AbortStalled rolls a resync older than StaleAfter (its instance died
// between its begin and its finish) back to database mode with a new
// epoch, so the database path sells again and a later resync starts over.
// It reports whether it rolled one back.
func (c *Comeback) AbortStalled(ctx context.Context, saleID int64) (bool, error) {
	rolled, err := c.Store.AbortResync(ctx, saleID, 0, c.StaleAfter)
	if err != nil {
		return false, fmt.Errorf("roll back a stalled resync of sale %d: %w", saleID, err)
	}
	return rolled, nil
}
