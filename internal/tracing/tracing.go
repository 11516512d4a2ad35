// Package tracing follows an event with OpenTelemetry: the ingest request
// starts (or continues, from the sender's W3C traceparent) a trace whose
// context is stored with the delivery; each attempt's spans (claim,
// forward, completion) continue it in the worker; every forward carries a
// traceparent of the trace.
//
// Trace ids exist whether or not spans are exported: without an exporter
// the provider starts no sampled trace, so its spans cost an id each, but
// their ids are real and forwarded; a sender's sampled flag is passed on
// as it came (idsOnly), so a destination that traces still sees the
// sender's decision.
package tracing

import (
	"context"
	"log/slog"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
)

// Config is what a Provider is built from.
type Config struct {
	// Endpoint is an OTLP/HTTP collector's base URL; empty: no export.
	Endpoint string
	// SampleRatio is the share of new traces recorded when exporting.
	SampleRatio float64
	// ServiceName is the spans' service.name.
	ServiceName string
}

// Provider hands out hookline's tracer and flushes exported spans.
type Provider struct {
	tp *sdktrace.TracerProvider
}

// ScopeName is the instrumentation scope of hookline's spans.
const ScopeName = "github.com/hookline/hookline"

// TracesURL is where spans go for a collector endpoint: its base URL with
// /v1/traces added, or the endpoint as given when it already ends so.
func TracesURL(endpoint string) string {
	base := strings.TrimRight(endpoint, "/")
	if strings.HasSuffix(base, "/v1/traces") {
		return base
	}
	return base + "/v1/traces"
}

// New builds the provider: with an endpoint, spans are batched and sent
// over OTLP/HTTP, sampled by SampleRatio (a continued trace follows its
// parent's decision); without one, nothing is exported (idsOnly).
func New(cfg Config) (*Provider, error) {
	opts := []sdktrace.TracerProviderOption{sdktrace.WithSampler(idsOnly)}
	if cfg.Endpoint != "" {
		exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(TracesURL(cfg.Endpoint)))
		if err != nil {
			return nil, err
		}
		name := cfg.ServiceName
		if name == "" {
			name = "hookline"
		}
		res := resource.NewSchemaless(semconv.ServiceName(name))
		opts = []sdktrace.TracerProviderOption{
			sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.SampleRatio))),
			sdktrace.WithBatcher(exp),
			sdktrace.WithResource(res),
		}
	}
	return &Provider{tp: sdktrace.NewTracerProvider(opts...)}, nil
}

// Tracer is hookline's tracer.
func (p *Provider) Tracer() trace.Tracer { return p.tp.Tracer(ScopeName) }

// Shutdown sends the spans not yet exported (within ctx) and stops.
func (p *Provider) Shutdown(ctx context.Context) error { return p.tp.Shutdown(ctx) }

// IDsOnly is a tracer that records nothing but gives spans real ids: what
// a component uses when it is given no tracer.
func IDsOnly() trace.Tracer {
	return sdktrace.NewTracerProvider(sdktrace.WithSampler(idsOnly)).Tracer(ScopeName)
}

// idsOnly is the sampler when no span is exported: a trace hookline starts
// is not sampled; a continued one keeps its parent's sampled flag, so the
// traceparent forwarded to a destination carries the sender's decision
// (its spans are then recorded and dropped: no processor is registered).
var idsOnly = sdktrace.ParentBased(sdktrace.NeverSample())

// propagator reads and writes W3C trace context (traceparent).
var propagator = propagation.TraceContext{}

// TraceParent is the W3C traceparent of ctx's span; "" when it has none.
func TraceParent(ctx context.Context) string {
	c := propagation.MapCarrier{}
	propagator.Inject(ctx, c)
	return c["traceparent"]
}

// Inject sets the traceparent of ctx's span on h (a forward's headers).
func Inject(ctx context.Context, h http.Header) { propagator.Inject(ctx, propagation.HeaderCarrier(h)) }

// Extract is ctx continuing the trace of the request headers h; ctx
// unchanged when h has no valid traceparent.
func Extract(ctx context.Context, h http.Header) context.Context {
	return propagator.Extract(ctx, propagation.HeaderCarrier(h))
}

// ContextWith is ctx continuing the trace of traceparent (as stored with a
// delivery); ctx unchanged when traceparent is empty or malformed.
func ContextWith(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return propagator.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}

// TraceID is the trace id of a traceparent, "" when it has none.
func TraceID(traceparent string) string {
	sc := trace.SpanContextFromContext(ContextWith(context.Background(), traceparent))
	if !sc.IsValid() {
		return ""
	}
	return sc.TraceID().String()
}

// Step starts a span for a step of ctx's span, only if that one is
// recording: a step's id is never forwarded, so an unrecorded trace need
// not pay for it (ctx and a span that does nothing otherwise).
func Step(ctx context.Context, t trace.Tracer, name string) (context.Context, trace.Span) {
	if parent := trace.SpanFromContext(ctx); !parent.IsRecording() {
		return ctx, parent
	}
	return t.Start(ctx, name)
}

// LogHandler adds trace_id and span_id to every record logged with a
// context that holds a valid span.
func LogHandler(h slog.Handler) slog.Handler { return logHandler{h} }

type logHandler struct{ slog.Handler }

func (l logHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return l.Handler.Handle(ctx, r)
}

func (l logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return logHandler{l.Handler.WithAttrs(as)}
}

func (l logHandler) WithGroup(name string) slog.Handler { return logHandler{l.Handler.WithGroup(name)} }
