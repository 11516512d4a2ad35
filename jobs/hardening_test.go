package jobs_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/jobs"
)

// A duplicate job of an on_duplicate: reject source still lands in the dead
// set when retention has pruned the event's stored delivery (the event is
// completed, within its dedup window): with an empty payload and a last
// error that says why.
func TestRejectedDuplicateAfterRetention(t *testing.T) {
	t.Parallel()
	dest := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(dest.Close)
	b := start(t, &jobs.Source{Destination: &jobs.Destination{URL: dest.URL}, Reject: true}, true)
	require.Equal(t, "accepted", b.send(t, "evt_pruned"))
	b.waitState(t, "evt_pruned", "completed")
	ctx := context.Background()
	_, err := b.pool.Exec(ctx, `DELETE FROM hookline_deliveries`) // as retention does for completed events
	require.NoError(t, err)
	_, err = b.client.Insert(ctx, jobs.EventArgs{Source: "s", EventID: "evt_pruned"}, nil)
	require.NoError(t, err)
	var lastErr string
	var payload []byte
	require.Eventually(t, func() bool {
		return b.pool.QueryRow(ctx, `SELECT last_error, payload FROM hookline_dead WHERE event_id = 'evt_pruned' AND reason = 'duplicate'`).
			Scan(&lastErr, &payload) == nil
	}, 30*time.Second, 20*time.Millisecond, "the duplicate is in the dead set")
	require.Empty(t, payload)
	require.Contains(t, lastErr, "pruned")
}

// CleanText makes any string storable as Postgres text and bounded.
func TestCleanText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"plain", 100, "plain"},
		{"a\x00b", 100, "a\uFFFDb"},
		{"a\xffb", 100, "a\uFFFDb"},
		{strings.Repeat("é", 10), 7, "éé\u2026"}, // 4+3 bytes fit
		{strings.Repeat("é", 10), 6, "é\u2026"},  // never half an é
		{strings.Repeat("a", 10), 10, strings.Repeat("a", 10)},
		{strings.Repeat("a", 11), 10, strings.Repeat("a", 7) + "\u2026"},
	} {
		got := jobs.CleanText(tc.in, tc.n)
		require.Equal(t, tc.want, got, "%q", tc.in)
	}
}

func FuzzCleanText(f *testing.F) {
	for _, s := range []string{"", "a\x00b", "\xff\xfe", strings.Repeat("é", 300), "日本語\xe6\x97"} {
		f.Add(s, 512)
	}
	f.Fuzz(func(t *testing.T, s string, n int) {
		n = max(n%2048, 0)
		got := jobs.CleanText(s, n)
		if !utf8.ValidString(got) || strings.IndexByte(got, 0) >= 0 {
			t.Fatalf("CleanText(%q, %d) = %q: not storable text", s, n, got)
		}
		if len(got) > max(n, len("…")) {
			t.Fatalf("CleanText(%q, %d) is %d bytes", s, n, len(got))
		}
		if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 && len(s) <= n && got != s {
			t.Fatalf("CleanText changed clean text %q to %q", s, got)
		}
	})
}

// The forwarder does not follow redirects: a 3xx is a failed attempt that
// names Location, and the error answer kept is valid UTF-8, at most 512
// bytes of the destination's answer.
func TestForwarderRedirectsAndExcerpts(t *testing.T) {
	t.Parallel()
	var targetHits int
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { targetHits++ }))
	t.Cleanup(target.Close)
	answer := func(code int, body string) *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if code >= 300 && code < 400 {
				http.Redirect(w, r, target.URL+"/x", code)
				return
			}
			w.WriteHeader(code)
			_, _ = w.Write([]byte(body))
		}))
		t.Cleanup(s.Close)
		return s
	}
	fwd := jobs.NewForwarder()
	ev := &jobs.Event{Source: "s", ID: "e", Body: []byte("{}"), Attempt: 1}
	for _, code := range []int{301, 302, 303, 307, 308} {
		_, err := fwd.Forward(context.Background(), &jobs.Destination{URL: answer(code, "").URL}, ev)
		var de *jobs.DestinationError
		require.ErrorAs(t, err, &de, "a %d is a failed attempt", code)
		require.Equal(t, code, de.Status)
		require.Contains(t, err.Error(), target.URL+"/x")
	}
	require.Zero(t, targetHits, "no redirect was followed")

	cut := "a" + strings.Repeat("é", 300) // byte 512 splits an é
	for _, body := range []string{"bad \xff utf-8", "nul \x00 byte", cut} {
		_, err := fwd.Forward(context.Background(), &jobs.Destination{URL: answer(500, body).URL}, ev)
		var de *jobs.DestinationError
		require.ErrorAs(t, err, &de)
		require.True(t, utf8.ValidString(de.Excerpt), "%q", de.Excerpt)
		require.NotContains(t, de.Excerpt, "\x00")
		require.LessOrEqual(t, len(de.Excerpt), 512)
	}
	_, err := fwd.Forward(context.Background(), &jobs.Destination{URL: answer(500, cut).URL}, ev)
	var de *jobs.DestinationError
	require.ErrorAs(t, err, &de)
	require.Equal(t, cut[:511], de.Excerpt, "the cut character is dropped, the rest kept")
}

