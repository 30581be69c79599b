package domain

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill/internal/keyedmac"
)

// The order workflow's public contract: names, ids, inputs and results that
// the API, the worker, the relay and operators share.
const (
	// TaskQueue is the one task queue of seckill's workers.
	TaskQueue = "seckill"

	// OrderWorkflowName is the type orders start under. It runs the
	// order-steps-folded commands without a version marker, so an order
	// records no marker and no TemporalChangeVersion upsert.
	OrderWorkflowName = "OrderWorkflowV2"
	// OrderWorkflowV1Name is the type earlier releases started orders
	// under; workers still run it, for those workflows and for starts from
	// a process of an earlier release during a deploy.
	OrderWorkflowV1Name = "OrderWorkflow"
	// SaleWorkflowName is the type sales start under: the newest branch of
	// every change, without version markers (see OrderWorkflowName).
	SaleWorkflowName = "SaleWorkflowV2"
	// SaleWorkflowV1Name is the type earlier releases started sales under;
	// workers still run it, for those chains (they continue as it) and for
	// starts from a process of an earlier release during a deploy.
	SaleWorkflowV1Name = "SaleWorkflow"

	// Updates of OrderWorkflow. The update id of "pay" is the payment_ref, so
	// Temporal deduplicates a repeated payment as well.
	UpdatePay    = "pay"
	UpdateCancel = "cancel"
	UpdateExpire = "expire"

	// QueryStatus answers the reservation's OrderState.
	QueryStatus = "status"

	// Search attributes, registered by the dev server at start.
	SearchAttrSaleID      = "SaleId"
	SearchAttrUserID      = "UserId"
	SearchAttrOrderStatus = "OrderStatus"
)

// OrderWorkflowID names the one workflow of a reservation token.
func OrderWorkflowID(token string) string { return orderWorkflowPrefix + token }

// TokenOfOrderWorkflowID is OrderWorkflowID's inverse; false for the id of
// another workflow.
func TokenOfOrderWorkflowID(id string) (string, bool) {
	token, ok := strings.CutPrefix(id, orderWorkflowPrefix)
	return token, ok && token != ""
}

const orderWorkflowPrefix = "order:"

// SaleWorkflowID names the one workflow of a sale.
func SaleWorkflowID(saleID int64) string { return saleWorkflowPrefix + strconv.FormatInt(saleID, 10) }

// SaleOfWorkflowID is SaleWorkflowID's inverse; false for the id of
// another workflow.
func SaleOfWorkflowID(id string) (int64, bool) {
	n, ok := strings.CutPrefix(id, saleWorkflowPrefix)
	if !ok {
		return 0, false
	}
	saleID, err := strconv.ParseInt(n, 10, 64)
	return saleID, err == nil && saleID > 0
}

const saleWorkflowPrefix = "sale:"

// OrderInput starts an OrderWorkflow. Build it with RedisHoldInput,
// DatabasePathInput or Reservation.OrderInput.
type OrderInput struct {
	Token     string          `json:"token"`
	SaleID    int64           `json:"sale_id"`
	UserID    int64           `json:"user_id"`
	RequestID string          `json:"request_id"`
	Path      ReservationPath `json:"path"`
	// Deducted is the older encoding of Path == PathDatabase (the database
	// path deducted the unit and placed the order in its own transaction).
	// Inputs in recorded histories and from processes of earlier releases
	// may carry either, so it stays in the JSON and DatabasePathInput
	// still sets it; only NoRedisHold reads it.
	Deducted bool `json:"deducted"`
}

// RedisHoldInput starts the workflow of a reservation the reserve script
// took in Redis: a hold, recorded QUEUED by the workflow, which then
// places its order.
func RedisHoldInput(token string, saleID, userID int64, requestID string) OrderInput {
	return OrderInput{Token: token, SaleID: saleID, UserID: userID, RequestID: requestID, Path: PathRedis}
}

