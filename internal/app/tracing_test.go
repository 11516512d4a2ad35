package app_test

// Traces that follow an event, end to end: a sender's request into an App,
// the event's attempts at a loopback destination, and the spans exported to
// an OTLP/HTTP receiver in this process.

import (
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/internal/app"
	"github.com/hookline/hookline/internal/pgtest"
)

// otlpReceiver is an OTLP/HTTP trace receiver (protobuf, as the SDK's
// exporter sends by default) that keeps every span it is sent.
type otlpReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	spans []*tracepb.Span
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v1/traces" {
			http.NotFound(w, req)
			return
		}
		b, err := io.ReadAll(req.Body)
		var msg coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(b, &msg)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range msg.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				r.spans = append(r.spans, ss.GetSpans()...)
			}
		}
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	}))
	t.Cleanup(r.Close)
	return r
}

// byTrace returns the spans received for the trace id (hex).
func (r *otlpReceiver) byTrace(traceID string) []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range r.spans {
		if hex.EncodeToString(s.GetTraceId()) == traceID {
			out = append(out, s)
		}
	}
	return out
}

func spanAttr(s *tracepb.Span, key string) (int64, bool) {
	for _, kv := range s.GetAttributes() {
		if kv.GetKey() == key {
			return kv.GetValue().GetIntValue(), true
		}
	}
	return 0, false
}

// traceDest is a destination that records each forward's traceparent; it
// answers 500 to the nth request (from 1) when fail(n), else 200.
type traceDest struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

func newTraceDest(t *testing.T, fail func(n int) bool) *traceDest {
	d := &traceDest{}
	d.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		d.mu.Lock()
		d.seen = append(d.seen, r.Header.Get("Traceparent"))
		n := len(d.seen)
		d.mu.Unlock()
		if fail(n) {
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	t.Cleanup(d.Close)
	return d
}

// parents are the traceparents of the forwards so far, in arrival order.
func (d *traceDest) parents() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.seen)
}

var traceparentRE = regexp.MustCompile(`^00-([0-9a-f]{32})-([0-9a-f]{16})-0[01]$`)

// One event, one trace: the sender's traceparent is continued by the ingest
// span (with its verify and commit steps), and each attempt — a 500, then a
// 200 — adds its claim, forward (with the destination's status code) and
// completion to the same trace. Every forward carries a traceparent of that
// trace naming its forward span; the lookup shows the trace id.
func TestOneEventOneTrace(t *testing.T) {
	t.Parallel()
	recv := newOTLPReceiver(t)
	dest := newTraceDest(t, func(n int) bool { return n == 1 })
	cfg := fmt.Sprintf(`listen: 127.0.0.1:0
database_url: %q
admin_token: %s
tracing: {otlp_endpoint: %q, sample_ratio: 1}
sources:
  - name: s
    provider: stripe
    secrets: [%q]
    lease: 10s
    destination: {url: %q, timeout: 2s, max_attempts: 3, backoff: {min: 100ms, max: 200ms}}
`, pgtest.NewURL(t), hostileToken, recv.URL, stripeSecret, dest.URL)
	ip := startApp(t, cfg, app.Options{})

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	incoming := "00-" + traceID + "-00f067aa0ba902b7-01"
	require.Equal(t, http.StatusOK, postEvent(testClient, ip.url(0), "s", "evt_traced", stripeSecret, "traceparent", incoming).Status)
	ev := eventState(t, ip.url(0), "s", "evt_traced", 30*time.Second, "completed")
	require.Equal(t, traceID, ev["trace_id"], "the lookup shows the sender's trace")
	ip.stop(t) // flushes the exporter

	parents := dest.parents()
	require.Len(t, parents, 2)
	var forwardIDs []string
	for _, p := range parents {
		m := traceparentRE.FindStringSubmatch(p)
		require.NotNil(t, m, "forward's traceparent %q", p)
		require.Equal(t, traceID, m[1], "the forward continues the sender's trace")
		require.NotEqual(t, "00f067aa0ba902b7", m[2], "a span of hookline's own")
		forwardIDs = append(forwardIDs, m[2])
	}

	spans := recv.byTrace(traceID)
	names := map[string]int{}
	byID := map[string]*tracepb.Span{}
	for _, s := range spans {
		names[s.GetName()]++
		byID[hex.EncodeToString(s.GetSpanId())] = s
	}
	require.Equal(t, 1, names["POST /webhooks/{source}"], "spans: %v", names)
	require.Equal(t, 1, names["verify"], "spans: %v", names)
	require.Equal(t, 1, names["commit"], "spans: %v", names)
	for _, n := range []string{"attempt", "claim", "forward"} {
		require.Equal(t, 2, names[n], "one %s span per attempt: %v", n, names)
	}
	require.Equal(t, 1, names["complete"], "spans: %v", names)
	require.Equal(t, 1, names["record failure"], "spans: %v", names)
	for _, s := range spans {
		if s.GetName() == "POST /webhooks/{source}" {
			require.Equal(t, "00f067aa0ba902b7", hex.EncodeToString(s.GetParentSpanId()), "ingest continues the sender's span")
		}
	}
	var statuses []int64
	for i, id := range forwardIDs {
		s := byID[id]
		require.NotNil(t, s, "forward %d's traceparent names an exported span", i+1)
		require.Equal(t, "forward", s.GetName())
		require.Equal(t, tracepb.Span_SPAN_KIND_CLIENT, s.GetKind())
		code, ok := spanAttr(s, "http.response.status_code")
		require.True(t, ok, "the forward span has the destination's status code")
		statuses = append(statuses, code)
		attempt := byID[hex.EncodeToString(s.GetParentSpanId())]
		require.NotNil(t, attempt, "the forward's parent is exported")
		require.Equal(t, "attempt", attempt.GetName())
	}
	require.Equal(t, []int64{500, 200}, statuses)
}

