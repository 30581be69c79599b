package client

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/gate"
	"github.com/seckill/seckill/internal/altcha"
	"github.com/seckill/seckill/wire"
)

// Health asks /healthz: nil while the process runs.
func (c *Client) Health(ctx context.Context) error {
	var st wire.Readiness
	if err := c.do(ctx, call{method: http.MethodGet, path: HealthPath, noAuth: true, idempotent: true}, &st); err != nil {
		return err
	}
	if st.Status != wire.Ready {
		return fmt.Errorf("GET %s: status %q", HealthPath, st.Status)
	}
	return nil
}

// Ready asks /readyz once (a probe is not retried): the body, and for a 503
// a domain.EUnavailable error naming what is missing.
func (c *Client) Ready(ctx context.Context) (wire.Readiness, error) {
	var st wire.Readiness
	err := c.do(ctx, call{method: http.MethodGet, path: ReadyPath, noAuth: true, noRetry: true,
		accept: []int{http.StatusServiceUnavailable}}, &st)
	if err == nil && st.Status != wire.Ready {
		err = domain.Errorf(domain.EUnavailable, "not ready: %s", strings.Join(st.Missing, ", "))
	}
	return st, err
}

// Metrics is the Prometheus text of /metrics.
func (c *Client) Metrics(ctx context.Context) (string, error) {
	a, err := c.send(ctx, call{method: http.MethodGet, path: MetricsPath, idempotent: true})
	return string(a.body), err
}

// OpenAPI is the contract's document as the API serves it.
func (c *Client) OpenAPI(ctx context.Context) ([]byte, error) {
	a, err := c.send(ctx, call{method: http.MethodGet, path: OpenAPIPath, noAuth: true, idempotent: true})
	return a.body, err
}

// Storefront is the storefront's page of a sale (saleID 0: the landing
// page, which lists the sales).
func (c *Client) Storefront(ctx context.Context, saleID int64) ([]byte, error) {
	path := "/"
	if saleID > 0 {
		path += "?sale=" + strconv.FormatInt(saleID, 10)
	}
	a, err := c.send(ctx, call{method: http.MethodGet, path: path, noAuth: true, idempotent: true})
	return a.body, err
}

// WebFile is one of the storefront's static files.
func (c *Client) WebFile(ctx context.Context, name string) ([]byte, error) {
	a, err := c.send(ctx, call{method: http.MethodGet, path: WebFilePath(name), noAuth: true, idempotent: true})
	return a.body, err
}

// DevLogin asks a development deployment for a user token.
func (c *Client) DevLogin(ctx context.Context, userID int64) (wire.DevLogin, error) {
	var v wire.DevLogin
	return v, c.do(ctx, call{method: http.MethodPost, path: DevLoginPath, noAuth: true, idempotent: true,
		body: map[string]int64{"user_id": userID}}, &v)
}

// Sale reads a sale.
func (c *Client) Sale(ctx context.Context, saleID int64) (domain.SaleView, error) {
	var v domain.SaleView
	return v, c.do(ctx, call{method: http.MethodGet, path: SalePath(saleID), idempotent: true}, &v)
}

// Reserve asks for a unit of a sale that needs no challenge pass; see
// ReserveWithPass.
func (c *Client) Reserve(ctx context.Context, saleID int64, requestID string) (domain.Accepted, error) {
	return c.ReserveWithPass(ctx, saleID, requestID, "")
}

// ReserveWithPass asks for a unit with a challenge pass ("" sends none):
// the 202's token, or the refusal. A 503 (outcome unknown), a 429 and a
// lost answer are sent again with the same requestID, which lands on the
// same reservation.
func (c *Client) ReserveWithPass(ctx context.Context, saleID int64, requestID, pass string) (domain.Accepted, error) {
	body := map[string]string{"request_id": requestID}
	if pass != "" {
		body["pass"] = pass
	}
	var a domain.Accepted
	return a, c.do(ctx, call{method: http.MethodPost, path: ReservationsPath(saleID), body: body, idempotent: true}, &a)
}

