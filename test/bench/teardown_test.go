package bench

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/store"
)

// Sale ids start over with a new database. A run whose services were
// started anew under it (an A/B script's next run wiping the data while
// the last one still tears down) holds ids that now name the next run's
// sales; its teardown must leave those alone: stopped and finished, the
// next run's sale refuses every reservation at the sale filter, and a
// fault probed on it (scenario 13's freeze) sees no Redis call at all.
func TestTeardownLeavesAnotherRunsSaleOfTheSameIDAlone(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := testenv.MustEmptyDatabase(t) // a database started anew: ids from 1
	check, err := store.Open(ctx, dsn)
	require.NoError(t, err)
	defer check.Close()
	require.NoError(t, check.Migrate(ctx))
	r := &runner{o: Options{Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))}, stamp: "old" + strconv.FormatInt(time.Now().UnixNano(), 36)}
	r.st, err = store.Open(ctx, dsn)
	require.NoError(t, err)
	r.rdb = redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{testenv.RedisAddr()}})
	r.tc, err = client.DialContext(ctx, client.Options{HostPort: testenv.TemporalAddress(), Logger: testenv.TemporalLogger{}})
	require.NoError(t, err)

	// The next run's fault sale took id 1, which the old run's first sale
	// had in the database before; the old run's second sale is its own.
	next := &runner{stamp: "new" + r.stamp}
	theirs, err := NewSale(ctx, check, next.saleTitle("market fault"), 10, 1)
	require.NoError(t, err)
	mine, err := NewSale(ctx, check, r.saleTitle("market in-stock"), 10, 1)
	require.NoError(t, err)
	require.Less(t, theirs.ID, int64(fakeSaleBase))
	r.saleIDs = []int64{theirs.ID, mine.ID}
	began := time.Now().Add(-time.Minute)
	r.close()

	finished, err := check.FinishedSince(ctx, began)
	require.NoError(t, err)
	require.Equal(t, []int64{mine.ID}, finished, "the run's own sale is torn down, the other run's is not")
	s, err := check.GetSale(ctx, theirs.ID)
	require.NoError(t, err)
	require.Equal(t, domain.ControlActive, s.Control, "another run's sale is not stopped")
	s, err = check.GetSale(ctx, mine.ID)
	require.NoError(t, err)
	require.Equal(t, domain.ControlStopped, s.Control)
}

// testWriter writes a runner's log lines to the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// A bench database is opened migrated, its sales numbered from the floor
// asked for (the twin's, below the bench's).
func TestOpenBenchStoreMigratesAndNumbersSalesFromItsFloor(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	floor := twinSaleFloor(time.Now())
	st, err := openBenchStore(ctx, testenv.MustEmptyDatabase(t), floor)
	require.NoError(t, err)
	defer st.Close()
	s, err := NewSale(ctx, st, "bench floor", 10, 1)
	require.NoError(t, err)
	require.GreaterOrEqual(t, s.ID, floor)
	require.Less(t, s.ID, int64(benchSaleBase))
}
