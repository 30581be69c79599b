package testenv

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/seckill/seckill/store"
)

// Statements records every statement a store sends through its bun.DB,
// as sent (arguments in place).
type Statements struct {
	mu      sync.Mutex
	queries []string
}

// Record has st's statements recorded from now on.
func Record(st *store.Store) *Statements {
	rec := &Statements{}
	st.DB = st.DB.WithQueryHook(rec)
	return rec
}

// MustRecordedStore is a store of its own (another process's, to the
// others) whose statements the answer records.
func MustRecordedStore(tb testing.TB) (*store.Store, *Statements) {
	tb.Helper()
	st := MustStore(tb)
	return st, Record(st)
}

func (r *Statements) BeforeQuery(ctx context.Context, e *bun.QueryEvent) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.queries = append(r.queries, e.Query)
	return ctx
}

func (r *Statements) AfterQuery(context.Context, *bun.QueryEvent) {}

// All is every statement recorded.
func (r *Statements) All() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.queries...)
}

// Take is every statement recorded since the last Take.
func (r *Statements) Take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := r.queries
	r.queries = nil
	return q
}

// MustIdleSales inserts n live sales in one statement, without buckets
// or Redis keys (a marketplace's idle sales, as the loops that only list
// them see them), and finishes them at the end of the test.
func MustIdleSales(tb testing.TB, st *store.Store, n int) []int64 {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	now := time.Now().UTC()
	goods := UniqueUser()
	var b strings.Builder
	b.WriteString("INSERT INTO sales (goods_id, title, price_cents, stock_total, buckets, starts_at, ends_at, payment_window_seconds) VALUES ")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "(%d, 'idle', 100, 1, 1, '%s', '%s', 900)", goods,
			now.Add(-time.Minute).Format(time.DateTime+".000"), now.Add(time.Hour).Format(time.DateTime+".000"))
	}
	if _, err := st.DB.ExecContext(ctx, b.String()); err != nil {
		tb.Fatalf("testenv: insert idle sales: %v", err)
	}
	var ids []int64
	if err := st.DB.NewSelect().Table("sales").Column("id").Where("goods_id = ?", goods).Scan(ctx, &ids); err != nil || len(ids) != n {
		tb.Fatalf("testenv: idle sales: %d of %d, %v", len(ids), n, err)
	}
	tb.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = st.DB.ExecContext(cctx, "UPDATE sales SET finished_at = NOW(3) WHERE goods_id = ?", goods)
	})
	return ids
}