// Without an exporter, and without a traceparent from the sender, hookline
// starts a trace: every forward still carries a valid traceparent, and the
// lookup shows its trace id.
func TestForwardsCarryATraceWithoutAnExporter(t *testing.T) {
	t.Parallel()
	got := make(chan string, 3)
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case got <- r.Header.Get("Traceparent"):
		default:
		}
	}))
	t.Cleanup(dest.Close)
	cfg := stripeConfig(pgtest.NewURL(t), "", fmt.Sprintf(`    destination: {url: %q, timeout: 2s}
`, dest.URL))
	ip := startApp(t, cfg, app.Options{})
	forwarded := func(id string) (map[string]any, string) {
		t.Helper()
		ev := eventState(t, ip.url(0), "s", id, 30*time.Second, "completed")
		select {
		case p := <-got:
			return ev, p
		case <-time.After(10 * time.Second):
			t.Fatal("no forward")
		}
		return nil, ""
	}
	require.Equal(t, http.StatusOK, postEvent(testClient, ip.url(0), "s", "evt_untraced", stripeSecret).Status)
	ev, p := forwarded("evt_untraced")
	m := traceparentRE.FindStringSubmatch(p)
	require.NotNil(t, m, "forward's traceparent %q", p)
	require.Equal(t, ev["trace_id"], m[1], "the forward is in the event's trace")
	require.NotEqual(t, "00000000000000000000000000000000", m[1])
	require.True(t, strings.HasSuffix(p, "-00"), "a trace hookline starts without an exporter is not sampled: %q", p)

	// A sender's sampled flag reaches the destination as it came, so a
	// destination that traces keeps the sender's decision.
	for i, flag := range []string{"01", "00"} {
		id := fmt.Sprintf("evt_flag_%d", i)
		incoming := "00-4bf92f3577b34da6a3ce929d0e0e47" + fmt.Sprintf("%02d", i) + "-00f067aa0ba902b7-" + flag
		require.Equal(t, http.StatusOK, postEvent(testClient, ip.url(0), "s", id, stripeSecret, "traceparent", incoming).Status)
		_, p := forwarded(id)
		require.True(t, strings.HasPrefix(p, "00-4bf92f3577b34da6a3ce929d0e0e47"+fmt.Sprintf("%02d", i)+"-"), "the sender's trace: %q", p)
		require.True(t, strings.HasSuffix(p, "-"+flag), "sender's flag %s, forwarded %q", flag, p)
	}
}

// An event has one trace, whatever runs its later attempts: an operator's
// retry of its dead item and a provider's re-delivery after it died (which
// arrives with a trace of its own) forward in the trace of the event's
// first delivery, the one the lookup shows.
func TestRetriesAndRedeliveriesStayInTheEventsTrace(t *testing.T) {
	t.Parallel()
	var fail atomic.Bool
	fail.Store(true)
	dest := newTraceDest(t, func(int) bool { return fail.Load() })
	cfg := stripeConfig(pgtest.NewURL(t), "", fmt.Sprintf(`    destination: {url: %q, timeout: 2s, max_attempts: 1}
`, dest.URL))
	ip := startApp(t, cfg, app.Options{})
	base := ip.url(0)

	const first, second = "4bf92f3577b34da6a3ce929d0e0e4736", "0af7651916cd43dd8448eb211c80319c"
	require.Equal(t, http.StatusOK, postEvent(testClient, base, "s", "evt_again", stripeSecret, "traceparent", "00-"+first+"-00f067aa0ba902b7-01").Status)
	eventState(t, base, "s", "evt_again", 30*time.Second, "dead")

	// The operator retries the dead item; it fails again.
	code, body := adminPost(t, base, "/admin/dead/"+deadItem(t, base, "s", "evt_again")["id"].(string)+"/retry")
	require.Equal(t, http.StatusAccepted, code, body)
	require.Eventually(t, func() bool { return len(dest.parents()) == 2 }, 30*time.Second, 50*time.Millisecond)
	eventState(t, base, "s", "evt_again", 30*time.Second, "dead")

	// The provider delivers it again, in another trace; now it succeeds.
	fail.Store(false)
	a := postEvent(testClient, base, "s", "evt_again", stripeSecret, "traceparent", "00-"+second+"-b7ad6b7169203331-01")
	require.Equal(t, http.StatusOK, a.Status, a.Body)
	ev := eventState(t, base, "s", "evt_again", 30*time.Second, "completed")
	require.Equal(t, first, ev["trace_id"], "the lookup shows the first delivery's trace")

	parents := dest.parents()
	require.Len(t, parents, 3)
	for i, p := range parents {
		m := traceparentRE.FindStringSubmatch(p)
		require.NotNil(t, m, "forward %d's traceparent %q", i+1, p)
		require.Equal(t, first, m[1], "forward %d (first attempt, operator retry, re-delivery) is in the event's trace", i+1)
	}
}
