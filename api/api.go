// Package api is seckill's Fiber HTTP interface.
package api

import (
	"context"
	"errors"
	"log/slog"

	"github.com/seckill/seckill/config"
)

// Run serves the API until ctx is cancelled. (Placeholder until the API lands.)
func Run(ctx context.Context, cfg *config.Config, logger *slog.Logger) error {
	_ = ctx
	_ = cfg
	_ = logger
	return errors.New("api: not built yet")
}
