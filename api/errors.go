package api

import (
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"sync"

	"github.com/gofiber/fiber/v2"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/wire"
)

// statusOf is the one mapping from the contract's error codes to HTTP statuses.
func statusOf(code string) int {
	switch code {
	case domain.EInvalid, domain.EChallengeFailed:
		return fiber.StatusBadRequest
	case domain.EUnauthorized:
		return fiber.StatusUnauthorized
	case domain.EForbidden, domain.ESaleNotStarted, domain.ESaleEnded, domain.ESalePaused, domain.EBlacklisted,
		domain.EChallengeRequired, domain.ENotEligible:
		return fiber.StatusForbidden
	case domain.ENotFound:
		return fiber.StatusNotFound
	case domain.EMethodNotAllowed:
		return fiber.StatusMethodNotAllowed
	case domain.ETooLarge:
		return fiber.StatusRequestEntityTooLarge
	case domain.ESoldOut:
		return fiber.StatusGone
	case domain.EAlreadyPurchased, domain.ENotPayable, domain.ENotCancellable, domain.EAmountMismatch,
		domain.EAlreadyLive, domain.EInsufficient, domain.EConflict, domain.EIdempotencyReused, domain.EAppealExists:
		return fiber.StatusConflict
	case domain.ERateLimited:
		return fiber.StatusTooManyRequests
	case domain.EUnavailable:
		return fiber.StatusServiceUnavailable
	case domain.EUnsupportedMediaType:
		return fiber.StatusUnsupportedMediaType
	case domain.EHeadersTooLarge:
		return fiber.StatusRequestHeaderFieldsTooLarge
	case domain.ENotImplemented:
		return fiber.StatusNotImplemented
	case domain.ERequestTimeout:
		return fiber.StatusRequestTimeout
	}
	return fiber.StatusInternalServerError
}

// codeOfStatus names Fiber's own errors (routing, body limit) in the contract's codes.
func codeOfStatus(status int) string {
	switch status {
	case fiber.StatusNotFound:
		return domain.ENotFound
	case fiber.StatusMethodNotAllowed:
		return domain.EMethodNotAllowed
	case fiber.StatusRequestEntityTooLarge:
		return domain.ETooLarge
	case fiber.StatusUnauthorized:
		return domain.EUnauthorized
	case fiber.StatusForbidden:
		return domain.EForbidden
	case fiber.StatusTooManyRequests:
		return domain.ERateLimited
	case fiber.StatusServiceUnavailable:
		return domain.EUnavailable
	case fiber.StatusRequestTimeout:
		return domain.ERequestTimeout
	case fiber.StatusRequestHeaderFieldsTooLarge:
		return domain.EHeadersTooLarge
	case fiber.StatusNotImplemented:
		return domain.ENotImplemented
	case fiber.StatusUnsupportedMediaType:
		return domain.EUnsupportedMediaType
	}
	if status >= 400 && status < 500 {
		return domain.EInvalid
	}
	return domain.EInternal
}

// sendError writes the contract's error body for code.
func sendError(c *fiber.Ctx, code, message string) error {
	c.Status(statusOf(code))
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(errorBytes(code, message))
}

// encodedErrors keeps the bodies of the (mostly constant) error answers:
// the sold-out answer is the hot path's most common one. Bounded, since a
// few messages carry details.
var encodedErrors = struct {
	sync.RWMutex
	m map[[2]string][]byte
}{m: map[[2]string][]byte{}}

func errorBytes(code, message string) []byte {
	key := [2]string{code, message}
	encodedErrors.RLock()
	b, ok := encodedErrors.m[key]
	encodedErrors.RUnlock()
	if ok {
		return b
	}
	b, err := json.Marshal(wire.ErrorBody{Error: wire.ErrorDetail{Code: code, Message: message}})
	if err != nil { // strings always marshal; keep the contract's shape regardless
		b = []byte(`{"error":{"code":"internal","message":"internal error"}}`)
	}
	encodedErrors.Lock()
	if len(encodedErrors.m) < 512 {
		encodedErrors.m[key] = b
	}
	encodedErrors.Unlock()
	return b
}

// sendErr writes err (a *domain.Error or an internal error) as an error
// body, with its Retry-After.
func sendErr(c *fiber.Ctx, err error) error {
	if e, ok := err.(*domain.Error); ok { // the hot path's refusals: no errors.As, no allocation
		return sendDomainErr(c, e)
	}
	var e *domain.Error
	if errors.As(err, &e) {
		return sendDomainErr(c, e)
	}
	return sendError(c, domain.EInternal, domain.ErrorMessage(err))
}

func sendDomainErr(c *fiber.Ctx, e *domain.Error) error {
	if e.RetryAfter > 0 {
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(e.RetryAfter))
	}
	return sendError(c, e.Code, e.Message)
}

// unavailable answers 503 with Retry-After: the outcome is unknown, retry.
func unavailable(c *fiber.Ctx, retryAfter int, message string) error {
	c.Set(fiber.HeaderRetryAfter, strconv.Itoa(max(retryAfter, 1)))
	return sendError(c, domain.EUnavailable, message)
}

// fixedMessage is the message of an error the framework raised.
func fixedMessage(code string) string {
	switch code {
	case domain.ENotFound:
		return "no such resource"
	case domain.EMethodNotAllowed:
		return "method not allowed on this resource"
	case domain.ETooLarge:
		return "request body over 8 KiB"
	case domain.ERequestTimeout:
		return "request not completed in time"
	case domain.EHeadersTooLarge:
		return "request headers over the server's limit"
	case domain.ENotImplemented:
		return "method not implemented"
	case domain.EUnsupportedMediaType:
		return "request body must be application/json"
	case domain.EUnauthorized:
		return "unauthorized"
	case domain.EForbidden:
		return "forbidden"
	case domain.ERateLimited:
		return "too many requests"
	case domain.EUnavailable:
		return "service unavailable"
	case domain.EInternal:
		return "internal error"
	}
	return "malformed request"
}

// errorHandler is Fiber's ErrorHandler: every error that escapes a handler,
// and Fiber's own 404/405/413, leave with the contract's error body.
func errorHandler(logger *slog.Logger) fiber.ErrorHandler {
	return func(c *fiber.Ctx, err error) error {
		var fe *fiber.Error
		if errors.As(err, &fe) {
			// Fiber's and fasthttp's own messages may quote the request:
			// each code gets a fixed message instead.
			code := codeOfStatus(fe.Code)
			return sendError(c, code, fixedMessage(code))
		}
		var de *domain.Error
		if !errors.As(err, &de) {
			requestLogger(logger, c).Error("request failed", "method", c.Method(), "path", c.Path(), "err", err)
		}
		return sendErr(c, err)
	}
}
