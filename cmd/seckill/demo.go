package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/internal/authtoken"
)

const demoTitle = "Demo sale"

// saleView is the part of the contract's sale view the demo reads.
type saleView struct {
	SaleID int64  `json:"sale_id"`
	Title  string `json:"title"`
	State  string `json:"state"`
}

type apiError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// demo creates and warms up a demo sale through the admin API and prints its
// id. The id is kept in a file and reused while that sale is still open, so
// running it again is harmless.
func demoFlags(fs *flag.FlagSet) action {
	base := fs.String("api", "", "base URL of the API (default http://$API_ADDR)")
	idFile := fs.String("id-file", filepath.Join(".data", "demo-sale-id"), "file remembering the demo sale's id")
	stock := fs.Int64("stock", 1000, "units of a new demo sale")
	return func(ctx context.Context, cfg *config.Config, stdout io.Writer, logger *slog.Logger) error {
		if *base == "" {
			*base = "http://" + cfg.APIAddr
		}
		return demo(ctx, cfg, *base, *idFile, *stock, stdout, logger)
	}
}

func demo(ctx context.Context, cfg *config.Config, base, idFile string, stock int64, stdout io.Writer, logger *slog.Logger) error {
	adminTok, err := authtoken.Mint(cfg.AdminJWTSecret, 1, authtoken.RoleAdmin, time.Hour)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	c := &demoClient{base: strings.TrimRight(base, "/"), token: adminTok, http: &http.Client{Timeout: 15 * time.Second}}

	id, err := c.reusable(ctx, idFile)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if id == 0 {
		if id, err = c.create(ctx, stock); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		logger.Info("demo sale created", "sale_id", id)
	} else {
		logger.Info("demo sale reused", "sale_id", id)
	}
	if err := c.warmup(ctx, id); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if dir := filepath.Dir(idFile); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
	}
	if err := os.WriteFile(idFile, []byte(strconv.FormatInt(id, 10)+"\n"), 0o644); err != nil {
		return fmt.Errorf("demo: remember sale id: %w", err)
	}
	if _, err := fmt.Fprintln(stdout, id); err != nil {
		return fmt.Errorf("demo: write: %w", err)
	}
	return nil
}

type demoClient struct {
	base  string
	token string
	http  *http.Client
}

// reusable returns the remembered demo sale's id while that sale exists and
// can still sell, or 0.
func (c *demoClient) reusable(ctx context.Context, idFile string) (int64, error) {
	raw, err := os.ReadFile(idFile)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", idFile, err)
	}
	id, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil || id <= 0 {
		return 0, nil // A damaged file just means a new sale.
	}
	var v saleView
	r, err := c.do(ctx, http.MethodGet, "/api/v1/sales/"+strconv.FormatInt(id, 10), nil, &v)
	if err != nil {
		return 0, fmt.Errorf("look up sale %d: %w", id, err)
	}
	if r.status == http.StatusNotFound {
		return 0, nil
	}
	if r.status != http.StatusOK {
		return 0, fmt.Errorf("look up sale %d: %s", id, r)
	}
	if v.State == "ended" || v.State == "sold_out" {
		return 0, nil
	}
	return id, nil
}

func (c *demoClient) create(ctx context.Context, stock int64) (int64, error) {
	now := time.Now().UTC().Truncate(time.Second)
	body := map[string]any{
		"goods_id":               1,
		"title":                  demoTitle,
		"price_cents":            999,
		"stock":                  stock,
		"buckets":                16,
		"starts_at":              now.Format(time.RFC3339),
		"ends_at":                now.Add(7 * 24 * time.Hour).Format(time.RFC3339),
		"payment_window_seconds": 900,
	}
	var v saleView
	r, err := c.do(ctx, http.MethodPost, "/admin/v1/sales", body, &v)
	if err != nil {
		return 0, fmt.Errorf("create sale: %w", err)
	}
	if r.status != http.StatusCreated {
		return 0, fmt.Errorf("create sale: %s", r)
	}
	if v.SaleID <= 0 {
		return 0, fmt.Errorf("create sale: answer without a sale id")
	}
	return v.SaleID, nil
}

// warmup loads the sale into Redis; a sale already taking reservations
// (409 already_live) is warm.
func (c *demoClient) warmup(ctx context.Context, id int64) error {
	r, err := c.do(ctx, http.MethodPost, "/admin/v1/sales/"+strconv.FormatInt(id, 10)+"/warmup", nil, nil)
	if err != nil {
		return fmt.Errorf("warm up sale %d: %w", id, err)
	}
	if r.status != http.StatusOK && r.code != "already_live" {
		return fmt.Errorf("warm up sale %d: %s", id, r)
	}
	return nil
}

// reply is the status of an answer and, for an error, the contract's error
// code and message.
type reply struct {
	status  int
	code    string
	message string
}

func (r reply) String() string {
	if r.code == "" {
		return fmt.Sprintf("status %d", r.status)
	}
	return fmt.Sprintf("status %d %s: %s", r.status, r.code, r.message)
}

// do sends one request and decodes a 2xx body into out; other answers are
// returned for the caller to judge.
func (c *demoClient) do(ctx context.Context, method, path string, body, out any) (reply, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return reply{}, fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return reply{}, fmt.Errorf("new request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return reply{}, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return reply{}, fmt.Errorf("%s %s: read body: %w", method, path, err)
	}
	r := reply{status: resp.StatusCode}
	if r.status >= 200 && r.status < 300 {
		if out != nil {
			if err := json.Unmarshal(raw, out); err != nil {
				return reply{}, fmt.Errorf("%s %s: decode body: %w", method, path, err)
			}
		}
		return r, nil
	}
	var e apiError
	if json.Unmarshal(raw, &e) == nil {
		r.code, r.message = e.Error.Code, e.Error.Message
	}
	return r, nil
}
