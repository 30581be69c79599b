package degraded

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/domain"
)

type fakeFleetView struct {
	view domain.RedisFleetView
	err  error
}

func (f *fakeFleetView) View(context.Context) (domain.RedisFleetView, error) { return f.view, f.err }

type fakeResyncStore struct{ staleAfter []time.Duration }

func (f *fakeResyncStore) AbortResync(_ context.Context, _, epoch int64, staleAfter time.Duration) (bool, error) {
	if epoch != 0 {
		return false, errors.New("a stalled resync is rolled back at any epoch")
	}
	f.staleAfter = append(f.staleAfter, staleAfter)
	return true, nil
}

// A sale on the database path goes back once Redis answered this worker
// for SECKILL_REDIS_HEALTHY_FOR without a miss, the sale dwelt
// SECKILL_MODE_MIN_DWELL there, and the fleet does not find Redis down
// (nor fails to say).
func TestASaleGoesBackAfterHealthDwellAndTheFleetsWord(t *testing.T) {
	fleet := &fakeFleetView{view: domain.RedisFleetView{Up: 2}}
	c := NewComeback(config.Degraded{RedisHealthyFor: 3 * time.Second, ModeMinDwell: 5 * time.Second}, &fakeResyncStore{}, fleet, slog.New(slog.DiscardHandler))
	t0 := time.Unix(1_000_000, 0)
	sale := &domain.Sale{ID: 1, Mode: domain.ModeDatabase, ModeChangedAt: t0}
	ctx := t.Context()

	require.False(t, c.MayReturn(ctx, sale, t0.Add(time.Minute)), "Redis never answered")
	c.Pinged(true, t0)
	c.Pinged(true, t0.Add(time.Second)) // the healthy time runs from the first answer
	require.False(t, c.MayReturn(ctx, sale, t0.Add(4*time.Second)), "the least dwell is not over")
	require.True(t, c.MayReturn(ctx, sale, t0.Add(5*time.Second)))

	c.Pinged(false, t0.Add(6*time.Second))
	c.Pinged(true, t0.Add(7*time.Second))
	require.False(t, c.MayReturn(ctx, sale, t0.Add(9*time.Second)), "a miss starts the healthy time over")
	require.True(t, c.MayReturn(ctx, sale, t0.Add(10*time.Second)))

	fleet.view = domain.RedisFleetView{Up: 1, Down: 2}
	require.False(t, c.MayReturn(ctx, sale, t0.Add(10*time.Second)), "most of the fleet finds Redis down")
	fleet.view, fleet.err = domain.RedisFleetView{Up: 2}, errors.New("mysql unreachable")
	require.False(t, c.MayReturn(ctx, sale, t0.Add(10*time.Second)), "the fleet's view unread")

	c.Fleet = nil
	require.True(t, c.MayReturn(ctx, sale, t0.Add(10*time.Second)), "no fleet to consult")
}

// A resync is rolled back once it is older than StaleResync, whatever its
// epoch.
func TestAStalledResyncIsRolledBackAfterStaleResync(t *testing.T) {
	st := &fakeResyncStore{}
	c := NewComeback(config.Degraded{}, st, nil, slog.New(slog.DiscardHandler))
	rolled, err := c.AbortStalled(t.Context(), 1)
	require.NoError(t, err)
	require.True(t, rolled)
	require.Equal(t, []time.Duration{StaleResync}, st.staleAfter)
}
