package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/seckill/seckill/config"
)

// healthcheckFlags: `seckill healthcheck` asks the API's /readyz (or
// --url) and fails unless it answers 200 within --timeout: the health
// check of an image with no shell or curl (HEALTHCHECK, an exec probe).
func healthcheckFlags(fs *flag.FlagSet) action {
	url := fs.String("url", "", "URL to ask (default http://$API_ADDR/readyz, a wildcard host asked on loopback)")
	timeout := fs.Duration("timeout", 2*time.Second, "how long to wait for the answer")
	return func(ctx context.Context, cfg *config.Config, stdout io.Writer, _ *slog.Logger) error {
		if *url == "" {
			*url = "http://" + loopbackOf(cfg.APIAddr) + "/readyz"
		}
		return healthcheck(ctx, *url, *timeout, stdout)
	}
}

func healthcheck(ctx context.Context, url string, timeout time.Duration, stdout io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return fmt.Errorf("healthcheck %s: read: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck %s: %d %s", url, resp.StatusCode, body)
	}
	if _, err := fmt.Fprintf(stdout, "%s\n", body); err != nil {
		return fmt.Errorf("healthcheck: write: %w", err)
	}
	return nil
}

// loopbackOf turns a listen address on every interface (":8080",
// "0.0.0.0:8080", "[::]:8080") into one a local client can dial.
func loopbackOf(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
