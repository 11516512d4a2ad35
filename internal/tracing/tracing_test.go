package tracing_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookline/hookline/internal/tracing"
)

const sender = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// A span started under a sender's traceparent is in the sender's trace,
// with an id of its own; what is injected into a forward names that span.
func TestContinuesTheSendersTrace(t *testing.T) {
	p := newProvider(t, "")
	ctx := tracing.Extract(context.Background(), http.Header{"Traceparent": {sender}})
	ctx, span := p.Tracer().Start(ctx, "ingest")
	sc := span.SpanContext()
	span.End()
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", sc.TraceID().String())
	require.NotEqual(t, "00f067aa0ba902b7", sc.SpanID().String())
	h := http.Header{}
	tracing.Inject(ctx, h)
	require.Equal(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-"+sc.SpanID().String()+"-01", h.Get("Traceparent"),
		"without an exporter the ids are real and the sender's sampled flag is passed on")
	require.Equal(t, h.Get("Traceparent"), tracing.TraceParent(ctx))
}

// Without an exporter, a continued trace keeps the sender's sampled flag
// either way, and a trace hookline starts is not sampled.
func TestSendersSampledFlagIsPassedOn(t *testing.T) {
	for _, tracer := range []trace.Tracer{newProvider(t, "").Tracer(), tracing.IDsOnly()} {
		for _, flag := range []string{"00", "01"} {
			ctx := tracing.Extract(context.Background(), http.Header{"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-" + flag}})
			ctx, span := tracer.Start(ctx, "ingest")
			span.End()
			require.True(t, strings.HasSuffix(tracing.TraceParent(ctx), "-"+flag), "sender %s, forwarded %s", flag, tracing.TraceParent(ctx))
		}
		ctx, span := tracer.Start(context.Background(), "ingest")
		span.End()
		require.True(t, strings.HasSuffix(tracing.TraceParent(ctx), "-00"), tracing.TraceParent(ctx))
	}
}

// Without a sender's traceparent a span starts a trace of its own: every
// event has a trace id, exporter or not.
func TestStartsATrace(t *testing.T) {
	ctx, span := tracing.IDsOnly().Start(context.Background(), "ingest")
	defer span.End()
	require.True(t, span.SpanContext().IsValid())
	tp := tracing.TraceParent(ctx)
	require.Regexp(t, `^00-[0-9a-f]{32}-[0-9a-f]{16}-00$`, tp)
	require.Equal(t, span.SpanContext().TraceID().String(), tracing.TraceID(tp))
}

// A stored traceparent that is empty or malformed continues nothing.
func TestContextWithIgnoresWhatIsNotATraceParent(t *testing.T) {
	for _, v := range []string{"", "garbage", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"} {
		ctx := tracing.ContextWith(context.Background(), v)
		require.False(t, trace.SpanContextFromContext(ctx).IsValid(), "%q", v)
		require.Empty(t, tracing.TraceID(v), "%q", v)
	}
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", tracing.TraceID(sender))
}

// Records logged with a context that holds a span carry its trace_id and
// span_id; others do not.
func TestLogHandlerAddsTraceIDs(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(tracing.LogHandler(slog.NewJSONHandler(&buf, nil))).With("component", "test")
	ctx, span := tracing.IDsOnly().Start(tracing.ContextWith(context.Background(), sender), "attempt")
	defer span.End()
	log.InfoContext(ctx, "attempt failed; will retry")
	log.Info("no span here")
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	require.Len(t, lines, 2)
	var first, second map[string]any
	require.NoError(t, json.Unmarshal(lines[0], &first))
	require.NoError(t, json.Unmarshal(lines[1], &second))
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", first["trace_id"])
	require.Equal(t, span.SpanContext().SpanID().String(), first["span_id"])
	require.Equal(t, "test", first["component"])
	require.NotContains(t, second, "trace_id")
}

func newProvider(t *testing.T, endpoint string) *tracing.Provider {
	p, err := tracing.New(tracing.Config{Endpoint: endpoint, SampleRatio: 1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	return p
}

// The trace id of a stored traceparent, as the event lookup shows it.
func ExampleTraceID() {
	fmt.Println(tracing.TraceID("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"))
	// Output: 4bf92f3577b34da6a3ce929d0e0e4736
}

// tracing.otlp_endpoint is the collector's base URL; the full traces URL,
// as many collectors' documentation gives it, is taken as it is.
func TestTracesURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://otel:4318":                 "http://otel:4318/v1/traces",
		"http://otel:4318/":                "http://otel:4318/v1/traces",
		"https://otel.example/prefix":      "https://otel.example/prefix/v1/traces",
		"http://otel:4318/v1/traces":       "http://otel:4318/v1/traces",
		"http://otel:4318/v1/traces/":      "http://otel:4318/v1/traces",
		"https://otel.example/x/v1/traces": "https://otel.example/x/v1/traces",
	} {
		if got := tracing.TracesURL(in); got != want {
			t.Errorf("TracesURL(%q) = %q, want %q", in, got, want)
		}
	}
}
