package reservation

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/gate"
	"github.com/seckill/seckill/internal/ratelimit"
	"github.com/seckill/seckill/salecache"
)

// filterFixture is Filters on an in-process cache holding one open sale
// (no challenge, no allowlist, no lottery pool): nothing reaches a service.
type filterFixture struct {
	f      *Filters
	cache  *salecache.Cache
	sale   *domain.Sale
	counts map[[2]string]int
}

func newFilterFixture(perUserBurst int) *filterFixture {
	now := time.Now()
	x := &filterFixture{cache: salecache.New(nil, nil, time.Second, slog.New(slog.DiscardHandler)), counts: map[[2]string]int{},
		sale: &domain.Sale{ID: 7, StockTotal: 10, StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour), Mode: domain.ModeRedis, Control: domain.ControlActive}}
	x.cache.Put(x.sale)
	x.f = NewFilters(FilterDeps{Cache: x.cache, Gate: gate.New(nil, []byte("k"), nil), Lottery: NewLottery([]byte("k"), 0, time.Second, nil),
		PerUser: ratelimit.NewKeyed(1, perUserBurst, 1<<10, time.Minute, ratelimit.HashUser), PerUserRPS: 1, RedisTimeout: time.Second,
		Count: func(layer, outcome string) { x.counts[[2]string{layer, outcome}]++ }, Logger: slog.New(slog.DiscardHandler)})
	return x
}

// Each layer refuses with the contract's answer and counts it; a request
// that passes every layer is counted through all of them.
func TestFiltersRefuseInOrder(t *testing.T) {
	ctx, now := context.Background(), time.Now()
	x := newFilterFixture(1)
	got, err := x.f.Admit(ctx, 1, x.sale.ID, "req-1", "", now)
	if err != nil || got.Sale != x.sale || got.Replay != "" {
		t.Fatalf("an open sale: %+v, %v", got, err)
	}
	for _, layer := range []string{LayerSale, LayerGate, LayerSoldOut, LayerUser, LayerBlacklist, LayerLottery} {
		if x.counts[[2]string{layer, "pass"}] != 1 {
			t.Errorf("layer %s: passes %d", layer, x.counts[[2]string{layer, "pass"}])
		}
	}
	_, err = x.f.Admit(ctx, 1, x.sale.ID, "req-2", "", now)
	if de, ok := err.(*domain.Error); !ok || de.Code != domain.ERateLimited || de.RetryAfter != 1 {
		t.Errorf("the user's bucket spent: %v", err)
	}
	x.cache.SetBlacklisted(2, true)
	if _, err := x.f.Admit(ctx, 2, x.sale.ID, "req-1", "", now); domain.ErrorCode(err) != domain.EBlacklisted {
		t.Errorf("blacklisted: %v", err)
	}
	if _, err := x.f.Admit(ctx, 3, x.sale.ID, "req-1", "", now.Add(2*time.Hour)); err != domain.ErrSaleEnded {
		t.Errorf("after the end: %v", err)
	}
	if _, err := x.f.Admit(ctx, 3, x.sale.ID, "req-1", "", now.Add(-time.Hour)); err != domain.ErrSaleNotStarted {
		t.Errorf("before the start: %v", err)
	}
	paused := *x.sale
	paused.Control = domain.ControlPaused
	x.cache.Put(&paused)
	if _, err := x.f.Admit(ctx, 3, x.sale.ID, "req-1", "", now); err != domain.ErrSalePaused {
		t.Errorf("paused: %v", err)
	}
	challenged := *x.sale
	challenged.ChallengeDifficulty = 1000
	x.cache.Put(&challenged)
	if _, err := x.f.Admit(ctx, 3, x.sale.ID, "req-1", "", now); domain.ErrorCode(err) != domain.EChallengeRequired {
		t.Errorf("no pass: %v", err)
	}
	for key, want := range map[[2]string]int{{LayerUser, "rate_limited"}: 1, {LayerBlacklist, "blacklisted"}: 1, {LayerSale, "ended"}: 1,
		{LayerSale, "not_started"}: 1, {LayerSale, "paused"}: 1, {LayerGate, "challenge_required"}: 1} {
		if x.counts[key] != want {
			t.Errorf("%v counted %d, want %d", key, x.counts[key], want)
		}
	}
	// A refusal ends the list: the layers after it never saw those requests.
	for _, layer := range []string{LayerBlacklist, LayerLottery} {
		if x.counts[[2]string{layer, "pass"}] != 1 {
			t.Errorf("layer %s passed %d requests, want only the first", layer, x.counts[[2]string{layer, "pass"}])
		}
	}
}
