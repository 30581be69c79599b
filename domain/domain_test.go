package domain

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestStatusClasses(t *testing.T) {
	for _, tc := range []struct {
		s                     ReservationStatus
		terminal, holds, live bool
		token                 string
	}{
		{StatusQueued, false, true, false, TokenHeld},
		{StatusPendingPayment, false, true, true, TokenOrdered},
		{StatusPaid, true, true, true, TokenPaid},
		{StatusExpired, true, false, false, TokenReleased},
		{StatusCancelled, true, false, false, TokenReleased},
		{StatusFailed, true, false, false, TokenReleased},
	} {
		if tc.s.Terminal() != tc.terminal || tc.s.HoldsUnit() != tc.holds || tc.s.Live() != tc.live || tc.s.TokenState() != tc.token || !tc.s.Valid() {
			t.Errorf("%s: terminal %v holds %v live %v token %q valid %v", tc.s, tc.s.Terminal(), tc.s.HoldsUnit(), tc.s.Live(), tc.s.TokenState(), tc.s.Valid())
		}
	}
	for _, s := range []ReservationStatus{"", "queued", "REFUND_REQUIRED"} {
		if s.Valid() || s.Terminal() || s.HoldsUnit() || s.Live() || s.TokenState() != "" {
			t.Errorf("%q counted as a contract status", s)
		}
	}
}

// The lifecycle is the contract's: QUEUED -> PENDING_PAYMENT -> PAID |
// EXPIRED | CANCELLED and QUEUED -> FAILED | CANCELLED; every status is in
// the table, and from each one every status is reached at most once on
// any path (no cycles).
func TestLifecycleIsTheContracts(t *testing.T) {
	want := map[ReservationStatus][]ReservationStatus{
		StatusQueued:         {StatusPendingPayment, StatusFailed, StatusCancelled},
		StatusPendingPayment: {StatusPaid, StatusExpired, StatusCancelled},
	}
	for _, s := range AllStatuses {
		if got := s.Next(); fmt.Sprint(got) != fmt.Sprint(want[s]) {
			t.Errorf("%s moves to %v, want %v", s, got, want[s])
		}
	}
	var walk func(s ReservationStatus, seen map[ReservationStatus]bool)
	walk = func(s ReservationStatus, seen map[ReservationStatus]bool) {
		if seen[s] {
			t.Fatalf("the lifecycle comes back to %s", s)
		}
		seen[s] = true
		for _, n := range s.Next() {
			walk(n, seen)
		}
		delete(seen, s)
	}
	walk(StatusQueued, map[ReservationStatus]bool{})
	if len(lifecycle) != len(AllStatuses) {
		t.Errorf("lifecycle has %d statuses, the contract %d", len(lifecycle), len(AllStatuses))
	}
}

