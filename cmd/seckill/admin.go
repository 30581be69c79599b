package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/internal/authtoken"
)

// adminCommand is one `seckill admin` subcommand; it writes each answer as
// one line of JSON.
type adminCommand struct {
	usage string
	run   func(ctx context.Context, c *client.Client, args []string, out *json.Encoder) error
}

var adminCommands = map[string]adminCommand{
	"list":      {"list SALE_ID...          the sales' views (the API has no route listing every sale)", adminList},
	"create":    {"create --title T --stock N [--goods N --price C --starts T --ends T --window S --buckets N --challenge N --key K]", adminCreate},
	"warmup":    {"warmup SALE_ID           load the sale into Redis", adminSaleAction("warmup")},
	"pause":     {"pause SALE_ID            stop new reservations", adminSaleAction("pause")},
	"resume":    {"resume SALE_ID           undo a pause", adminSaleAction("resume")},
	"stop":      {"stop SALE_ID             end the sale early", adminSaleAction("stop")},
	"stock":     {"stock [--key K] SALE_ID DELTA   add (or withdraw) units", adminStock},
	"reconcile": {"reconcile [--repair] SALE_ID   a two-pass reconciliation report", adminReconcile},
	"appeals":   {"appeals list [--state S] | appeals resolve APPEAL_ID unblacklist|exempt|reject", adminAppeals},
}

// adminFlags: `seckill admin [flags] <subcommand> [args]` calls the admin
// API through the client (with its retries), as an operator.
func adminFlags(fs *flag.FlagSet) action {
	base := fs.String("api", "", "base URL of the admin API (default $SECKILL_ADMIN_URL, else http://$ADMIN_ADDR or http://$API_ADDR)")
	token := fs.String("token", "", "the operator's JWT (default $SECKILL_ADMIN_TOKEN, else one minted with SECKILL_ADMIN_JWT_SECRET)")
	timeout := fs.Duration("timeout", 15*time.Second, "bound of each attempt of a call")
	return func(ctx context.Context, cfg *config.Config, stdout io.Writer, _ *slog.Logger) error {
		c, err := adminClient(cfg, *base, *token, *timeout)
		if err != nil {
			return fmt.Errorf("admin: %w", err)
		}
		return runAdmin(ctx, c, fs.Args(), stdout)
	}
}

// adminClient is the client of the flags, else of the configuration.
func adminClient(cfg *config.Config, base, token string, timeout time.Duration) (*client.Client, error) {
	switch {
	case base != "":
	case cfg.AdminURL != "":
		base = cfg.AdminURL
	case cfg.AdminAddr != "":
		base = "http://" + loopbackOf(cfg.AdminAddr)
	default:
		base = "http://" + loopbackOf(cfg.APIAddr)
	}
	if token == "" {
		token = cfg.AdminToken
	}
	if token == "" {
		if len(cfg.AdminJWTSecret) == 0 {
			return nil, errors.New("no admin token: pass --token, or set SECKILL_ADMIN_TOKEN or SECKILL_ADMIN_JWT_SECRET")
		}
		t, err := authtoken.Mint(cfg.AdminJWTSecret, 1, authtoken.RoleAdmin, time.Hour)
		if err != nil {
			return nil, fmt.Errorf("mint an admin token: %w", err)
		}
		token = t
	}
	return client.New(base, token, timeout), nil
}

func runAdmin(ctx context.Context, c *client.Client, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("admin: a subcommand is required:\n%s", adminUsage())
	}
	sub, ok := adminCommands[args[0]]
	if !ok {
		return fmt.Errorf("admin: unknown subcommand %q:\n%s", args[0], adminUsage())
	}
	if err := sub.run(ctx, c, args[1:], json.NewEncoder(stdout)); err != nil {
		return fmt.Errorf("admin %s: %w", args[0], err)
	}
	return nil
}

