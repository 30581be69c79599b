// Package telemetry sets up OpenTelemetry tracing from the standard OTEL_*
// variables (config.Tracing: on when an OTLP endpoint is named, off when
// unset) and carries a trace across the Redis inbox as a W3C traceparent.
// Off, nothing is installed: the global provider stays OpenTelemetry's
// no-op and no middleware or hook is added.
package telemetry

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/internal/buildinfo"
)

// Setup installs the global tracer provider (an OTLP exporter, batched)
// and the W3C propagators when cfg.Tracing; service is the default
// service.name (OTEL_SERVICE_NAME wins). The returned shutdown flushes
// what is buffered.
func Setup(ctx context.Context, cfg *config.Config, service string) (shutdown func(context.Context) error, err error) {
	if !cfg.Tracing {
		return func(context.Context) error { return nil }, nil
	}
	var exp sdktrace.SpanExporter
	// The exporters read the endpoint, headers, timeout and TLS settings
	// from the OTEL_EXPORTER_OTLP_* variables themselves.
	if cfg.TracesProtocol == "grpc" {
		exp, err = otlptracegrpc.New(ctx)
	} else {
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("telemetry: otlp exporter: %w", err)
	}
	res, err := Resource(ctx, service)
	if err != nil {
		return nil, err
	}
	// OTEL_TRACES_SAMPLER, when set, replaces this sampler (the SDK reads it
	// after the options).
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.TraceRatio))))
	Install(tp)
	return func(ctx context.Context) error {
		if err := tp.Shutdown(ctx); err != nil {
			return fmt.Errorf("telemetry: shutdown: %w", err)
		}
		return nil
	}, nil
}

// Resource describes this process in every span: service.name (service,
// unless OTEL_SERVICE_NAME says otherwise), service.version (the build's
// version, or its commit when it has none: buildinfo), and what
// OTEL_RESOURCE_ATTRIBUTES adds.
func Resource(ctx context.Context, service string) (*resource.Resource, error) {
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", service),
			attribute.String("service.version", buildinfo.Read().ServiceVersion())),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
		resource.WithTelemetrySDK(),
	)
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	return res, nil
}

// Install makes tp the global tracer provider with the W3C trace-context
// and baggage propagators (Setup does; tests install an in-memory one).
func Install(tp trace.TracerProvider) {
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
}

// TraceParent is the W3C traceparent of ctx's span, or "" without one (so
// with tracing off it costs a lookup and nothing else).
func TraceParent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	return carrier["traceparent"]
}

// WithTraceParent returns ctx continuing the remote span traceparent names;
// ctx itself when it names none.
func WithTraceParent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}
