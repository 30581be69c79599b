// Package client is a typed Go client of seckill's REST API (the contract
// is api/openapi.yaml): the contract's paths built in one place, and a Client whose methods answer the contract's bodies, or a
// *domain.Error (code, message, Retry-After) for an error answer. Load
// generators that speak fasthttp build their requests from the paths.
package client

import "strconv"

// SalePath is GET /api/v1/sales/{sale_id}.
func SalePath(saleID int64) string { return "/api/v1/sales/" + strconv.FormatInt(saleID, 10) }

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

// AdminSalesPath is POST /admin/v1/sales.
const AdminSalesPath = "/admin/v1/sales"

// AdminSalePath is an admin route of one sale: /admin/v1/sales/{sale_id}/{action}.
func AdminSalePath(saleID int64, action string) string {
	return AdminSalesPath + "/" + strconv.FormatInt(saleID, 10) + "/" + action
}
