// Package worker wires seckill's Temporal worker and inbox relay.
package worker

import (
	"context"
	"errors"
	"log/slog"

	"github.com/seckill/seckill/config"
)

// Run runs the worker until ctx is cancelled. (Placeholder until it lands.)
func Run(ctx context.Context, cfg *config.Config, logger *slog.Logger) error {
	_ = ctx
	_ = cfg
	_ = logger
	return errors.New("worker: not built yet")
}
