package reqid

import (
	"context"
	"log/slog"
)

type loggerKey struct{}

// WithLogger is ctx carrying its request's logger (the request id, who
// asks, the trace), for the services the request calls.
func WithLogger(ctx context.Context, l *slog.Logger) context.Context {
	return context.WithValue(ctx, loggerKey{}, l)
}

// Logger is the logger of work done for ctx's request: the one WithLogger
// gave it, else fallback with the request's id.
func Logger(ctx context.Context, fallback *slog.Logger) *slog.Logger {
	if l, ok := ctx.Value(loggerKey{}).(*slog.Logger); ok {
		return l
	}
	if id := From(ctx); id != "" {
		return fallback.With(LogKey, id)
	}
	return fallback
}
