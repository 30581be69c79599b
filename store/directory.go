package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uptrace/bun"

	"github.com/seckill/seckill/domain"
)

// Directory timing: what an idle open sale costs a process is one row a
// DirectoryFull, not one a loop's tick.
const (
	// DirectoryFresh is how long a refresh answers the process's reads
	// from memory; a write to the sales table through this store makes the
	// next read refresh at once.
	DirectoryFresh = 500 * time.Millisecond
	// DirectoryFull is the period of the full read of every open sale,
	// the backstop for a change the incremental read missed (a
	// transaction open longer than DirectoryMargin, a clock stepped back).
	DirectoryFull = time.Minute
	// DirectoryMargin is how far before its last read the incremental
	// read looks back: changed_at is the statement's time, and its
	// transaction commits later.
	DirectoryMargin = 3 * time.Second
)

// OpenSales is the process's picture of the open sales (finished_at unset)
// as of At: every change committed before At is in it. It is shared by
// every reader: neither it nor its sales may be modified.
type OpenSales struct {
	// At is when the refresh that answered began.
	At  time.Time
	set *saleSet
}

// saleSet is the open sales of one picture; a refresh that finds nothing
// changed keeps it, so what a reader derived from it (Same, Share) holds.
type saleSet struct {
	list   []*domain.Sale // by id
	byID   map[int64]*domain.Sale
	shares sync.Map // shares (int64) -> [][]*domain.Sale, built on first use
}

func newSaleSet(list []*domain.Sale) *saleSet {
	set := &saleSet{list: list, byID: make(map[int64]*domain.Sale, len(list))}
	for _, s := range list {
		set.byID[s.ID] = s
	}
	return set
}

// List is every open sale, by id.
func (o *OpenSales) List() []*domain.Sale { return o.set.list }

// Len is how many sales are open.
func (o *OpenSales) Len() int { return len(o.set.list) }

// Get is the open sale id; ok is false when it is not open.
func (o *OpenSales) Get(id int64) (*domain.Sale, bool) {
	s, ok := o.set.byID[id]
	return s, ok
}

// Same reports whether no sale opened, closed or changed between p and o.
func (o *OpenSales) Same(p *OpenSales) bool { return p != nil && o.set == p.set }

// Share is the open sales whose domain.PassShare(id, shares) is share: one
// tick's part of a loop's full pass, found without looking at the others.
func (o *OpenSales) Share(shares, share int64) []*domain.Sale {
	shares = max(shares, 1)
	v, ok := o.set.shares.Load(shares)
	if !ok {
		parts := make([][]*domain.Sale, shares)
		for _, s := range o.set.list {
			p := domain.PassShare(s.ID, shares)
			parts[p] = append(parts[p], s)
		}
		v, _ = o.set.shares.LoadOrStore(shares, parts)
	}
	parts := v.([][]*domain.Sale)
	if share < 0 || share >= int64(len(parts)) {
		return nil
	}
	return parts[share]
}

// directory keeps the process's OpenSales: a read refreshes it when it is
// older than DirectoryFresh or a write marked it dirty, re-reading only the
// rows whose changed_at is recent, and every open sale once a
// DirectoryFull.
type directory struct {
	mu       sync.Mutex // one refresh at a time
	snap     atomic.Pointer[OpenSales]
	dirty    atomic.Bool
	lastFull time.Time
	// fresh and full override DirectoryFresh and DirectoryFull (tests).
	fresh, full time.Duration
}