// DatabasePathInput starts the workflow of a reservation the database path
// took (DatabasePathReservation): the order exists, there is no Redis hold.
func DatabasePathInput(token string, saleID, userID int64, requestID string) OrderInput {
	return OrderInput{Token: token, SaleID: saleID, UserID: userID, RequestID: requestID, Path: PathDatabase, Deducted: true}
}

// NoRedisHold reports whether the reservation started without a Redis
// hold (the database path took it). It is the one place that reads both
// encodings of that fact: Path, and the older Deducted.
func (in OrderInput) NoRedisHold() bool {
	return in.Path == PathDatabase || in.Deducted
}

// OrderState is what the status query and the updates answer: the order
// workflow's form of a Reservation (Reservation.State), its JSON recorded
// in histories, so its field names stay.
type OrderState struct {
	Token       string            `json:"token"`
	SaleID      int64             `json:"sale_id"`
	UserID      int64             `json:"user_id"`
	Status      ReservationStatus `json:"status"`
	OrderNo     string            `json:"order_no,omitempty"`
	AmountCents int64             `json:"amount_cents"`
	PayBy       *time.Time        `json:"pay_by,omitempty"`
	PaymentRef  string            `json:"payment_ref,omitempty"`
	FailReason  string            `json:"fail_reason,omitempty"`
}

// PayRequest is the argument of the pay update.
type PayRequest struct {
	PaymentRef string `json:"payment_ref"`
	// ReceivedAt is when the API received the payment: one received by
	// pay_by is accepted a little after it (the workflow's grace).
	ReceivedAt time.Time `json:"received_at,omitzero"`
}

// CancelRequest is the argument of the cancel and expire updates.
type CancelRequest struct {
	Reason string `json:"reason,omitempty"`
}

// Fail reasons stored with a FAILED reservation.
const (
	// FailReasonNoStock: the database had no unit for the hold, so Redis
	// must not get one back when it is released.
	FailReasonNoStock = "no_stock"
	// FailReasonAlreadyPurchased: the user's unit is another order's; this
	// hold's unit was never sold and goes back on sale.
	FailReasonAlreadyPurchased = "already_purchased"
	// FailReasonRefusedHolder and FailReasonRefusedSoldOut: the database
	// refused a hold Redis had granted (Redis had lost writes: a failover,
	// an AOF missing its tail) because the user already held a unit, or no
	// unit was left. The request was answered 409 or 410, never 202; the
	// row exists so that the hold's workflow releases it in Redis and a
	// replay of the request gets the same answer. A refused holder's unit
	// goes back on sale in Redis; a refused sold-out hold's does not.
	FailReasonRefusedHolder  = "refused_already_purchased"
	FailReasonRefusedSoldOut = "refused_sold_out"
)

// RefusalOf is the refusal a FAILED reservation's reason records, nil when
// the reservation was not refused when it was recorded.
func RefusalOf(status ReservationStatus, failReason string) *Error {
	if status != StatusFailed {
		return nil
	}
	switch failReason {
	case FailReasonRefusedHolder:
		return ErrAlreadyHolds
	case FailReasonRefusedSoldOut:
		return ErrSoldOut
	}
	return nil
}

// KeepsUnitOnFailure reports whether a FAILED reservation's unit exists in
// the database, so that Redis gets it back when the hold is released.
func KeepsUnitOnFailure(failReason string) bool {
	return failReason == FailReasonAlreadyPurchased || failReason == FailReasonRefusedHolder
}

// Redis token states: held -> ordered -> paid | released.
const (
	TokenHeld     = "held"
	TokenOrdered  = "ordered"
	TokenPaid     = "paid"
	TokenReleased = "released"
)

