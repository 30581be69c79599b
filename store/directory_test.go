package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/store"
)

func mustOpenSale(t *testing.T, st *store.Store, id int64) (*domain.Sale, bool) {
	t.Helper()
	open, err := st.OpenSales(ctx(t))
	require.NoError(t, err)
	return open.Get(id)
}

// The directory follows another process's writes by re-reading only the
// rows changed since its last read: a new sale appears, a stopped one
// shows stopped, a finished one leaves, each for one statement.
func TestOpenSalesFollowsOtherProcesses(t *testing.T) {
	writer := testenv.MustStore(t)
	reader, rec := testenv.MustRecordedStore(t)
	reader.SetDirectoryTiming(time.Nanosecond, time.Hour) // every read refreshes, incrementally
	_, err := reader.OpenSales(ctx(t))                    // the first read is the full one
	require.NoError(t, err)
	rec.Take()

	sale := testenv.MustSale(t, writer, 5)
	got, ok := mustOpenSale(t, reader, sale.ID)
	require.True(t, ok, "a new sale appears")
	want, err := writer.GetSale(ctx(t), sale.ID)
	require.NoError(t, err)
	assert.Equal(t, *want, *got)
	q := rec.Take()
	require.Len(t, q, 1, "one statement a refresh")
	assert.Contains(t, q[0], "changed_at >=")

	_, err = writer.SetSaleControl(ctx(t), sale.ID, domain.ControlStopped)
	require.NoError(t, err)
	got, ok = mustOpenSale(t, reader, sale.ID)
	require.True(t, ok)
	assert.Equal(t, domain.ControlStopped, got.Control, "a stop shows at the next refresh")

	require.NoError(t, writer.MarkFinished(ctx(t), sale.ID))
	_, ok = mustOpenSale(t, reader, sale.ID)
	assert.False(t, ok, "a finished sale leaves")
	assert.Len(t, rec.Take(), 2)
}

// A change the incremental read cannot see (its changed_at older than
// the read looks back) is repaired by the full read; a fresh picture is
// answered from memory, except after the process's own write.
func TestOpenSalesFullReadRepairsAMissedChange(t *testing.T) {
	writer := testenv.MustStore(t)
	reader, rec := testenv.MustRecordedStore(t)
	reader.SetDirectoryTiming(time.Nanosecond, time.Hour)
	sale := testenv.MustSale(t, writer, 5)
	_, ok := mustOpenSale(t, reader, sale.ID)
	require.True(t, ok)

	_, err := writer.DB.ExecContext(ctx(t), "UPDATE sales SET control = ?, changed_at = changed_at - INTERVAL 1 HOUR WHERE id = ?",
		string(domain.ControlPaused), sale.ID)
	require.NoError(t, err)
	got, _ := mustOpenSale(t, reader, sale.ID)
	require.Equal(t, domain.ControlActive, got.Control, "the incremental read misses a change it cannot date")
	reader.SetDirectoryTiming(time.Nanosecond, time.Nanosecond)
	got, _ = mustOpenSale(t, reader, sale.ID)
	assert.Equal(t, domain.ControlPaused, got.Control, "the full read repairs it")

	// Fresh: answered from memory, blind to the other process meanwhile.
	reader.SetDirectoryTiming(time.Hour, time.Hour)
	rec.Take()
	_, err = writer.SetSaleControl(ctx(t), sale.ID, domain.ControlActive)
	require.NoError(t, err)
	got, _ = mustOpenSale(t, reader, sale.ID)
	assert.Equal(t, domain.ControlPaused, got.Control)
	assert.Empty(t, rec.Take(), "a fresh picture costs no statement")
	// Its own write makes the next read refresh.
	_, err = reader.SetSaleControl(ctx(t), sale.ID, domain.ControlStopped)
	require.NoError(t, err)
	rec.Take()
	got, _ = mustOpenSale(t, reader, sale.ID)
	assert.Equal(t, domain.ControlStopped, got.Control, "the process's own write is seen at once")
	assert.Len(t, rec.Take(), 1)
	require.NoError(t, writer.MarkFinished(ctx(t), sale.ID))
}

// An idle directory costs one statement a refresh however many sales are
// open, reads none of their rows and keeps its picture.
func TestOpenSalesIdleCostIsConstant(t *testing.T) {
	writer := testenv.MustStore(t)
	reader, rec := testenv.MustRecordedStore(t)
	reader.SetDirectoryTiming(time.Nanosecond, time.Hour)
	ids := testenv.MustIdleSales(t, writer, 1000)
	// The rows' own insert is a change until the incremental read's margin
	// has passed.
	time.Sleep(store.DirectoryMargin + 1100*time.Millisecond)
	first, err := reader.OpenSales(ctx(t))
	require.NoError(t, err)
	for _, id := range ids {
		_, ok := first.Get(id)
		require.True(t, ok, "sale %d is open", id)
	}
	rec.Take()
	for range 5 {
		open, err := reader.OpenSales(ctx(t))
		require.NoError(t, err)
		assert.True(t, open.Same(first), "an idle refresh keeps the picture")
	}
	assert.Len(t, rec.Take(), 5, "one statement a refresh")
	changed, closed, err := reader.SalesChangedWithin(ctx(t), store.DirectoryMargin)
	require.NoError(t, err)
	for _, s := range changed {
		assert.NotContains(t, ids, s.ID, "an idle sale's row is not read")
	}
	assert.Empty(t, closed)
}

// What a loop's look at the open sales costs the process with 2,000 idle
// sales open: the full list each look, against the directory's refresh.
func BenchmarkOpenSalesIdle(b *testing.B) {
	st := testenv.MustStore(b)
	testenv.MustIdleSales(b, st, 2000)
	time.Sleep(store.DirectoryMargin + time.Second)
	b.Run("list", func(b *testing.B) {
		for b.Loop() {
			if _, err := st.ListOpenSales(ctx(b)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("directory", func(b *testing.B) {
		st.SetDirectoryTiming(time.Nanosecond, time.Hour) // every look refreshes
		if _, err := st.OpenSales(ctx(b)); err != nil {   // the first look reads everything
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := st.OpenSales(ctx(b)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
