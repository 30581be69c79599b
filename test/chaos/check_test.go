package chaos

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/test/finalstate"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

// sound is a history and final state that break nothing: sale 1 has 3 units;
// user 10 paid (API), user 11 expired and paid late by webhook (refund),
// user 12 cancelled; user 13, first on the waitlist, was handed user 12's
// unit and let it expire, while user 14 (joined later) still waited; two
// fresh users buy the two free units; users 11, 12 and 13 may reserve
// again.
func sound() ([]Event, Final) {
	h := []Event{
		{Kind: KindRequest, Op: OpReserve, T: at(1), End: at(1), Sale: 1, User: 10, RequestID: "r10", HTTP: http.StatusServiceUnavailable, Code: "unavailable"},
		{Kind: KindRequest, Op: OpReserve, T: at(2), End: at(2), Sale: 1, User: 10, RequestID: "r10", HTTP: http.StatusAccepted, Token: "t10"},
		{Kind: KindRequest, Op: OpReserve, T: at(2), End: at(2), Sale: 1, User: 11, RequestID: "r11", HTTP: http.StatusAccepted, Token: "t11"},
		{Kind: KindRequest, Op: OpReserve, T: at(3), End: at(3), Sale: 1, User: 12, RequestID: "r12", HTTP: http.StatusAccepted, Token: "t12"},
		{Kind: KindFault, Op: "redis-sigkill", T: at(4), FaultID: 1, Target: "redis"},
		{Kind: KindHeal, Op: "redis-sigkill", T: at(8), FaultID: 1, Target: "redis"},
		{Kind: KindRequest, Op: OpGet, T: at(4), End: at(4), Sale: 1, User: 10, Token: "t10", HTTP: http.StatusOK, Status: "PENDING_PAYMENT"},
		{Kind: KindRequest, Op: OpPay, T: at(5), End: at(5), Sale: 1, User: 10, Token: "t10", PayRef: "p10", HTTP: http.StatusOK, Status: "PAID"},
		{Kind: KindRequest, Op: OpCancel, T: at(6), End: at(6), Sale: 1, User: 12, Token: "t12", HTTP: http.StatusOK, Status: "CANCELLED"},
		// User 12, free again, buys once more and cancels.
		{Kind: KindRequest, Op: OpReserve, T: at(7), End: at(7), Sale: 1, User: 12, RequestID: "r12b", HTTP: http.StatusAccepted, Token: "t12b"},
		{Kind: KindRequest, Op: OpCancel, T: at(8), End: at(8), Sale: 1, User: 12, Token: "t12b", HTTP: http.StatusOK, Status: "CANCELLED"},
		{Kind: KindRequest, Op: OpWebhook, T: at(30), End: at(30), Sale: 1, User: 11, Token: "t11", PayRef: "p11", HTTP: http.StatusServiceUnavailable},
		{Kind: KindRequest, Op: OpWebhook, T: at(31), End: at(31), Sale: 1, User: 11, Token: "t11", PayRef: "p11", HTTP: http.StatusOK, Status: "REFUND_REQUIRED"},
		{Kind: KindProbe, Op: OpProbeFresh, T: at(100), Sale: 1, User: 90, HTTP: http.StatusAccepted, Token: "t90"},
		{Kind: KindProbe, Op: OpProbeFresh, T: at(100), Sale: 1, User: 91, HTTP: http.StatusAccepted, Token: "t91"},
		{Kind: KindProbe, Op: OpProbeFresh, T: at(100), Sale: 1, User: 92, HTTP: http.StatusGone, Code: "sold_out"},
		{Kind: KindProbe, Op: OpProbeAgain, T: at(101), Sale: 1, User: 11, HTTP: http.StatusGone, Code: "sold_out"},
		{Kind: KindProbe, Op: OpProbeAgain, T: at(101), Sale: 1, User: 12, HTTP: http.StatusGone, Code: "sold_out"},
		{Kind: KindProbe, Op: OpProbeAgain, T: at(101), Sale: 1, User: 13, HTTP: http.StatusGone, Code: "sold_out"},
	}
	f := Final{At: at(99), WaitlistsAt: at(40), Sales: []SaleState{{Sale: finalstate.Sale{
		SaleID: 1, StockTotal: 3, WindowSeconds: 10, BucketStock: 2, RedisStock: 2, RedisBuyers: []int64{10},
		Reservations: []finalstate.Reservation{
			{Token: "t10", UserID: 10, RequestID: "r10", Status: domain.StatusPaid, OrderStatus: domain.StatusPaid, PaymentRef: "p10", PayBy: at(12)},
			{Token: "t11", UserID: 11, RequestID: "r11", Status: domain.StatusExpired, OrderStatus: domain.StatusExpired, PayBy: at(12)},
			{Token: "t12", UserID: 12, RequestID: "r12", Status: domain.StatusCancelled, OrderStatus: domain.StatusCancelled, PayBy: at(13), UpdatedAt: at(6)},
			{Token: "t12b", UserID: 12, RequestID: "r12b", Status: domain.StatusCancelled, OrderStatus: domain.StatusCancelled, PayBy: at(14), UpdatedAt: at(8)},
			{Token: "t13", UserID: 13, RequestID: domain.WaitlistRequestID(1), Status: domain.StatusExpired, OrderStatus: domain.StatusExpired, PayBy: at(17), CreatedAt: at(7)},
		},
		Orders:    map[string]int{"t10": 1, "t11": 1, "t12": 1, "t12b": 1, "t13": 1},
		Deducts:   map[string]int{"t10": 1, "t11": 1, "t12": 1, "t12b": 1, "t13": 1},
		Refunds:   []finalstate.Refund{{Token: "t11", PaymentRef: "p11"}},
		Workflows: map[string]finalstate.Workflow{"order:t10": {Runs: 1}, "order:t11": {Runs: 1}, "order:t12": {Runs: 1}, "order:t12b": {Runs: 1}, "order:t13": {Runs: 1}}},
		Waiting:         map[int64]int64{14: 2},
		ReconConsistent: true,
	}}}
	return h, f
}

