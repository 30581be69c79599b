package store_test

import (
	"context"
	"fmt"
	"strings"
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
	now := time.Now().UTC()
	ids := mustIdleSales(t, writer, 1000, now)
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

// mustIdleSales inserts n open sales in one statement (no buckets: the
// directory reads only the sales table) and finishes them at the end.
func mustIdleSales(t *testing.T, st *store.Store, n int, now time.Time) []int64 {
	t.Helper()
	goods := testenv.UniqueUser()
	var b strings.Builder
	b.WriteString("INSERT INTO sales (goods_id, title, price_cents, stock_total, buckets, starts_at, ends_at, payment_window_seconds) VALUES ")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "(%d, 'idle', 100, 1, 1, '%s', '%s', 900)", goods,
			now.Add(-time.Minute).Format("2006-01-02 15:04:05.000"), now.Add(time.Hour).Format("2006-01-02 15:04:05.000"))
	}
	_, err := st.DB.ExecContext(ctx(t), b.String())
	require.NoError(t, err)
	var ids []int64
	require.NoError(t, st.DB.NewSelect().Table("sales").Column("id").Where("goods_id = ?", goods).Scan(ctx(t), &ids))
	require.Len(t, ids, n)
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = st.DB.ExecContext(cctx, "UPDATE sales SET finished_at = NOW(3) WHERE goods_id = ?", goods)
	})
	return ids
}
