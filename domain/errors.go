package domain

import (
	"errors"
	"fmt"
)

// Error codes of the contract. Each maps to one HTTP status in api/errors.go.
const (
	EInvalid           = "invalid_request"
	EUnauthorized      = "unauthorized"
	EForbidden         = "forbidden"
	ENotFound          = "not_found"
	EMethodNotAllowed  = "method_not_allowed"
	ETooLarge          = "request_too_large"
	ESoldOut           = "sold_out"
	EAlreadyPurchased  = "already_purchased"
	ESaleNotStarted    = "sale_not_started"
	ESaleEnded         = "sale_ended"
	ESalePaused        = "sale_paused"
	EBlacklisted       = "blacklisted"
	ERateLimited       = "rate_limited"
	EUnavailable       = "unavailable"
	ENotPayable        = "not_payable"
	ENotCancellable    = "not_cancellable"
	EAmountMismatch    = "amount_mismatch"
	EAlreadyLive       = "already_live"
	EInsufficient      = "insufficient_stock"
	EConflict          = "conflict"
	EIdempotencyReused = "idempotency_key_reused"
	EChallengeRequired = "challenge_required"
	EChallengeFailed   = "challenge_failed"
	ENotEligible       = "not_eligible"
	EAppealExists      = "appeal_exists"
	EInternal          = "internal"

	// Transport-level answers (contract 1.1).
	EUnsupportedMediaType = "unsupported_media_type"
	EHeadersTooLarge      = "headers_too_large"
	ENotImplemented       = "not_implemented"
	ERequestTimeout       = "request_timeout"
)

// Error is the project's one error type: a contract code and a message safe
// to show to the client.
type Error struct {
	Code    string
	Message string
	// RetryAfter, in seconds, goes out as Retry-After when above zero.
	RetryAfter int
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

// Errorf builds an *Error with a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// The refusals a reservation meets on every path, one text each. Shared:
// never modify them.
var (
	ErrSoldOut        = &Error{Code: ESoldOut, Message: "sold out"}
	ErrAlreadyHolds   = &Error{Code: EAlreadyPurchased, Message: "this user already holds a unit of this sale"}
	ErrSaleNotStarted = &Error{Code: ESaleNotStarted, Message: "the sale has not started"}
	ErrSaleEnded      = &Error{Code: ESaleEnded, Message: "the sale has ended"}
	ErrSalePaused     = &Error{Code: ESalePaused, Message: "the sale is paused"}
	ErrNotPayable     = &Error{Code: ENotPayable, Message: "the reservation is not awaiting payment"}
	ErrNotCancellable = &Error{Code: ENotCancellable, Message: "the reservation can no longer be cancelled"}
	ErrNoReservation  = &Error{Code: ENotFound, Message: "no such reservation"}
	// ErrAlreadyLive refuses a warm-up of a sale that has taken
	// reservations: it would reset the sale.
	ErrAlreadyLive = &Error{Code: EAlreadyLive, Message: "the sale has taken reservations; warm-up would reset it"}
	// ErrInsufficient refuses a withdrawal of more units than are unsold.
	ErrInsufficient = &Error{Code: EInsufficient, Message: "cannot withdraw more than the unsold units"}
	// ErrSaleNotReady: Redis does not hold the sale yet (or holds it at
	// another epoch); the retry with the same request_id is answered.
	ErrSaleNotReady = Unavailable("the sale is not ready yet, retry with the same request_id")
	// ErrSaleMoving: the sale moved to the database path moments ago, and a
	// Redis hold sent before the switch may still be taken; the database
	// path sells once its hold-off has passed.
	ErrSaleMoving = Unavailable("the sale is moving to the database path; retry with the same request_id")
	// ErrSaleResyncing: the sale is not (or no longer) in database mode, on
	// its way back to Redis.
	ErrSaleResyncing = Unavailable("the sale is switching back to Redis; retry with the same request_id")
	// ErrOutcomeUnknown: the reservation may or may not have been taken;
	// the retry with the same request_id finds out.
	ErrOutcomeUnknown = Unavailable("reservation outcome unknown, retry with the same request_id")
)

// Unavailable is a 503 whose outcome the client learns by retrying with
// the same request after a second.
func Unavailable(message string) *Error {
	return &Error{Code: EUnavailable, Message: message, RetryAfter: 1}
}

// ErrorCode returns the code of the first *Error in err's chain, EInternal
// for any other error and "" for nil.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EInternal
}

// ErrorMessage returns the client-safe message of err; internal errors get a
// generic text so that no detail leaks.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}