func invariantsOf(vs []Violation) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Invariant)
	}
	return out
}

func TestSoundRunBreaksNothing(t *testing.T) {
	h, f := sound()
	// Later, api1 is cut from Redis while api2 keeps answering (sold
	// out), and the Redis kill of the history moved the sale once.
	h = append(h, cutAPI1(at(300), at(320))...)
	h = append(h, reserves(2, 60, at(270), 500*time.Millisecond, http.StatusGone)...)
	h = append(h, reserves(2, 40, at(300), 500*time.Millisecond, http.StatusGone)...)
	moved := modeNote(1, "redis", "database", 2)
	moved.T = at(6)
	h = append(h, moved)
	vs, checked := Check(h, f)
	assert.Empty(t, vs)
	for _, inv := range Invariants {
		assert.Positive(t, checked[inv], "%s examined nothing", inv)
	}
}

// Each doctored run breaks exactly the invariant it names: the checker can
// fail on every one.
func TestEachInvariantCanFail(t *testing.T) {
	for _, tc := range append(stockDoctors(), settlementDoctors()...) {
		t.Run(tc.name, func(t *testing.T) {
			h, f := sound()
			tc.doctor(&h, &f)
			vs, _ := Check(h, f)
			require.NotEmpty(t, vs, "the doctored run must break %s", tc.want)
			assert.Contains(t, invariantsOf(vs), tc.want, "%v", vs)
		})
	}
}

// doctoredRun is a sound run changed to break one invariant.
type doctoredRun struct {
	name   string
	want   string
	doctor func(h *[]Event, f *Final)
}

