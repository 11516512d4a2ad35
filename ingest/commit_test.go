package ingest

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/semaphore"

	"github.com/hookline/hookline/internal/metrics"
)

// appendHeadersJSON must mean what json.Marshal means (jsonb keeps no
// escapes, so equal after decoding is equal in Postgres).
func TestAppendHeadersJSON(t *testing.T) {
	t.Parallel()
	cases := []map[string][]string{
		nil,
		{},
		{"Content-Type": {"application/json"}, "Stripe-Signature": {"t=1,v1=ab"}, "X-Many": {"a", "b", ""}},
		{"X-Quote": {`he said "hi" \ back`}, "X-Ctl": {"a\tb\nc\rd\x01e\x1f"}, "X-Html": {"<a href='x'>&</a>"}},
		{"X-Utf8": {"héllo ☃ 😀", "\u2028\u2029"}, "X-Bad": {"a\xffb\xc3", "\xed\xa0\x80"}},
		{"X-Nil": nil, "X-Empty": {}},
	}
	for _, h := range cases {
		got := appendHeadersJSON(nil, h)
		require.True(t, json.Valid(got), "%s", got)
		want, err := json.Marshal(h)
		require.NoError(t, err)
		var g, w any
		require.NoError(t, json.Unmarshal(got, &g))
		require.NoError(t, json.Unmarshal(want, &w))
		if h == nil {
			w = map[string]any{} // a delivery's headers are never nil; {} is what we store
		}
		require.Equal(t, w, g, "%s", got)
	}
}

func BenchmarkHeadersJSON(b *testing.B) {
	h := map[string][]string{
		"Content-Type":     {"application/json"},
		"Stripe-Signature": {"t=1764504000,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd"},
		"User-Agent":       {"Stripe/1.0 (+https://stripe.com/docs/webhooks)"},
		"X-Request-Id":     {"0f0e3c1a-6a9e-4d38-9b1b-3b1f8c7e2d11"},
	}
	b.Run("appendHeadersJSON", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf = appendHeadersJSON(buf[:0], h)
			_ = string(buf)
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			out, _ := json.Marshal(h)
			_ = string(out)
		}
	})
}

// singleResponseJSON must mean what c.JSON of the response struct means,
// whatever the event id holds.
func TestSingleResponseJSON(t *testing.T) {
	t.Parallel()
	type singleResponse struct {
		Status  string `json:"status"`
		Source  string `json:"source"`
		EventID string `json:"event_id"`
	}
	for _, id := range []string{"evt_1", `q"u\o`, "<a>&", "héllo ☃", "a\xffb", "ctl\x00\x1f\n", ""} {
		got := singleResponseJSON("accepted", "stripe", id)
		require.True(t, json.Valid(got), "%q", got)
		require.Equal(t, byte('\n'), got[len(got)-1], "ends with a newline, as c.JSON")
		want, err := json.Marshal(singleResponse{Status: "accepted", Source: "stripe", EventID: id})
		require.NoError(t, err)
		var g, w singleResponse
		require.NoError(t, json.Unmarshal(got, &g))
		require.NoError(t, json.Unmarshal(want, &w))
		require.Equal(t, w, g)
	}
}

// readBody reads exactly the body, with or without a Content-Length,
// refuses more than the limit either way, and reserves pending-bytes budget
// for what it received (at most twice that, or the first chunk), never for
// what was announced.
func TestReadBody(t *testing.T) {
	t.Parallel()
	small := bytes.Repeat([]byte("0123456789"), 150)
	large := bytes.Repeat([]byte("0123456789"), 10_000) // past firstChunk: the buffer grows
	for _, tc := range []struct {
		name       string
		body       []byte
		length     int64 // -1: unknown (chunked)
		limit      int64
		wantStatus int // 0: read fine
	}{
		{"exact", small, int64(len(small)), 1 << 20, 0},
		{"chunked", small, -1, 1 << 20, 0},
		{"at the limit", small, int64(len(small)), int64(len(small)), 0},
		{"chunked over the limit", small, -1, 100, http.StatusRequestEntityTooLarge},
		{"declared over the limit", small, int64(len(small)), 100, http.StatusRequestEntityTooLarge},
		{"empty", nil, 0, 100, 0},
		{"large exact", large, int64(len(large)), 1 << 20, 0},
		{"large chunked", large, -1, 1 << 20, 0},
		{"large chunked at the limit", large, -1, int64(len(large)), 0},
		{"large chunked over the limit", large, -1, int64(len(large)) - 1, http.StatusRequestEntityTooLarge},
		{"shorter than declared", small, int64(len(small)) + 10, 1 << 20, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Server{
				cfg:     Config{MaxBodyBytes: tc.limit, BodyTimeout: time.Second, QueueTimeout: time.Second, MaxPendingBytes: 1 << 30},
				pending: semaphore.NewWeighted(1 << 30),
				m:       metrics.New(),
				log:     slog.New(slog.DiscardHandler),
			}
			req := httptest.NewRequest(http.MethodPost, "/webhooks/x", bytes.NewReader(tc.body))
			req.ContentLength = tc.length
			c := echo.New().NewContext(req, httptest.NewRecorder())
			got, reserved, ref := s.readBody(c, &Source{Name: "x"}, time.Now().Add(time.Second))
			s.pending.Release(reserved)
			require.True(t, s.pending.TryAcquire(1<<30), "every reserved byte is released")
			if tc.wantStatus != 0 {
				require.NotNil(t, ref)
				require.Equal(t, tc.wantStatus, ref.status)
				return
			}
			require.Nil(t, ref)
			require.True(t, bytes.Equal(tc.body, got))
			require.LessOrEqual(t, reserved, max(int64(firstChunk), 2*int64(len(tc.body))))
		})
	}
}
