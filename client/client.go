package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill/domain"
)

// Client calls one API with one bearer token.
type Client struct {
	base  string
	token string
	http  *http.Client
}

// New is a client of the API at base (http://host:port) with token (a
// user's or an admin's JWT); every call is bounded by timeout.
func New(base, token string, timeout time.Duration) *Client {
	return &Client{base: strings.TrimRight(base, "/"), token: token, http: &http.Client{Timeout: timeout}}
}

// NewSale is the body of POST /admin/v1/sales.
type NewSale struct {
	GoodsID              int64     `json:"goods_id"`
	Title                string    `json:"title"`
	PriceCents           int64     `json:"price_cents"`
	Stock                int64     `json:"stock"`
	Buckets              int       `json:"buckets,omitempty"`
	StartsAt             time.Time `json:"starts_at"`
	EndsAt               time.Time `json:"ends_at"`
	PaymentWindowSeconds int       `json:"payment_window_seconds"`
}

// Sale reads a sale.
func (c *Client) Sale(ctx context.Context, saleID int64) (domain.SaleView, error) {
	var v domain.SaleView
	return v, c.do(ctx, http.MethodGet, SalePath(saleID), nil, &v)
}

// CreateSale creates a sale (admin).
func (c *Client) CreateSale(ctx context.Context, s NewSale) (domain.SaleView, error) {
	var v domain.SaleView
	return v, c.do(ctx, http.MethodPost, AdminSalesPath, s, &v)
}

// Warmup loads a sale into Redis (admin); a sale already taking
// reservations answers domain.EAlreadyLive.
func (c *Client) Warmup(ctx context.Context, saleID int64) error {
	return c.do(ctx, http.MethodPost, AdminSalePath(saleID, "warmup"), nil, nil)
}

// Reserve asks for a unit: the 202's token, or the refusal (a 503 is
// retried with the same requestID).
func (c *Client) Reserve(ctx context.Context, saleID int64, requestID string) (domain.Accepted, error) {
	var a domain.Accepted
	return a, c.do(ctx, http.MethodPost, ReservationsPath(saleID), map[string]string{"request_id": requestID}, &a)
}

// Reservation reads a reservation the caller owns.
func (c *Client) Reservation(ctx context.Context, token string) (domain.ReservationView, error) {
	var v domain.ReservationView
	return v, c.do(ctx, http.MethodGet, ReservationPath(token), nil, &v)
}

// Pay records the payment paymentRef.
func (c *Client) Pay(ctx context.Context, token, paymentRef string) (domain.ReservationView, error) {
	var v domain.ReservationView
	return v, c.do(ctx, http.MethodPost, PaymentPath(token), map[string]string{"payment_ref": paymentRef}, &v)
}

// Cancel cancels a reservation.
func (c *Client) Cancel(ctx context.Context, token string) (domain.ReservationView, error) {
	var v domain.ReservationView
	return v, c.do(ctx, http.MethodPost, CancelPath(token), nil, &v)
}

// errorBody is the contract's error answer.
type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// do sends one request and decodes a 2xx body into out (when not nil); an
// error answer is its *domain.Error.
func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	req, err := c.request(ctx, method, path, body)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read body: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return answerError(resp, raw)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s %s: decode body: %w", method, path, err)
	}
	return nil
}

func (c *Client) request(ctx context.Context, method, path string, body any) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("%s %s: encode body: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

// answerError is the *domain.Error of an error answer; a body that is not
// the contract's keeps the status in the message.
func answerError(resp *http.Response, raw []byte) *domain.Error {
	e := &domain.Error{Code: domain.EInternal, Message: fmt.Sprintf("status %d", resp.StatusCode)}
	var b errorBody
	if json.Unmarshal(raw, &b) == nil && b.Error.Code != "" {
		e.Code, e.Message = b.Error.Code, b.Error.Message
	}
	if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
		e.RetryAfter = n
	}
	return e
}
