package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/authtoken"
)

const demoTitle = "Demo sale"

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
	c := client.New(base, adminTok, 15*time.Second)

	id, err := reusable(ctx, c, idFile)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if id == 0 {
		if id, err = create(ctx, c, stock); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		logger.Info("demo sale created", "sale_id", id)
	} else {
		logger.Info("demo sale reused", "sale_id", id)
	}
	if err := warmup(ctx, c, id); err != nil {
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

// reusable returns the remembered demo sale's id while that sale exists and
// can still sell, or 0.
func reusable(ctx context.Context, c *client.Client, idFile string) (int64, error) {
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
	v, err := c.Sale(ctx, id)
	if domain.ErrorCode(err) == domain.ENotFound {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("look up sale %d: %w", id, err)
	}
	if v.State == domain.StateEnded || v.State == domain.StateSoldOut {
		return 0, nil
	}
	return id, nil
}

func create(ctx context.Context, c *client.Client, stock int64) (int64, error) {
	now := time.Now().UTC().Truncate(time.Second)
	v, err := c.CreateSale(ctx, client.NewSale{GoodsID: 1, Title: demoTitle, PriceCents: 999, Stock: stock,
		Buckets: domain.DefaultBuckets, StartsAt: now, EndsAt: now.Add(7 * 24 * time.Hour),
		PaymentWindowSeconds: domain.DefaultPaymentWindowSeconds}, "")
	if err != nil {
		return 0, fmt.Errorf("create sale: %w", err)
	}
	if v.SaleID <= 0 {
		return 0, fmt.Errorf("create sale: answer without a sale id")
	}
	return v.SaleID, nil
}

// warmup loads the sale into Redis; a sale already taking reservations
// (409 already_live) is warm.
func warmup(ctx context.Context, c *client.Client, id int64) error {
	if _, err := c.Warmup(ctx, id); err != nil && domain.ErrorCode(err) != domain.EAlreadyLive {
		return fmt.Errorf("warm up sale %d: %w", id, err)
	}
	return nil
}
