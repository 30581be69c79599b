package telemetry

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
)

// ChildrenOnly is the global tracer provider restricted to spans with a
// parent: a Redis command or a query made for a traced request joins its
// trace; one made by background work (probes, heartbeats, cache refreshes)
// starts no trace of its own, so a sampler's ratio is a ratio of requests.
func ChildrenOnly() trace.TracerProvider { return childrenOnly{} }

type childrenOnly struct{ embedded.TracerProvider }

// Tracer looks the global provider up on each call, as otel.Tracer does,
// so a provider installed later (tests) is the one used.
func (childrenOnly) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return childTracer{inner: otel.GetTracerProvider().Tracer(name, opts...)}
}

type childTracer struct {
	embedded.Tracer
	inner trace.Tracer
}

func (t childTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, trace.SpanFromContext(ctx) // a no-op span
	}
	return t.inner.Start(ctx, name, opts...)
}
