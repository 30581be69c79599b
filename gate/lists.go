package gate

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/singleflight"

	"github.com/seckill/seckill/domain"
)

// lists are the in-process copies of the challenge exemptions (all of
// them, few) and each restricted sale's allowlist (up to MaxAllowlistIDs
// per call, loaded again only when the sale's allowlist version moved).
type lists struct {
	exempted atomic.Pointer[map[int64]struct{}]

	mu      sync.RWMutex
	allowed map[int64]*allowlist // by sale
	loads   singleflight.Group
}

type allowlist struct {
	version int64
	users   map[int64]struct{}
}

func newLists() *lists {
	l := &lists{allowed: map[int64]*allowlist{}}
	empty := map[int64]struct{}{}
	l.exempted.Store(&empty)
	return l
}

func (l *lists) exempt(userID int64) bool {
	_, ok := (*l.exempted.Load())[userID]
	return ok
}

// setExempt applies an exemption change at once on this instance (the
// others see it at their next refresh).
func (l *lists) setExempt(userID int64, on bool) {
	for {
		old := l.exempted.Load()
		next := make(map[int64]struct{}, len(*old)+1)
		for id := range *old {
			next[id] = struct{}{}
		}
		if on {
			next[userID] = struct{}{}
		} else {
			delete(next, userID)
		}
		if l.exempted.CompareAndSwap(old, &next) {
			return
		}
	}
}

// current is the loaded allowlist of a sale at version or later, or nil.
func (l *lists) current(saleID, version int64) *allowlist {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if a := l.allowed[saleID]; a != nil && a.version >= version {
		return a
	}
	return nil
}

// keepOnly forgets the allowlists of sales no longer open or restricted.
func (l *lists) keepOnly(sales []*domain.Sale) {
	keep := map[int64]bool{} // the restricted ones: few among many sales
	for _, s := range sales {
		if s.Restricted {
			keep[s.ID] = true
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for id := range l.allowed {
		if !keep[id] {
			delete(l.allowed, id)
		}
	}
}

func (l *lists) listed(saleID, userID int64) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	_, ok := l.allowed[saleID].users[userID]
	return ok
}

// Refresh reloads the exemptions and, for each restricted sale whose
// allowlist moved, its allowlist. The API calls it with its sale-cache
// refresh (every second).
func (s *Service) Refresh(ctx context.Context, sales []*domain.Sale) error {
	ids, err := s.store.Exemptions(ctx)
	if err != nil {
		return fmt.Errorf("refresh exemptions: %w", err)
	}
	m := make(map[int64]struct{}, len(ids))
	for _, id := range ids {
		m[id] = struct{}{}
	}
	s.lists.exempted.Store(&m)
	s.lists.keepOnly(sales)
	for _, sale := range sales {
		if sale.Restricted {
			if err := s.LoadAllowlist(ctx, sale); err != nil {
				return err
			}
		}
	}
	return nil
}

// LoadAllowlist makes sure the sale's allowlist at its version (or later)
// is in memory; concurrent callers share one read.
func (s *Service) LoadAllowlist(ctx context.Context, sale *domain.Sale) error {
	if s.lists.current(sale.ID, sale.AllowlistVersion) != nil {
		return nil
	}
	_, err, _ := s.lists.loads.Do(strconv.FormatInt(sale.ID, 10), func() (any, error) {
		ids, version, err := s.store.Allowlist(ctx, sale.ID)
		if err != nil {
			return nil, err
		}
		a := &allowlist{version: version, users: make(map[int64]struct{}, len(ids))}
		for _, id := range ids {
			a.users[id] = struct{}{}
		}
		s.lists.mu.Lock()
		if old := s.lists.allowed[sale.ID]; old == nil || old.version <= version {
			s.lists.allowed[sale.ID] = a
		}
		s.lists.mu.Unlock()
		return nil, nil
	})
	if err != nil {
		return fmt.Errorf("load allowlist: %w", err)
	}
	return nil
}

// Allowlists is how many sales' allowlists the instance holds.
func (s *Service) Allowlists() int {
	s.lists.mu.RLock()
	defer s.lists.mu.RUnlock()
	return len(s.lists.allowed)
}
