package ingest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
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

// readBody reads exactly the body, with or without a Content-Length, and
// refuses more than the limit either way.
func TestReadBody(t *testing.T) {
	t.Parallel()
	body := bytes.Repeat([]byte("0123456789"), 150)
	for _, tc := range []struct {
		name    string
		length  int64 // -1: unknown (chunked)
		limit   int64
		wantErr bool
	}{
		{"exact", int64(len(body)), 1 << 20, false},
		{"chunked", -1, 1 << 20, false},
		{"at the limit", int64(len(body)), int64(len(body)), false},
		{"chunked over the limit", -1, 100, true},
		{"declared over the limit", int64(len(body)), 100, true},
		{"empty", 0, 100, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := body
			if tc.length == 0 {
				b = nil
			}
			req := httptest.NewRequest(http.MethodPost, "/webhooks/x", bytes.NewReader(b))
			req.ContentLength = tc.length
			got, err := readBody(httptest.NewRecorder(), req, tc.limit)
			if tc.wantErr {
				var mbe *http.MaxBytesError
				require.ErrorAs(t, err, &mbe)
				return
			}
			require.NoError(t, err)
			require.Equal(t, len(b), len(got))
			require.True(t, bytes.Equal(b, got))
		})
	}
}