func TestSaleState(t *testing.T) {
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	s := &Sale{StartsAt: start, EndsAt: start.Add(time.Hour), Control: ControlActive}
	for _, tc := range []struct {
		name    string
		now     time.Time
		left    int64
		control SaleControl
		want    SaleState
	}{
		{"before the start", start.Add(-time.Second), 5, ControlActive, StateUpcoming},
		{"at the start", start, 5, ControlActive, StateLive},
		{"paused is still live to the view", start, 5, ControlPaused, StateLive},
		{"no stock", start, 0, ControlActive, StateSoldOut},
		{"at the end", start.Add(time.Hour), 5, ControlActive, StateEnded},
		{"stopped", start, 5, ControlStopped, StateEnded},
		{"stopped before the start", start.Add(-time.Minute), 5, ControlStopped, StateEnded},
	} {
		s.Control = tc.control
		if got := s.StateAt(tc.now, tc.left); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestViewsClampAndUseUTC(t *testing.T) {
	loc := time.FixedZone("UTC+8", 8*3600)
	start := time.Date(2026, 12, 1, 18, 0, 0, 0, loc)
	s := &Sale{ID: 7, StockTotal: 3, StartsAt: start, EndsAt: start.Add(time.Hour), PaymentWindowSeconds: 90}
	v := s.View(start, -2, 0)
	if v.StockLeft != 0 || v.State != StateSoldOut || v.StartsAt.Location() != time.UTC || !v.StartsAt.Equal(start) {
		t.Errorf("sale view: %+v", v)
	}
	if s.PaymentWindow() != 90*time.Second {
		t.Errorf("payment window: %v", s.PaymentWindow())
	}
	payBy := start.Add(time.Minute)
	r := &Reservation{Token: "7-x", SaleID: 7, Status: StatusPendingPayment, PayBy: &payBy, PaymentRef: "secret-ref"}
	rv := r.View()
	if rv.PayBy == nil || rv.PayBy.Location() != time.UTC || !rv.PayBy.Equal(payBy) || r.PayBy.Location() != loc {
		t.Errorf("reservation view pay_by %v (source %v)", rv.PayBy, r.PayBy)
	}
	if (&Reservation{Status: StatusQueued}).View().PayBy != nil {
		t.Error("a QUEUED view has a pay_by")
	}
}

func TestErrorCodeAndMessage(t *testing.T) {
	biz := fmt.Errorf("reserve: %w", Errorf(ESoldOut, "sale %d is sold out", 3))
	if ErrorCode(biz) != ESoldOut || ErrorMessage(biz) != "sale 3 is sold out" {
		t.Errorf("wrapped business error: %q %q", ErrorCode(biz), ErrorMessage(biz))
	}
	internal := errors.New("dial tcp 10.0.0.1:3306: secret detail")
	if ErrorCode(internal) != EInternal || strings.Contains(ErrorMessage(internal), "secret") {
		t.Errorf("internal error leaks: %q %q", ErrorCode(internal), ErrorMessage(internal))
	}
	if ErrorCode(nil) != "" {
		t.Errorf("nil error has code %q", ErrorCode(nil))
	}
}

func TestTokensAreDerivedAndParsed(t *testing.T) {
	key := []byte("k")
	tok := DeriveToken(key, 42, 7, "req-00000001")
	if tok != DeriveToken(key, 42, 7, "req-00000001") {
		t.Fatal("derivation is not deterministic")
	}
	for _, other := range []string{
		DeriveToken(key, 42, 7, "req-00000002"),
		DeriveToken(key, 42, 8, "req-00000001"),
		DeriveToken(key, 43, 7, "req-00000001"),
		DeriveToken([]byte("k2"), 42, 7, "req-00000001"),
		// The separator keeps (4, 27) and (42, 7) apart.
		DeriveToken(key, 4, 27, "req-00000001"),
	} {
		if other == tok {
			t.Errorf("two reservations share token %s", tok)
		}
	}
	if id, ok := ParseToken(tok); !ok || id != 42 {
		t.Errorf("ParseToken(%s) = %d, %v", tok, id, ok)
	}
	mac := strings.Repeat("a", 32)
	for _, bad := range []string{"", "42", "42-", "042-" + mac, "0-" + mac, "-1-" + mac, "42-" + mac[:31], "42-" + strings.Repeat("A", 32),
		"99999999999999999999-" + mac, "42-" + mac + "0", "x-" + mac} {
		if _, ok := ParseToken(bad); ok {
			t.Errorf("ParseToken accepted %q", bad)
		}
	}
}

// A token is the same bytes whichever way it is derived, and the same as
// every release derived (Redis and MySQL hold them): HMAC-SHA256 of
// "sale|user|request_id", its first 16 bytes in hex (the vector is
// openssl dgst -sha256 -hmac k's), and at the extremes of the ids and the
// request id's length.
func TestTokensKeepTheirBytes(t *testing.T) {
	longest := strings.Repeat("abcdefghij", 6) + "0123"
	tokens := NewTokens([]byte("k"))
	for _, tc := range []struct {
		sale, user int64
		req, want  string
	}{
		{42, 7, "req-00000001", "42-95d71d030ede6ffb9a46db83887db424"},
		{9223372036854775807, -9223372036854775808, longest, "9223372036854775807-9d27d7a6d85857066701945f87b26385"},
	} {
		if got := DeriveToken([]byte("k"), tc.sale, tc.user, tc.req); got != tc.want {
			t.Errorf("DeriveToken = %s, want %s", got, tc.want)
		}
		if got := tokens.Derive(tc.sale, tc.user, tc.req); got != tc.want {
			t.Errorf("Tokens.Derive = %s, want %s", got, tc.want)
		}
	}
}

// BenchmarkTokenDerivation: a pooled derivation (Tokens.Derive, the hot
// path's) against DeriveToken's hmac.New per call, interleaved in blocks
// of 100 in one run; pooled_vs_fresh is the pooled share of the time.
func BenchmarkTokenDerivation(b *testing.B) {
	key := []byte("a fleet token key of some length")
	tokens := NewTokens(key)
	var fresh, pooled time.Duration
	b.ReportAllocs()
	for i := range b.N {
		user := int64(i)
		t0 := time.Now()
		for j := range 100 {
			DeriveToken(key, 8_000_000_000_001, user, "req-"+strconv.Itoa(j%10)+"-000000")
		}
		t1 := time.Now()
		for j := range 100 {
			tokens.Derive(8_000_000_000_001, user, "req-"+strconv.Itoa(j%10)+"-000000")
		}
		fresh, pooled = fresh+t1.Sub(t0), pooled+time.Since(t1)
	}
	b.ReportMetric(float64(pooled)/float64(fresh), "pooled_vs_fresh")
	b.ReportMetric(float64(pooled.Nanoseconds())/float64(100*b.N), "pooled_ns")
	b.ReportMetric(float64(fresh.Nanoseconds())/float64(100*b.N), "fresh_ns")
}

func TestIDSyntax(t *testing.T) {
	for s, want := range map[string]bool{
		"abcdefgh": true, "A-b_0123": true, strings.Repeat("x", 64): true,
		"abcdefg": false, strings.Repeat("x", 65): false, "abcd efgh": false, "abcdéfgh": false, "abcd/efg": false,
	} {
		if got := ValidRequestID(s); got != want {
			t.Errorf("ValidRequestID(%q) = %v", s, got)
		}
	}
	if !ValidPaymentRef("p") || ValidPaymentRef("") || ValidPaymentRef("p.1") {
		t.Error("payment_ref syntax")
	}
}

func TestSaleOfWorkflowIDInvertsSaleWorkflowID(t *testing.T) {
	for _, id := range []int64{1, 42, 9_000_000_000} {
		got, ok := SaleOfWorkflowID(SaleWorkflowID(id))
		if !ok || got != id {
			t.Fatalf("SaleOfWorkflowID(SaleWorkflowID(%d)) = %d, %v", id, got, ok)
		}
	}
	for _, other := range []string{"order:abc", "sale:", "sale:x", "sale:-3", "sale:0"} {
		if _, ok := SaleOfWorkflowID(other); ok {
			t.Fatalf("SaleOfWorkflowID(%q) took another workflow's id", other)
		}
	}
}