func adminUsage() string {
	lines := make([]string, 0, len(adminCommands))
	for _, sub := range adminCommands {
		lines = append(lines, "  seckill admin "+sub.usage)
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// ids parses n positive decimal ids.
func ids(args []string, n int) ([]int64, error) {
	if len(args) == 0 || (n > 0 && len(args) != n) {
		return nil, fmt.Errorf("want %d id(s), got %d argument(s)", max(n, 1), len(args))
	}
	out := make([]int64, len(args))
	for i, a := range args {
		id, err := strconv.ParseInt(a, 10, 64)
		if err != nil || id <= 0 {
			return nil, fmt.Errorf("%q is not a positive id", a)
		}
		out[i] = id
	}
	return out, nil
}

func adminList(ctx context.Context, c *client.Client, args []string, out *json.Encoder) error {
	saleIDs, err := ids(args, 0)
	if err != nil {
		return err
	}
	for _, id := range saleIDs {
		v, err := c.Sale(ctx, id)
		if err != nil {
			return fmt.Errorf("sale %d: %w", id, err)
		}
		if err := out.Encode(v); err != nil {
			return fmt.Errorf("write: %w", err)
		}
	}
	return nil
}

// adminSaleAction is a subcommand that takes a sale id alone.
func adminSaleAction(action string) func(context.Context, *client.Client, []string, *json.Encoder) error {
	return func(ctx context.Context, c *client.Client, args []string, out *json.Encoder) error {
		id, err := ids(args, 1)
		if err != nil {
			return err
		}
		var v any
		switch action {
		case "warmup":
			v, err = c.Warmup(ctx, id[0])
		case "pause":
			v, err = c.Pause(ctx, id[0])
		case "resume":
			v, err = c.Resume(ctx, id[0])
		default:
			v, err = c.Stop(ctx, id[0])
		}
		if err != nil {
			return fmt.Errorf("sale %d: %w", id[0], err)
		}
		return encode(out, v)
	}
}

func encode(out *json.Encoder, v any) error {
	if err := out.Encode(v); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

// subFlags parses a subcommand's own flags (before its arguments).
func subFlags(name string, args []string, define func(fs *flag.FlagSet)) ([]string, error) {
	fs := flag.NewFlagSet("seckill admin "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	define(fs)
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("flags: %w", err)
	}
	return fs.Args(), nil
}

func adminCreate(ctx context.Context, c *client.Client, args []string, out *json.Encoder) error {
	var s client.NewSale
	var starts, ends, key string
	var window, buckets int
	rest, err := subFlags("create", args, func(fs *flag.FlagSet) {
		fs.StringVar(&s.Title, "title", "", "title (required)")
		fs.Int64Var(&s.Stock, "stock", 0, "units (required)")
		fs.Int64Var(&s.GoodsID, "goods", 1, "goods id")
		fs.Int64Var(&s.PriceCents, "price", 0, "price in cents")
		fs.StringVar(&starts, "starts", "", "start, RFC 3339 (default now)")
		fs.StringVar(&ends, "ends", "", "end, RFC 3339 (default an hour after the start)")
		fs.IntVar(&window, "window", 0, "payment window in seconds (default the API's)")
		fs.IntVar(&buckets, "buckets", 0, "stock buckets (default the API's)")
		fs.Int64Var(&s.ChallengeDifficulty, "challenge", 0, "challenge difficulty (0: none)")
		fs.StringVar(&key, "key", "", "Idempotency-Key (default a fresh one); rerun with the same key to repeat safely")
	})
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("unexpected arguments %q", rest)
	}
	s.StartsAt = time.Now().UTC().Truncate(time.Second)
	if starts != "" {
		if s.StartsAt, err = time.Parse(time.RFC3339, starts); err != nil {
			return fmt.Errorf("--starts: %w", err)
		}
	}
	s.EndsAt = s.StartsAt.Add(time.Hour)
	if ends != "" {
		if s.EndsAt, err = time.Parse(time.RFC3339, ends); err != nil {
			return fmt.Errorf("--ends: %w", err)
		}
	}
	s.PaymentWindowSeconds, s.Buckets = window, buckets
	v, err := c.CreateSale(ctx, s, key)
	if err != nil {
		return err
	}
	return encode(out, v)
}

func adminStock(ctx context.Context, c *client.Client, args []string, out *json.Encoder) error {
	var key string
	rest, err := subFlags("stock", args, func(fs *flag.FlagSet) {
		fs.StringVar(&key, "key", "", "Idempotency-Key (default a fresh one); rerun with the same key to repeat safely")
	})
	if err != nil {
		return err
	}
	if len(rest) != 2 {
		return errors.New("want SALE_ID DELTA")
	}
	id, err := ids(rest[:1], 1)
	if err != nil {
		return err
	}
	delta, err := strconv.ParseInt(rest[1], 10, 64)
	if err != nil || delta == 0 {
		return fmt.Errorf("DELTA %q is not a non-zero integer", rest[1])
	}
	v, err := c.AddStock(ctx, id[0], delta, key)
	if err != nil {
		return fmt.Errorf("sale %d: %w", id[0], err)
	}
	return encode(out, v)
}

func adminReconcile(ctx context.Context, c *client.Client, args []string, out *json.Encoder) error {
	var repair bool
	rest, err := subFlags("reconcile", args, func(fs *flag.FlagSet) {
		fs.BoolVar(&repair, "repair", false, "also repair what is safe to")
	})
	if err != nil {
		return err
	}
	id, err := ids(rest, 1)
	if err != nil {
		return err
	}
	r, err := c.Reconcile(ctx, id[0], repair)
	if err != nil {
		return fmt.Errorf("sale %d: %w", id[0], err)
	}
	return encode(out, r)
}

// adminAppeals lists appeals (every page, one appeal a line) or resolves one.
func adminAppeals(ctx context.Context, c *client.Client, args []string, out *json.Encoder) error {
	if len(args) > 0 && args[0] == "resolve" {
		if len(args) != 3 {
			return errors.New("want resolve APPEAL_ID unblacklist|exempt|reject")
		}
		id, err := ids(args[1:2], 1)
		if err != nil {
			return err
		}
		a, err := c.ResolveAppeal(ctx, id[0], args[2])
		if err != nil {
			return fmt.Errorf("appeal %d: %w", id[0], err)
		}
		return encode(out, a)
	}
	if len(args) == 0 || args[0] != "list" {
		return errors.New("want list or resolve")
	}
	var state string
	rest, err := subFlags("appeals list", args[1:], func(fs *flag.FlagSet) {
		fs.StringVar(&state, "state", "open", "open, resolved or rejected")
	})
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("unexpected arguments %q", rest)
	}
	for cursor := ""; ; {
		page, err := c.Appeals(ctx, state, cursor)
		if err != nil {
			return err
		}
		for _, a := range page.Appeals {
			if err := encode(out, a); err != nil {
				return err
			}
		}
		if cursor = page.NextCursor; cursor == "" {
			return nil
		}
	}
}
