package store_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/mariadbnode"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/store"
)

// mustReplicated is a store on pair's primary (migrated) whose reads that
// may lag go to pair's replica within maxLag, once the replica is fresh.
func mustReplicated(t *testing.T, pair *mariadbnode.ReplicaPair, maxLag time.Duration) *store.Store {
	t.Helper()
	st, err := store.Open(ctx(t), pair.PrimaryDSN(testenv.ReplicaDatabase))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, st.Close()) })
	require.NoError(t, st.Migrate(ctx(t)))
	r, err := store.OpenReplica(pair.ReplicaDSN(testenv.ReplicaDatabase), maxLag, slog.Default())
	require.NoError(t, err)
	st.UseReplica(r)
	require.Eventually(t, r.Fresh, 30*time.Second, 50*time.Millisecond, "the replica is found caught up")
	return st
}

// A reservation the lagging replica does not have yet is read from the
// primary (never "not found"), one it has is read from it, as it was; and
// "my reservations" lists both.
func TestReplicaReadsFallBackToThePrimaryForWhatTheReplicaLacks(t *testing.T) {
	pair := testenv.MustReplicaPair(t)
	st := mustReplicated(t, pair, time.Hour) // fresh throughout: only the fallback answers for the missing row
	sale := testenv.MustSale(t, st, 10)
	user := testenv.UniqueUser()
	old := mustQueued(t, st, sale, user, "replica-old")
	require.NoError(t, pair.CaughtUp(ctx(t)))

	require.NoError(t, pair.StopSQLThread(ctx(t)))
	t.Cleanup(func() { assert.NoError(t, pair.StartSQLThread(ctx(t))) })
	_, err := st.EndQueued(ctx(t), old.Token, domain.StatusCancelled, "cancelled by the test") // the replica keeps it QUEUED
	require.NoError(t, err)
	fresh := mustQueued(t, st, sale, user, "replica-new")

	got, from, err := st.ReadReservation(ctx(t), fresh.Token)
	require.NoError(t, err, "a reservation the replica lacks is not 'not found'")
	assert.Equal(t, store.FromPrimaryAfterReplica, from)
	assert.Equal(t, domain.StatusQueued, got.Status)

	got, from, err = st.ReadReservation(ctx(t), old.Token)
	require.NoError(t, err)
	assert.Equal(t, store.FromReplica, from)
	assert.Equal(t, domain.StatusQueued, got.Status, "the replica answers as it is, at most its bound behind")

	_, from, err = st.ReadReservation(ctx(t), "no-such-token")
	assert.ErrorIs(t, err, store.ErrNotFound)
	assert.Equal(t, store.FromPrimaryAfterReplica, from, "not found only once the primary says so")

	mine, from, err := st.ReadReservations(ctx(t), user, sale.ID, 10)
	require.NoError(t, err)
	assert.Equal(t, store.FromReplica, from)
	require.Len(t, mine, 2, "the reservation the replica lacks is listed")
	assert.Equal(t, fresh.Token, mine[0].Token, "newest first")
	assert.Equal(t, old.Token, mine[1].Token)
	assert.Equal(t, domain.StatusCancelled, mine[1].Status, "a recent row is the primary's")
	assert.Equal(t, int64(2), st.Replica().Reads(store.FromPrimaryAfterReplica))

	snap, from, err := st.ReadSnapshotMayLag(ctx(t), sale.ID)
	require.NoError(t, err)
	assert.Equal(t, store.FromReplica, from)
	assert.NotContains(t, snap.Reservations, fresh.Token, "the scan lags: what it finds is read again from the primary")
	replicaReads := st.Replica().Reads(store.FromReplica)
	_, err = st.ListAppeals(ctx(t), domain.AppealOpen, 0, 10)
	require.NoError(t, err)
	assert.Equal(t, replicaReads+1, st.Replica().Reads(store.FromReplica), "an admin list is read from the replica")
}

// A replica more than its bound behind answers nothing: the reads go to
// the primary until it has caught up.
func TestReplicaBehindItsBoundIsNotRead(t *testing.T) {
	pair := testenv.MustReplicaPair(t)
	st := mustReplicated(t, pair, 500*time.Millisecond)
	sale := testenv.MustSale(t, st, 10)
	in := mustQueued(t, st, sale, testenv.UniqueUser(), "replica-bound")
	require.NoError(t, pair.CaughtUp(ctx(t)))
	require.Eventually(t, func() bool {
		_, from, err := st.ReadReservation(ctx(t), in.Token)
		return err == nil && from == store.FromReplica
	}, 10*time.Second, 50*time.Millisecond, "a fresh replica answers")

	require.NoError(t, pair.StopSQLThread(ctx(t)))
	require.Eventually(t, func() bool { return !st.Replica().Fresh() }, 10*time.Second, 50*time.Millisecond, "the lag passes the bound")
	_, err := st.PlaceOrder(ctx(t), in.Token)
	require.NoError(t, err)
	got, from, err := st.ReadReservation(ctx(t), in.Token)
	require.NoError(t, err)
	assert.Equal(t, store.FromPrimary, from)
	assert.Equal(t, domain.StatusPendingPayment, got.Status)
	snap, from, err := st.ReadSnapshotMayLag(ctx(t), sale.ID)
	require.NoError(t, err)
	assert.Equal(t, store.FromPrimary, from)
	assert.Equal(t, domain.StatusPendingPayment, snap.Reservations[in.Token].Status)

	require.NoError(t, pair.StartSQLThread(ctx(t)))
	require.Eventually(t, st.Replica().Fresh, 10*time.Second, 50*time.Millisecond, "caught up, the replica is fresh again")
	got, from, err = st.ReadReservation(ctx(t), in.Token)
	require.NoError(t, err)
	assert.Equal(t, store.FromReplica, from)
	assert.Equal(t, domain.StatusPendingPayment, got.Status)
}