// stockDoctors break the stock and the 202 promise.
func stockDoctors() []doctoredRun {
	return []doctoredRun{
		{"oversold: more live reservations than units", IOversold, func(_ *[]Event, f *Final) {
			s := &f.Sales[0]
			s.StockTotal = 1 // t10 paid, and t12 pending, for one unit
			s.Reservations[2].Status, s.Reservations[2].OrderStatus = domain.StatusPendingPayment, domain.StatusPendingPayment
		}},
		{"oversold: one token deducted twice", IOversold, func(_ *[]Event, f *Final) {
			f.Sales[0].Deducts["t10"] = 2
		}},
		{"oversold: a user holds two units", IOversold, func(_ *[]Event, f *Final) {
			s := &f.Sales[0]
			s.Reservations = append(s.Reservations, finalstate.Reservation{Token: "t10b", UserID: 10, Status: domain.StatusPaid, OrderStatus: domain.StatusPaid})
			s.Workflows["order:t10b"] = finalstate.Workflow{Runs: 1}
			s.StockTotal = 4
			s.BucketStock = 1
		}},
		{"a 202 still QUEUED: a stuck hold", IAcceptedEnded, func(_ *[]Event, f *Final) {
			f.Sales[0].Reservations[1].Status = domain.StatusQueued
			f.Sales[0].Reservations[1].OrderStatus = ""
			f.Sales[0].Reservations[1].PayBy = time.Time{}
			f.Sales[0].StockTotal = 4 // keep the unit counts balanced
			f.Sales[0].BucketStock = 2
		}},
		{"a 202 without a reservation", IAcceptedEnded, func(_ *[]Event, f *Final) {
			s := &f.Sales[0]
			s.Reservations = s.Reservations[:2]
			delete(s.Workflows, "order:t12")
		}},
		{"a 202 FAILED", IAcceptedEnded, func(_ *[]Event, f *Final) {
			f.Sales[0].Reservations[2].Status, f.Sales[0].Reservations[2].OrderStatus = domain.StatusFailed, domain.StatusFailed
		}},
	}
}

