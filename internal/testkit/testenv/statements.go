package testenv

import (
	"context"
	"sync"
	"testing"

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
