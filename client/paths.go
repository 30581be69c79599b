// Package client is a typed Go client of seckill's REST API (the contract
// is api/openapi.yaml): the contract's paths built in one place, and a
// Client with a method for every operation of the contract, answering its
// bodies, or a *domain.Error (code, message, Retry-After) for an error
// answer. Load generators that speak fasthttp build their requests from
// the paths.
package client

import (
	"net/url"
	"strconv"
)

// SalesPath is GET /api/v1/sales: the sales a buyer can see, a page at a
// time.
const SalesPath = "/api/v1/sales"

// SalePath is GET /api/v1/sales/{sale_id}.
func SalePath(saleID int64) string { return SalesPath + "/" + strconv.FormatInt(saleID, 10) }

// ReservationsPath is POST /api/v1/sales/{sale_id}/reservations.
func ReservationsPath(saleID int64) string { return SalePath(saleID) + "/reservations" }

// WaitlistPath is POST and DELETE /api/v1/sales/{sale_id}/waitlist.
func WaitlistPath(saleID int64) string { return SalePath(saleID) + "/waitlist" }

// ReservationPath is GET /api/v1/reservations/{token}.
func ReservationPath(token string) string { return "/api/v1/reservations/" + token }

// PaymentPath is POST /api/v1/reservations/{token}/payment.
func PaymentPath(token string) string { return ReservationPath(token) + "/payment" }

// CancelPath is POST /api/v1/reservations/{token}/cancel.
func CancelPath(token string) string { return ReservationPath(token) + "/cancel" }

// EventsPath is GET /api/v1/reservations/{token}/events.
func EventsPath(token string) string { return ReservationPath(token) + "/events" }

// MinePath is GET /api/v1/me/reservations?sale_id=.
func MinePath(saleID int64) string {
	return "/api/v1/me/reservations?sale_id=" + strconv.FormatInt(saleID, 10)
}

// AdminSalesPath is POST /admin/v1/sales, and GET: every sale, a page at
// a time.
const AdminSalesPath = "/admin/v1/sales"

// AdminSalePath is an admin route of one sale: /admin/v1/sales/{sale_id}/{action}.
func AdminSalePath(saleID int64, action string) string {
	return AdminSalesPath + "/" + strconv.FormatInt(saleID, 10) + "/" + action
}

// Paths of the probes, the document and the storefront.
const (
	HealthPath   = "/healthz"
	ReadyPath    = "/readyz"
	MetricsPath  = "/metrics"
	OpenAPIPath  = "/openapi.yaml"
	WebhookPath  = "/webhooks/payments"
	DevLoginPath = "/dev/login"
	AppealsPath  = "/api/v1/appeals"
	// MyReservationsPath is GET /api/v1/me/reservations (every sale).
	MyReservationsPath = "/api/v1/me/reservations"
	// AdminAppealsPath is GET /admin/v1/appeals.
	AdminAppealsPath = "/admin/v1/appeals"
	// AdminRefundsPath is GET /admin/v1/refunds.
	AdminRefundsPath = "/admin/v1/refunds"
)

// ChallengePath is GET and POST /api/v1/sales/{sale_id}/challenge.
func ChallengePath(saleID int64) string { return SalePath(saleID) + "/challenge" }

// BlacklistPath is PUT and DELETE /admin/v1/blacklist/{user_id}.
func BlacklistPath(userID int64) string {
	return "/admin/v1/blacklist/" + strconv.FormatInt(userID, 10)
}

// ExemptionPath is PUT and DELETE /admin/v1/challenge-exemptions/{user_id}.
func ExemptionPath(userID int64) string {
	return "/admin/v1/challenge-exemptions/" + strconv.FormatInt(userID, 10)
}

// ResolveAppealPath is POST /admin/v1/appeals/{appeal_id}/resolve.
func ResolveAppealPath(appealID int64) string {
	return AdminAppealsPath + "/" + strconv.FormatInt(appealID, 10) + "/resolve"
}

// WebFilePath is GET /web/{file}.
func WebFilePath(name string) string { return "/web/" + url.PathEscape(name) }

// OperatorSalePath is GET /admin/v1/sales/{sale_id}: one sale's operator view.
func OperatorSalePath(saleID int64) string {
	return AdminSalesPath + "/" + strconv.FormatInt(saleID, 10)
}

// AdminAuditPath is GET /admin/v1/audit.
const AdminAuditPath = "/admin/v1/audit"

// ConsoleFilePath is one file of the operator console, /console/{file}.
func ConsoleFilePath(name string) string { return "/console/" + url.PathEscape(name) }