// settlementDoctors break payments, fresh stock, free users, workflows,
// reconciliation and the waitlist's order.
func settlementDoctors() []doctoredRun {
	return []doctoredRun{
		{"a payment in the window refused as not payable", IPayInWindow, func(h *[]Event, f *Final) {
			s := &f.Sales[0]
			s.Reservations[0].Status, s.Reservations[0].OrderStatus, s.Reservations[0].PaymentRef = domain.StatusExpired, domain.StatusExpired, ""
			s.BucketStock, s.RedisStock = 3, 3
			for i := range *h {
				if (*h)[i].Op == OpPay {
					(*h)[i].HTTP, (*h)[i].Code, (*h)[i].Status = http.StatusConflict, "not_payable", ""
				}
			}
		}},
		{"a confirmed payment neither paid nor refunded", IPaymentSettled, func(_ *[]Event, f *Final) {
			f.Sales[0].Refunds = nil
		}},
		{"an API payment confirmed but the order expired", IPaymentSettled, func(_ *[]Event, f *Final) {
			s := &f.Sales[0]
			s.Reservations[0].Status, s.Reservations[0].OrderStatus = domain.StatusExpired, domain.StatusExpired
			s.Reservations[0].PaymentRef = ""
			s.BucketStock = 3
			s.RedisStock = 3
			s.StockTotal = 3
		}},
		{"a webhook that never got a 200", IPaymentSettled, func(h *[]Event, _ *Final) {
			*h = append(*h, Event{Kind: KindProbe, Op: OpProbeWebhook, T: at(102), Sale: 1, User: 11, Token: "t11", PayRef: "p11", HTTP: http.StatusServiceUnavailable, Code: "unavailable"})
		}},
		{"stranded stock: fresh users buy fewer units than are free", IFreshStock, func(h *[]Event, _ *Final) {
			*h = dropProbes(*h, OpProbeFresh)
			*h = append(*h,
				Event{Kind: KindProbe, Op: OpProbeFresh, Sale: 1, User: 90, HTTP: http.StatusAccepted, Token: "t90"},
				Event{Kind: KindProbe, Op: OpProbeFresh, Sale: 1, User: 91, HTTP: http.StatusGone, Code: "sold_out"})
		}},
		{"a sale that never sells again", IFreshStock, func(h *[]Event, _ *Final) {
			*h = dropProbes(*h, OpProbeFresh)
			*h = append(*h, Event{Kind: KindProbe, Op: OpProbeFresh, Sale: 1, User: 90, HTTP: http.StatusServiceUnavailable, Code: "unavailable"})
		}},
		{"a stranded user: 409 after every reservation ended", IUserFree, func(h *[]Event, _ *Final) {
			*h = dropProbes(*h, OpProbeAgain)
			*h = append(*h,
				Event{Kind: KindProbe, Op: OpProbeAgain, Sale: 1, User: 11, HTTP: http.StatusGone, Code: "sold_out"},
				Event{Kind: KindProbe, Op: OpProbeAgain, Sale: 1, User: 12, HTTP: http.StatusConflict, Code: "already_purchased"})
		}},
		{"a terminated workflow: a reservation without a running workflow past its window", IOneWorkflow, func(_ *[]Event, f *Final) {
			f.Sales[0].Workflows["order:t11"] = finalstate.Workflow{Runs: 1, Running: 1}
		}},
		{"a terminated workflow: a live reservation whose workflow is closed", IOneWorkflow, func(_ *[]Event, f *Final) {
			s := &f.Sales[0]
			s.Reservations[1].Status, s.Reservations[1].OrderStatus = domain.StatusPendingPayment, domain.StatusPendingPayment
			s.StockTotal, s.BucketStock = 4, 2
		}},
		{"a reservation without a workflow", IOneWorkflow, func(_ *[]Event, f *Final) {
			delete(f.Sales[0].Workflows, "order:t12")
		}},
		{"two runs at once", IOneWorkflow, func(_ *[]Event, f *Final) {
			f.Sales[0].Workflows["order:t10"] = finalstate.Workflow{Runs: 2, Running: 2}
		}},
		{"reconciliation disagrees", IReconciliation, func(_ *[]Event, f *Final) {
			f.Sales[0].ReconDiscrepancies = []string{"redis_mark_without_order user 12"}
		}},
		{"a run without a single 202 proves nothing", IAcceptedEnded, func(h *[]Event, _ *Final) {
			var kept []Event
			for _, e := range *h {
				if e.Op != OpReserve {
					kept = append(kept, e)
				}
			}
			*h = kept
		}},
		{"a later waiter served first", IWaitlistFIFO, func(_ *[]Event, f *Final) {
			f.Sales[0].Waiting = map[int64]int64{14: 2, 15: 0}
		}},
		{"a later waiter served first, beside a hand-over whose removal was lost", IWaitlistFIFO, func(_ *[]Event, f *Final) {
			f.Sales[0].Waiting = map[int64]int64{13: 1, 15: 0}
		}},
		{"reconciliation unreachable", IReconciliation, func(_ *[]Event, f *Final) {
			f.Sales[0].ReconErr = "503"
		}},
	}
}

// A FAILED 202 is a violation whatever the fault: a write-losing one on
// its sale (or all sales) right after its request excuses nothing, since
// the database decided the 202.
func TestFailedAfterWriteLossIsAViolation(t *testing.T) {
	for _, fault := range []Event{
		{Kind: KindFault, Op: FRedisAOFLoss, T: at(4), FaultID: 3, WritesLost: true},
		{Kind: KindFault, Op: FRedisKeysDeleted, T: at(20), FaultID: 3, Sale: 1, WritesLost: true},
		{Kind: KindFault, Op: FRedisFailover, T: at(4), FaultID: 3, WritesLost: true},
	} {
		h, f := sound()
		f.Sales[0].Reservations[2].Status, f.Sales[0].Reservations[2].OrderStatus = domain.StatusFailed, domain.StatusFailed
		h = append(h, fault)
		vs, _ := Check(h, f)
		assert.Equal(t, []string{IAcceptedEnded}, invariantsOf(vs), fault.Op)
	}
}

