package domain

import (
	"strings"
	"testing"
	"time"
)

func validSpec() SaleSpec {
	goods, price, stock := int64(7), int64(1999), int64(100)
	title := "Mechanical keyboard"
	starts := time.Date(2030, 1, 1, 10, 0, 0, 0, time.FixedZone("CET", 3600))
	ends := starts.Add(time.Hour)
	return SaleSpec{GoodsID: &goods, Title: &title, PriceCents: &price, Stock: &stock, StartsAt: &starts, EndsAt: &ends}
}

func TestNewSaleFillsTheDefaults(t *testing.T) {
	spec := validSpec()
	s, err := NewSale(spec)
	if err != nil {
		t.Fatal(err)
	}
	if s.Buckets != DefaultBuckets || s.PaymentWindowSeconds != DefaultPaymentWindowSeconds ||
		s.PerUserLimit != PerUserLimit || s.ChallengeDifficulty != 0 {
		t.Errorf("defaults: buckets %d window %d limit %d difficulty %d", s.Buckets, s.PaymentWindowSeconds, s.PerUserLimit, s.ChallengeDifficulty)
	}
	if s.GoodsID != 7 || s.Title != "Mechanical keyboard" || s.PriceCents != 1999 || s.StockTotal != 100 {
		t.Errorf("fields not copied: %+v", s)
	}
	if s.StartsAt.Location() != time.UTC || !s.StartsAt.Equal(*spec.StartsAt) || s.EndsAt.Location() != time.UTC || !s.EndsAt.Equal(*spec.EndsAt) {
		t.Errorf("times: %v %v, want the same instants in UTC", s.StartsAt, s.EndsAt)
	}

	buckets, window, limit, difficulty := 3, 60, 1, int64(5000)
	spec.Buckets, spec.PaymentWindowSeconds, spec.PerUserLimit, spec.ChallengeDifficulty = &buckets, &window, &limit, &difficulty
	if s, err = NewSale(spec); err != nil {
		t.Fatal(err)
	}
	if s.Buckets != 3 || s.PaymentWindowSeconds != 60 || s.PerUserLimit != 1 || s.ChallengeDifficulty != 5000 {
		t.Errorf("named values not kept: %+v", s)
	}
}

