package domain

import "time"

// Refund reasons, stored and answered.
const (
	ReasonExpired   = "reservation_expired"
	ReasonCancelled = "reservation_cancelled"
	ReasonFailed    = "reservation_failed"
	ReasonDuplicate = "duplicate_payment"
)

// StatusRefundRequired is RefundRequired.Status.
const StatusRefundRequired = "REFUND_REQUIRED"

// RefundRequired is the payment webhook's answer to a payment that must be
// given back: it never became a sale.
type RefundRequired struct {
	Status            string            `json:"status"` // always "REFUND_REQUIRED"
	Token             string            `json:"token"`
	SaleID            int64             `json:"sale_id"`
	PaymentRef        string            `json:"payment_ref"`
	AmountCents       int64             `json:"amount_cents"`
	Reason            string            `json:"reason"`
	ReservationStatus ReservationStatus `json:"reservation_status"`
	RefundID          int64             `json:"refund_id"`
	RecordedAt        time.Time         `json:"recorded_at"`
}

// RefundReason is why a payment ref for r must be given back: "" when r
// still takes a payment or ref already paid it (a replay).
func (r *Reservation) RefundReason(ref string) string {
	switch r.Status {
	case StatusPaid:
		if r.PaymentRef == ref {
			return ""
		}
		return ReasonDuplicate
	case StatusExpired:
		return ReasonExpired
	case StatusCancelled:
		return ReasonCancelled
	case StatusFailed:
		return ReasonFailed
	}
	return ""
}