// A second 202 to a user whose earlier 202's reservation was still live
// (a Redis that lost the user's mark, overruled by nobody) is a violation;
// one after the earlier reservation ended is not.
func TestASecondHoldWhileTheFirstIsLiveIsAViolation(t *testing.T) {
	h, f := sound()
	h = append(h, Event{Kind: KindRequest, Op: OpReserve, T: at(3), End: at(3), Sale: 1, User: 10, RequestID: "r10-again", HTTP: http.StatusAccepted, Token: "t10b"})
	f.Sales[0].Reservations[0].UpdatedAt = at(5)
	f.Sales[0].Reservations = append(f.Sales[0].Reservations, finalstate.Reservation{Token: "t10b", UserID: 10, RequestID: "r10-again", Status: domain.StatusCancelled, UpdatedAt: at(4)})
	f.Sales[0].Workflows["order:t10b"] = finalstate.Workflow{Runs: 1}
	vs, _ := Check(h, f)
	assert.Contains(t, invariantsOf(vs), IOneHold, "t10 was live (paid) when t10b was answered")

	// User 12 cancelled t12 at 6 and bought again at 7: allowed.
	h, f = sound()
	h = append(h, Event{Kind: KindRequest, Op: OpReserve, T: at(7), End: at(7), Sale: 1, User: 12, RequestID: "r12-again", HTTP: http.StatusAccepted, Token: "t12b"})
	f.Sales[0].Reservations[2].UpdatedAt = at(6)
	f.Sales[0].Reservations = append(f.Sales[0].Reservations, finalstate.Reservation{Token: "t12b", UserID: 12, RequestID: "r12-again", Status: domain.StatusCancelled, UpdatedAt: at(8)})
	f.Sales[0].Workflows["order:t12b"] = finalstate.Workflow{Runs: 1}
	vs, _ = Check(h, f)
	assert.NotContains(t, invariantsOf(vs), IOneHold)
}

func TestSpansPairFaultsAndHeals(t *testing.T) {
	h, _ := sound()
	sp := Spans(h)
	require.Len(t, sp, 1)
	assert.Equal(t, "redis-sigkill", sp[0].Class)
	assert.Equal(t, 4*time.Second, sp[0].To.Sub(sp[0].From))
}

func TestScheduleIsDeterministicPerSeed(t *testing.T) {
	classes := AllFaults
	a := Schedule(42, 10*time.Minute, classes)
	b := Schedule(42, 10*time.Minute, classes)
	c := Schedule(43, 10*time.Minute, classes)
	assert.Equal(t, a, b)
	assert.NotEqual(t, a, c)
	seen := map[string]bool{}
	for _, p := range a {
		seen[p.Class] = true
		if lo, _ := spanRange(p.Class, 10*time.Minute); lo > 0 {
			assert.Positive(t, p.Span, "#%d %s", p.ID, p.Class) // an instant one (keys deleted, a terminate) may take 0
		}
	}
	for _, cl := range classes {
		assert.True(t, seen[cl], "a long run injects %s at least once", cl)
	}
}

func dropProbes(h []Event, op string) []Event {
	var out []Event
	for _, e := range h {
		if e.Op != op {
			out = append(out, e)
		}
	}
	return out
}

// A waiter still listed whose own hand-over is recorded (Redis lost the
// removal with its last second of writes) is not one the queue skipped.
func TestWaitlistHandOverWhoseRemovalWasLost(t *testing.T) {
	h, f := sound()
	f.Sales[0].Waiting = map[int64]int64{13: 1, 14: 2}
	vs, _ := Check(h, f)
	assert.Empty(t, vs)
}
