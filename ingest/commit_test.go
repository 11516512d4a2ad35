package ingest

import (
	"bytes"
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
				m:       metrics.For(nil),
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