// DeriveToken derives a reservation token from (sale, user, request_id)
// under the server key, so a retry, either reservation path, the relay and a
// repair all name the same reservation and so the same workflow. The sale id
// leads the token so that a lookup knows the sale's keys without a search.
// The hot path derives through a Tokens of the key.
func DeriveToken(key []byte, saleID, userID int64, requestID string) string {
	var msg [tokenMessageCap]byte
	mac := hmac.New(sha256.New, key)
	mac.Write(tokenMessage(msg[:0], saleID, userID, requestID))
	return formatToken(saleID, mac.Sum(nil))
}

// Tokens derives DeriveToken's tokens under one key from pooled HMAC
// states: hmac.New hashes the key's pads and allocates at every call.
type Tokens struct{ macs *keyedmac.Pool }

// NewTokens derives tokens under key.
func NewTokens(key []byte) *Tokens { return &Tokens{macs: keyedmac.NewPool(key)} }

// Derive is DeriveToken under the Tokens' key.
func (t *Tokens) Derive(saleID, userID int64, requestID string) string {
	var msg [tokenMessageCap]byte
	var sum [sha256.Size]byte
	return formatToken(saleID, t.macs.Sum(sum[:0], tokenMessage(msg[:0], saleID, userID, requestID)))
}

// tokenMessageCap holds a message of two int64s and the longest request id
// on the stack.
const tokenMessageCap = 2*20 + 2 + 64

// tokenMessage appends the MAC's message "sale|user|request_id" to b.
func tokenMessage(b []byte, saleID, userID int64, requestID string) []byte {
	b = strconv.AppendInt(b, saleID, 10)
	b = append(b, '|')
	b = strconv.AppendInt(b, userID, 10)
	b = append(b, '|')
	return append(b, requestID...)
}

// formatToken is "<sale id>-<the MAC's first 16 bytes in hex>".
func formatToken(saleID int64, sum []byte) string {
	var out [20 + 1 + 32]byte
	b := strconv.AppendInt(out[:0], saleID, 10)
	b = append(b, '-')
	return string(hex.AppendEncode(b, sum[:16]))
}

// ParseToken returns the sale id of a well-formed token.
func ParseToken(token string) (saleID int64, ok bool) {
	prefix, mac, found := strings.Cut(token, "-")
	if !found || len(mac) != 32 || len(prefix) == 0 || len(prefix) > 19 || prefix[0] == '0' {
		return 0, false
	}
	for i := 0; i < len(mac); i++ {
		c := mac[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return 0, false
		}
	}
	id, err := strconv.ParseInt(prefix, 10, 64)
	if err != nil || id <= 0 {
		return 0, false
	}
	return id, true
}

// WaitlistRequestID is the request id of the reservation handed to the
// waiter whose join number is joined: one per join, so a hand-over retried
// names the same reservation. The '~' keeps it apart from any request id a
// client may send (ValidRequestID).
func WaitlistRequestID(joined int64) string {
	return WaitlistRequestPrefix + strconv.FormatInt(joined, 10)
}

// IsWaitlistRequestID reports whether a reservation was a waitlist's
// hand-over (WaitlistRequestID).
func IsWaitlistRequestID(requestID string) bool {
	return strings.HasPrefix(requestID, WaitlistRequestPrefix)
}

// WaitlistJoinNumber is the join number a hand-over's request id names.
func WaitlistJoinNumber(requestID string) (int64, bool) {
	rest, ok := strings.CutPrefix(requestID, WaitlistRequestPrefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(rest, 10, 64)
	return n, err == nil
}

// WaitlistRequestPrefix begins every hand-over's request id
// (WaitlistRequestID).
const WaitlistRequestPrefix = "~waitlist-"

// ValidRequestID reports whether s is 8..64 of A-Z a-z 0-9 _ -.
func ValidRequestID(s string) bool { return validID(s, 8, 64) }

// ValidPaymentRef reports whether s is 1..64 of A-Z a-z 0-9 _ -.
func ValidPaymentRef(s string) bool { return validID(s, 1, 64) }

func validID(s string, min, max int) bool {
	if len(s) < min || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