// A redirect without Location is a failed attempt whose error says so.
func TestForwarderRedirectWithoutLocation(t *testing.T) {
	t.Parallel()
	noLocation := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusFound) }))
	t.Cleanup(noLocation.Close)
	_, err := jobs.NewForwarder().Forward(context.Background(), &jobs.Destination{URL: noLocation.URL, Timeout: time.Second},
		&jobs.Event{Source: "s", ID: "e", Body: []byte("{}"), Attempt: 1})
	var de *jobs.DestinationError
	require.ErrorAs(t, err, &de)
	require.Equal(t, http.StatusFound, de.Status)
	require.ErrorContains(t, err, "destination answered 302, a redirect without a Location header")
}

// An answer of 101 Switching Protocols (after which the client no longer
// watches the attempt's deadline) is a failed attempt that ends within the
// destination's timeout, even if the destination then holds the connection
// open and silent.
func TestForwarder101EndsWithinTimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	upgrade := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = buf.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: x\r\n\r\n")
		_ = buf.Flush()
		<-release // holds the connection open, saying nothing
	}))
	t.Cleanup(upgrade.Close)
	t.Cleanup(func() { close(release) })
	type result struct {
		status int
		err    error
	}
	done := make(chan result, 1)
	go func() {
		status, err := jobs.NewForwarder().Forward(context.Background(), &jobs.Destination{URL: upgrade.URL, Timeout: time.Second},
			&jobs.Event{Source: "s", ID: "e", Body: []byte("{}"), Attempt: 1})
		done <- result{status, err}
	}()
	select {
	case r := <-done:
		var de *jobs.DestinationError
		require.ErrorAs(t, r.err, &de, "a 101 is a failed attempt")
		require.Equal(t, http.StatusSwitchingProtocols, de.Status)
		require.Equal(t, "destination answered 101", r.err.Error())
	case <-time.After(10 * time.Second):
		t.Fatal("a forward answered 101 did not end within its timeout")
	}
}

// A destination URL's password and query values (often a token) never
// reach an attempt's error, which the lookup, the dead set, logs and alerts
// show.
func TestDestinationURLCredentialsAreRedacted(t *testing.T) {
	t.Parallel()
	require.Equal(t, "http://alice:***@h:1/close?api_key=***&token=***", jobs.RedactURL("http://alice:PASSW0RD@h:1/close?token=SECRETTOKEN&api_key=K2"))
	require.Equal(t, "https://h/hooks", jobs.RedactURL("https://h/hooks"))
	require.Equal(t, "http://bob@h/x", jobs.RedactURL("http://bob@h/x"))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens: the forward fails to connect
	f := jobs.NewForwarder()
	_, err = f.Forward(context.Background(), &jobs.Destination{URL: "http://alice:PASSW0RD@" + addr + "/close?token=SECRETTOKEN", Timeout: time.Second},
		&jobs.Event{Source: "s", ID: "evt_1", Body: []byte(`{}`), Attempt: 1})
	require.Error(t, err)
	require.NotContains(t, err.Error(), "PASSW0RD")
	require.NotContains(t, err.Error(), "SECRETTOKEN")
	require.Contains(t, err.Error(), "token=***")
}
