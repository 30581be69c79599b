package telemetry

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// LogHandler adds the trace and span ids of a record's context (a request's
// span, a workflow's activity) to every line logged with one, so a log line
// leads to its trace. Lines logged without a context, or outside a span,
// are unchanged.
func LogHandler(h slog.Handler) slog.Handler { return traceIDs{h} }

type traceIDs struct{ slog.Handler }

func (t traceIDs) Handle(ctx context.Context, r slog.Record) error {
	for _, a := range TraceAttrs(ctx) {
		r.AddAttrs(a)
	}
	return t.Handler.Handle(ctx, r)
}

// TraceAttrs are the trace and span ids of ctx's span as log attributes,
// or none outside a span (for a logger made once per request).
func TraceAttrs(ctx context.Context) []slog.Attr {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return nil
	}
	return []slog.Attr{slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String())}
}

func (t traceIDs) WithAttrs(attrs []slog.Attr) slog.Handler {
	return traceIDs{t.Handler.WithAttrs(attrs)}
}

func (t traceIDs) WithGroup(name string) slog.Handler { return traceIDs{t.Handler.WithGroup(name)} }
