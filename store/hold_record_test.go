package store_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/store"
)

// recordHold records a hold of no known Redis number and reports whether
// it may be answered 202.
func recordHold(t *testing.T, st *store.Store, in domain.OrderInput, epoch int64) (bool, error) {
	t.Helper()
	rec, err := st.RecordRedisHold(ctx(t), in, epoch, 0, true)
	return rec.Promised(), err
}

func redisHold(sale *domain.Sale, user int64, req string) domain.OrderInput {
	return domain.RedisHoldInput(domain.DeriveToken([]byte("test-key"), sale.ID, user, req), sale.ID, user, req)
}

// A burst of Redis holds taken after the last stock sample, none relayed
// yet, then Redis fails: the database path sells only what the burst left,
// because each hold was recorded before its 202 (RecordRedisHold), and a
// hold that meets the open quota is not counted, so it gets no 202.
func TestDatabasePathCountsHoldsRecordedBeforeTheir202(t *testing.T) {
	st := testenv.MustStore(t)
	const stock = 10
	sale := testenv.MustSale(t, st, stock)
	epoch := sale.ModeEpoch
	base := testenv.UniqueUser() * 1000
	require.NoError(t, st.RecordRedisStock(ctx(t), sale.ID, stock, time.Now().Add(-time.Second)))

	// Six holds after the sample, recorded as their 202s go out; a replay
	// of one is counted once.
	for i := range 6 {
		counted, err := recordHold(t, st, redisHold(sale, base+int64(i), fmt.Sprintf("burst-%04d", i)), epoch)
		require.NoError(t, err)
		require.True(t, counted, "hold %d", i)
	}
	counted, err := recordHold(t, st, redisHold(sale, base, "burst-0000"), epoch)
	require.NoError(t, err)
	require.True(t, counted, "a replay of a recorded hold")

	// The sale switches; a hold Redis took just before is recorded before
	// the quota opens, so it is counted too.
	switched, err := st.SwitchToDatabase(ctx(t), sale.ID, 0)
	require.NoError(t, err)
	counted, err = recordHold(t, st, redisHold(sale, base+6, "burst-0006"), epoch)
	require.NoError(t, err)
	require.True(t, counted, "recorded after the switch, before the quota opens")

	// 20 buyers on the database path take exactly the 3 units left.
	var mu sync.Mutex
	sold := 0
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			in := dbInput(sale, base+100+int64(i), fmt.Sprintf("dbpath-%04d", i))
			for {
				_, _, err := st.ReserveInDB(ctx(t), in)
				if err != nil && store.IsRetryable(err) {
					continue
				}
				if err == nil {
					mu.Lock()
					sold++
					mu.Unlock()
				} else {
					assert.ErrorIs(t, err, store.ErrQuotaExhausted)
				}
				return
			}
		})
	}
	wg.Wait()
	assert.Equal(t, stock-7, sold, "the database path sells only what the burst left")

	// With the quota open, a hold recorded now is not counted: no row, no 202.
	late := redisHold(sale, base+7, "burst-0007")
	counted, err = recordHold(t, st, late, epoch)
	require.NoError(t, err)
	assert.False(t, counted, "a hold meeting the open quota")
	_, err = st.GetReservation(ctx(t), late.Token)
	assert.ErrorIs(t, err, store.ErrNotFound)
	// A hold of an epoch the sale never had is not counted either.
	counted, err = recordHold(t, st, redisHold(sale, base+8, "burst-0008"), switched.ModeEpoch+5)
	require.NoError(t, err)
	assert.False(t, counted, "a hold of another epoch")
}

// A Redis hold cancelled while still QUEUED gives its unit to the
// database path, as the cancel's 200 promises: before the quota opens (it
// is not counted against it) and after (its bucket's share grows by one).
func TestCancelledQueuedHoldGoesBackOnSaleInDatabaseMode(t *testing.T) {
	st := testenv.MustStore(t)
	const stock = 4
	sale := testenv.MustSale(t, st, stock)
	base := testenv.UniqueUser() * 1000
	require.NoError(t, st.RecordRedisStock(ctx(t), sale.ID, stock, time.Now().Add(-time.Second)))
	a, b := redisHold(sale, base, "hold-a"), redisHold(sale, base+1, "hold-b")
	for _, in := range []domain.OrderInput{a, b} {
		counted, err := recordHold(t, st, in, sale.ModeEpoch)
		require.NoError(t, err)
		require.True(t, counted)
	}
	_, err := st.SwitchToDatabase(ctx(t), sale.ID, 0)
	require.NoError(t, err)
	_, err = st.EndQueued(ctx(t), a.Token, domain.StatusCancelled, "cancelled")
	require.NoError(t, err)

	sell := func(from int) int {
		sold := 0
		for i := from; i < from+10; i++ {
			_, _, err := st.ReserveInDB(ctx(t), dbInput(sale, base+100+int64(i), fmt.Sprintf("dbpath-%04d", i)))
			if err == nil {
				sold++
				continue
			}
			require.ErrorIs(t, err, store.ErrQuotaExhausted)
		}
		return sold
	}
	assert.Equal(t, stock-1, sell(0), "every unit but hold b's: hold a's cancel gave its unit back")
	_, err = st.EndQueued(ctx(t), b.Token, domain.StatusCancelled, "cancelled")
	require.NoError(t, err)
	assert.Equal(t, 1, sell(10), "hold b's cancel, after the quota opened, gives its unit back")
}
