package domain

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

func TestLiveIsPlacedAndNotReleased(t *testing.T) {
	for s, want := range map[ReservationStatus]bool{
		StatusQueued: false, StatusPendingPayment: true, StatusPaid: true,
		StatusExpired: false, StatusCancelled: false, StatusFailed: false, "": false, "paid": false,
	} {
		if s.Live() != want {
			t.Errorf("%q.Live() = %v", s, s.Live())
		}
	}
	byStatus := map[ReservationStatus]int64{StatusQueued: 1, StatusPendingPayment: 2, StatusPaid: 4, StatusExpired: 8, StatusCancelled: 16, StatusFailed: 32}
	if n := LiveCount(byStatus); n != 6 {
		t.Errorf("LiveCount by status = %d", n)
	}
	byName := map[string]int64{"QUEUED": 1, "PENDING_PAYMENT": 2, "PAID": 4, "EXPIRED": 8}
	if n := LiveCount(byName); n != 6 {
		t.Errorf("LiveCount by name = %d", n)
	}
	if LiveCount(map[string]int64(nil)) != 0 {
		t.Error("LiveCount of nothing")
	}
}

// The workflow's state and the client's view are conversions of the one
// reservation shape; the view hides what only the owner's workflow and
// the store need (user, payment ref, fail reason).
func TestReservationStateAndView(t *testing.T) {
	loc := time.FixedZone("UTC+8", 8*3600)
	payBy := time.Date(2026, 12, 1, 18, 0, 0, 0, loc)
	r := &Reservation{Token: "7-x", SaleID: 7, UserID: 42, RequestID: "req-00000001", Path: PathRedis,
		Status: StatusFailed, OrderNo: "o-1", AmountCents: 990, PayBy: &payBy, PaymentRef: "ref",
		FailReason: FailReasonNoStock, TokenState: TokenReleased}
	st := r.State()
	want := OrderState{Token: "7-x", SaleID: 7, UserID: 42, Status: StatusFailed, OrderNo: "o-1",
		AmountCents: 990, PaymentRef: "ref", FailReason: FailReasonNoStock}
	if st.PayBy == nil || st.PayBy.Location() != time.UTC || !st.PayBy.Equal(payBy) {
		t.Fatalf("state pay_by %v", st.PayBy)
	}
	st.PayBy = nil
	if st != want {
		t.Errorf("state %+v, want %+v", st, want)
	}
	v := r.View()
	if !reflect.DeepEqual(v, r.State().View()) {
		t.Error("a reservation's view is not its state's view")
	}
	body, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	if err := json.Unmarshal(body, &fields); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"token", "sale_id", "status", "order_no", "amount_cents", "pay_by"} {
		if _, ok := fields[k]; !ok {
			t.Errorf("view lacks %s: %s", k, body)
		}
	}
	if len(fields) != 6 {
		t.Errorf("view shows more than the contract: %s", body)
	}
	if (OrderState{Status: StatusQueued}).View().PayBy != nil {
		t.Error("a QUEUED state's view has a pay_by")
	}
}

// OrderState's JSON is in recorded histories: its names stay.
func TestOrderStateJSONNames(t *testing.T) {
	payBy := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	body, err := json.Marshal(OrderState{Token: "t", SaleID: 1, UserID: 2, Status: StatusPaid, OrderNo: "o",
		AmountCents: 3, PayBy: &payBy, PaymentRef: "p", FailReason: "f"})
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"token":"t","sale_id":1,"user_id":2,"status":"PAID","order_no":"o","amount_cents":3,"pay_by":"2026-12-01T10:00:00Z","payment_ref":"p","fail_reason":"f"}`
	if string(body) != want {
		t.Errorf("OrderState JSON\n got %s\nwant %s", body, want)
	}
}

func TestReservationsStartTwoWays(t *testing.T) {
	held := HeldReservation("7-x", 7, 42)
	if held.Status != StatusQueued || held.Path != PathRedis || held.TokenState != TokenHeld || held.UserID != 42 || held.OrderNo != "" {
		t.Errorf("held: %+v", held)
	}
	in := RedisHoldInput("7-x", 7, 42, "req-00000001")
	if in != (OrderInput{Token: "7-x", SaleID: 7, UserID: 42, RequestID: "req-00000001", Path: PathRedis}) || in.NoRedisHold() {
		t.Errorf("redis hold input: %+v", in)
	}

	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	dbIn := DatabasePathInput("7-y", 7, 43, "req-00000002")
	if !dbIn.NoRedisHold() || dbIn.Path != PathDatabase {
		t.Errorf("database path input: %+v", dbIn)
	}
	r := DatabasePathReservation(dbIn, "o-1", 990, now.Add(time.Minute), now)
	if r.Status != StatusPendingPayment || r.Path != PathDatabase || r.OrderNo != "o-1" || r.AmountCents != 990 ||
		r.PayBy == nil || !r.PayBy.Equal(now.Add(time.Minute)) || !r.CreatedAt.Equal(now) || r.RequestID != "req-00000002" {
		t.Errorf("database path reservation: %+v", r)
	}
	// A stored reservation runs again with the input it started with.
	if r.OrderInput() != dbIn {
		t.Errorf("rerun input %+v, want %+v", r.OrderInput(), dbIn)
	}
	stored := &Reservation{Token: "7-x", SaleID: 7, UserID: 42, RequestID: "req-00000001", Path: PathRedis}
	if stored.OrderInput() != in {
		t.Errorf("rerun input %+v, want %+v", stored.OrderInput(), in)
	}
}

// "No Redis hold" has two encodings in recorded inputs; one decision reads both.
func TestNoRedisHoldReadsBothEncodings(t *testing.T) {
	for body, want := range map[string]bool{
		`{"token":"t","path":"redis","deducted":false}`:   false,
		`{"token":"t","path":"redis"}`:                    false,
		`{"token":"t","path":"database","deducted":true}`: true,
		`{"token":"t","path":"database"}`:                 true,
		`{"token":"t","deducted":true}`:                   true,
	} {
		var in OrderInput
		if err := json.Unmarshal([]byte(body), &in); err != nil {
			t.Fatal(err)
		}
		if in.NoRedisHold() != want {
			t.Errorf("%s: NoRedisHold %v", body, in.NoRedisHold())
		}
	}
}

// A payment for a reservation that no longer takes one is refunded, with
// the reason its status gives; the ref that paid it is a replay, and a live
// reservation still takes it.
func TestRefundReason(t *testing.T) {
	for _, tc := range []struct {
		status ReservationStatus
		ref    string
		want   string
	}{
		{StatusPaid, "paid-ref", ""},
		{StatusPaid, "other", ReasonDuplicate},
		{StatusExpired, "x", ReasonExpired},
		{StatusCancelled, "x", ReasonCancelled},
		{StatusFailed, "x", ReasonFailed},
		{StatusPendingPayment, "x", ""},
		{StatusQueued, "x", ""},
	} {
		r := &Reservation{Status: tc.status, PaymentRef: "paid-ref"}
		if got := r.RefundReason(tc.ref); got != tc.want {
			t.Errorf("%s with ref %s: %q, want %q", tc.status, tc.ref, got, tc.want)
		}
	}
}