// MyReservations lists the caller's reservations, newest first, of one
// sale (saleID 0: of every sale).
func (c *Client) MyReservations(ctx context.Context, saleID int64) ([]domain.ReservationView, error) {
	path := MyReservationsPath
	if saleID > 0 {
		path = MinePath(saleID)
	}
	var l wire.ReservationList
	return l.Reservations, c.do(ctx, call{method: http.MethodGet, path: path, idempotent: true}, &l)
}

// Reservation reads a reservation the caller owns.
func (c *Client) Reservation(ctx context.Context, token string) (domain.ReservationView, error) {
	var v domain.ReservationView
	return v, c.do(ctx, call{method: http.MethodGet, path: ReservationPath(token), idempotent: true}, &v)
}

// Pay records the payment paymentRef (paying again with the same ref
// answers the same, so it is retried).
func (c *Client) Pay(ctx context.Context, token, paymentRef string) (domain.ReservationView, error) {
	var v domain.ReservationView
	return v, c.do(ctx, call{method: http.MethodPost, path: PaymentPath(token), idempotent: true,
		body: map[string]string{"payment_ref": paymentRef}}, &v)
}

// Cancel cancels a reservation (cancelling again answers the same).
func (c *Client) Cancel(ctx context.Context, token string) (domain.ReservationView, error) {
	var v domain.ReservationView
	return v, c.do(ctx, call{method: http.MethodPost, path: CancelPath(token), idempotent: true}, &v)
}

// Challenge is a proof-of-work challenge for the caller at a sale.
func (c *Client) Challenge(ctx context.Context, saleID int64) (altcha.Challenge, error) {
	var ch altcha.Challenge
	return ch, c.do(ctx, call{method: http.MethodGet, path: ChallengePath(saleID), idempotent: true}, &ch)
}

// RedeemChallenge exchanges a solution (base64 ALTCHA payload) for a
// pass. A solution is redeemed once, so a lost answer is not resent.
func (c *Client) RedeemChallenge(ctx context.Context, saleID int64, payload string) (gate.Pass, error) {
	var p gate.Pass
	return p, c.do(ctx, call{method: http.MethodPost, path: ChallengePath(saleID),
		body: map[string]string{"payload": payload}}, &p)
}

// JoinWaitlist puts the caller on a sale's waitlist (joining again keeps
// the place).
func (c *Client) JoinWaitlist(ctx context.Context, saleID int64) (wire.WaitlistPosition, error) {
	var p wire.WaitlistPosition
	return p, c.do(ctx, call{method: http.MethodPost, path: WaitlistPath(saleID), idempotent: true}, &p)
}

// WaitlistPosition is the caller's place on a sale's waitlist.
func (c *Client) WaitlistPosition(ctx context.Context, saleID int64) (wire.WaitlistPosition, error) {
	var p wire.WaitlistPosition
	return p, c.do(ctx, call{method: http.MethodGet, path: WaitlistPath(saleID), idempotent: true}, &p)
}

// LeaveWaitlist takes the caller off a sale's waitlist.
func (c *Client) LeaveWaitlist(ctx context.Context, saleID int64) error {
	return c.do(ctx, call{method: http.MethodDelete, path: WaitlistPath(saleID), idempotent: true}, nil)
}

// NewAppeal is the body of POST /api/v1/appeals.
type NewAppeal struct {
	SaleID  int64  `json:"sale_id"`
	Reason  string `json:"reason"` // blacklisted, challenge or rate_limited
	Message string `json:"message"`
}

// FileAppeal files an appeal. A second one for the same sale is 409
// appeal_exists, so a lost answer is not resent.
func (c *Client) FileAppeal(ctx context.Context, a NewAppeal) (wire.AppealFiled, error) {
	var f wire.AppealFiled
	return f, c.do(ctx, call{method: http.MethodPost, path: AppealsPath, body: a}, &f)
}