// OpenSales answers the open sales from the process's directory, refreshed
// when due (see directory).
func (s *Store) OpenSales(ctx context.Context) (*OpenSales, error) {
	d := &s.sales
	if snap, ok := d.current(); ok {
		return snap, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if snap, ok := d.current(); ok {
		return snap, nil // refreshed while this read waited
	}
	return d.refresh(ctx, s)
}

// current is the picture when it is fresh.
func (d *directory) current() (*OpenSales, bool) {
	snap := d.snap.Load()
	if snap == nil || d.dirty.Load() || time.Since(snap.At) >= orDefault(d.fresh, DirectoryFresh) {
		return nil, false
	}
	return snap, true
}

// refresh reads what changed since the last picture (everything when a
// full read is due) and stores the new picture.
func (d *directory) refresh(ctx context.Context, s *Store) (*OpenSales, error) {
	began := time.Now()
	// Cleared before the read: a write after this point marks it again.
	d.dirty.Store(false)
	old := d.snap.Load()
	full := orDefault(d.full, DirectoryFull)
	if old == nil || began.Sub(d.lastFull) >= full || began.Sub(old.At) >= full {
		list, err := s.ListOpenSales(ctx)
		if err != nil {
			d.dirty.Store(true)
			return nil, fmt.Errorf("sales directory: %w", err)
		}
		snap := &OpenSales{At: began, set: newSaleSet(list)}
		if old != nil && sameSales(old.set.list, list) {
			snap.set = old.set
		}
		d.snap.Store(snap)
		d.lastFull = began
		return snap, nil
	}
	open, closed, err := s.SalesChangedWithin(ctx, began.Sub(old.At)+DirectoryMargin)
	if err != nil {
		d.dirty.Store(true)
		return nil, fmt.Errorf("sales directory: %w", err)
	}
	snap := &OpenSales{At: began, set: old.set.with(open, closed)}
	d.snap.Store(snap)
	return snap, nil
}

// with is the set with open stored and closed removed; the set itself when
// that changes nothing.
func (set *saleSet) with(open []*domain.Sale, closed []int64) *saleSet {
	changed := false
	for _, s := range open {
		if cur, ok := set.byID[s.ID]; !ok || *cur != *s {
			changed = true
			break
		}
	}
	for _, id := range closed {
		if _, ok := set.byID[id]; ok {
			changed = true
			break
		}
	}
	if !changed {
		return set
	}
	byID := make(map[int64]*domain.Sale, len(set.byID)+len(open))
	for id, s := range set.byID {
		byID[id] = s
	}
	for _, s := range open {
		byID[s.ID] = s
	}
	for _, id := range closed {
		delete(byID, id)
	}
	list := make([]*domain.Sale, 0, len(byID))
	for _, s := range byID {
		list = append(list, s)
	}
	slices.SortFunc(list, func(a, b *domain.Sale) int { return compareIDs(a.ID, b.ID) })
	return newSaleSet(list)
}

func compareIDs(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// sameSales reports whether two lists by id hold equal sales.
func sameSales(a, b []*domain.Sale) bool {
	return slices.EqualFunc(a, b, func(x, y *domain.Sale) bool { return *x == *y })
}

// SalesChangedWithin reads the sales whose row changed within the last
// d by the server's clock, through the changed_at index: open the ones
// still open, closed the ids of those finished.
func (s *Store) SalesChangedWithin(ctx context.Context, d time.Duration) (open []*domain.Sale, closed []int64, err error) {
	var rows []saleRow
	if err := s.DB.NewSelect().Model(&rows).Where("changed_at >= NOW(3) - INTERVAL ? MICROSECOND", d.Microseconds()).
		Order("id").Scan(ctx); err != nil {
		return nil, nil, fmt.Errorf("sales changed within %s: %w", d, err)
	}
	for i := range rows {
		if rows[i].FinishedAt != nil {
			closed = append(closed, rows[i].ID)
			continue
		}
		open = append(open, rows[i].domain())
	}
	return open, closed, nil
}

// salesWrites marks the directory dirty after a statement that writes the
// sales table: the process's next read sees its own write.
type salesWrites struct{ d *directory }

func (salesWrites) BeforeQuery(ctx context.Context, _ *bun.QueryEvent) context.Context { return ctx }

func (h salesWrites) AfterQuery(_ context.Context, e *bun.QueryEvent) {
	if writesSales(e.Query) {
		h.d.dirty.Store(true)
	}
}

// writesSales reports whether q is a write naming the sales table (an
// extra refresh is all a false match costs).
func writesSales(q string) bool {
	q = strings.TrimLeft(q, " \t\r\n(")
	if len(q) < 6 {
		return false
	}
	switch strings.ToUpper(q[:6]) {
	case "UPDATE", "INSERT", "DELETE", "REPLAC":
		return strings.Contains(q, "sales")
	}
	return false
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}