// TestSaleSpecBounds: each bound is accepted at its edge and refused one
// past it, with the contract's invalid_request naming the field.
func TestSaleSpecBounds(t *testing.T) {
	i64 := func(v int64) *int64 { return &v }
	num := func(v int) *int { return &v }
	str := func(v string) *string { return &v }
	for _, tc := range []struct {
		name, msg string // msg "": accepted
		edit      func(*SaleSpec)
	}{
		{"goods_id 1", "", func(s *SaleSpec) { s.GoodsID = i64(1) }},
		{"goods_id 0", "goods_id: required, a positive integer", func(s *SaleSpec) { s.GoodsID = i64(0) }},
		{"goods_id missing", "goods_id: required, a positive integer", func(s *SaleSpec) { s.GoodsID = nil }},
		{"title max", "", func(s *SaleSpec) { s.Title = str(strings.Repeat("é", MaxTitleBytes/2)) }},
		{"title past max", "title: required, 1..200 bytes", func(s *SaleSpec) { s.Title = str(strings.Repeat("x", MaxTitleBytes+1)) }},
		{"title empty", "title: required, 1..200 bytes", func(s *SaleSpec) { s.Title = str("") }},
		{"price 0", "", func(s *SaleSpec) { s.PriceCents = i64(0) }},
		{"price negative", "price_cents: required, a non-negative integer", func(s *SaleSpec) { s.PriceCents = i64(-1) }},
		{"stock min", "", func(s *SaleSpec) { s.Stock = i64(MinStock) }},
		{"stock max", "", func(s *SaleSpec) { s.Stock = i64(MaxStock) }},
		{"stock 0", "stock: required, 1..10000000", func(s *SaleSpec) { s.Stock = i64(0) }},
		{"stock past max", "stock: required, 1..10000000", func(s *SaleSpec) { s.Stock = i64(MaxStock + 1) }},
		{"buckets min", "", func(s *SaleSpec) { s.Buckets = num(MinBuckets) }},
		{"buckets max", "", func(s *SaleSpec) { s.Buckets = num(MaxBuckets) }},
		{"buckets 0", "buckets: 1..1024", func(s *SaleSpec) { s.Buckets = num(0) }},
		{"buckets past max", "buckets: 1..1024", func(s *SaleSpec) { s.Buckets = num(MaxBuckets + 1) }},
		{"starts_at missing", "starts_at: required, RFC 3339", func(s *SaleSpec) { s.StartsAt = nil }},
		{"ends_at missing", "ends_at: required, RFC 3339", func(s *SaleSpec) { s.EndsAt = nil }},
		{"ends_at at starts_at", "ends_at: must be after starts_at", func(s *SaleSpec) { s.EndsAt = s.StartsAt }},
		{"window min", "", func(s *SaleSpec) { s.PaymentWindowSeconds = num(MinPaymentWindowSeconds) }},
		{"window max", "", func(s *SaleSpec) { s.PaymentWindowSeconds = num(MaxPaymentWindowSeconds) }},
		{"window 0", "payment_window_seconds: 1..86400", func(s *SaleSpec) { s.PaymentWindowSeconds = num(0) }},
		{"window past max", "payment_window_seconds: 1..86400", func(s *SaleSpec) { s.PaymentWindowSeconds = num(MaxPaymentWindowSeconds + 1) }},
		{"per_user_limit 2", "per_user_limit: only 1 is supported", func(s *SaleSpec) { s.PerUserLimit = num(2) }},
		{"difficulty 0", "", func(s *SaleSpec) { s.ChallengeDifficulty = i64(0) }},
		{"difficulty max", "", func(s *SaleSpec) { s.ChallengeDifficulty = i64(MaxChallengeDifficulty) }},
		{"difficulty negative", "challenge_difficulty: 0..10000000", func(s *SaleSpec) { s.ChallengeDifficulty = i64(-1) }},
		{"difficulty past max", "challenge_difficulty: 0..10000000", func(s *SaleSpec) { s.ChallengeDifficulty = i64(MaxChallengeDifficulty + 1) }},
	} {
		spec := validSpec()
		tc.edit(&spec)
		s, err := NewSale(spec)
		if tc.msg == "" {
			if err != nil || s == nil {
				t.Errorf("%s: refused: %v", tc.name, err)
			}
			continue
		}
		if s != nil || ErrorCode(err) != EInvalid || ErrorMessage(err) != tc.msg {
			t.Errorf("%s: got %v (sale %v), want %s: %s", tc.name, err, s != nil, EInvalid, tc.msg)
		}
	}
}

func TestStockChangeBounds(t *testing.T) {
	const msg = "delta: required, a non-zero integer within -10000000..10000000"
	for _, tc := range []struct {
		delta *int64
		ok    bool
	}{
		{nil, false}, {ptr(0), false}, {ptr(1), true}, {ptr(-1), true},
		{ptr(MaxStock), true}, {ptr(-MaxStock), true}, {ptr(MaxStock + 1), false}, {ptr(-MaxStock - 1), false},
	} {
		err := (&StockChange{Delta: tc.delta}).Validate()
		if tc.ok != (err == nil) || (err != nil && (ErrorCode(err) != EInvalid || ErrorMessage(err) != msg)) {
			t.Errorf("delta %v: got %v, want accepted %v", deref(tc.delta), err, tc.ok)
		}
	}

	if err := CheckStockTotal(MaxStock-5, 5); err != nil {
		t.Errorf("up to the max: %v", err)
	}
	if err := CheckStockTotal(MaxStock-5, 6); ErrorCode(err) != EInvalid || ErrorMessage(err) != "delta: the stock would exceed 10000000" {
		t.Errorf("past the max: %v", err)
	}
}

func ptr(v int64) *int64 { return &v }

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}
