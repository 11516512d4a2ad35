package ingest_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/ingest"
	"github.com/hookline/hookline/internal/pgtest"
	"github.com/hookline/hookline/providers"
	swh "github.com/hookline/hookline/providers/standardwebhooks"
)

// TestStandardWebhooksReferenceLibrary: an event signed by the Standard
// Webhooks reference library is accepted over real HTTP into Postgres, then
// is a duplicate; stale and future timestamps are 401.
func TestStandardWebhooksReferenceLibrary(t *testing.T) {
	t.Parallel()
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	pool := pgtest.NewPool(t)
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	require.NoError(t, err)
	prov, err := swh.New(providers.Config{Secrets: []string{secret}})
	require.NoError(t, err)
	srv, err := ingest.New(ingest.Config{Pool: pool, River: rc, IngestRoutes: true, Batch: true, Logger: slog.New(slog.DiscardHandler),
		Sources: []*ingest.Source{{Name: "svix", Provider: prov}}})
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })

	ref, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	body := []byte(`{"type":"invoice.paid","timestamp":"2026-11-30T12:00:00Z","data":{"id":"in_1"}}`)
	signed := func(id string, at time.Time) []string {
		sig, err := ref.Sign(id, at, body)
		require.NoError(t, err)
		return []string{"webhook-id", id, "webhook-timestamp", strconv.FormatInt(at.Unix(), 10), "webhook-signature", sig}
	}

	a := post(t, hs.URL+"/webhooks/svix", body, signed("msg_ref_1", time.Now())...)
	require.Equal(t, http.StatusOK, a.Status, a.Body)
	require.Equal(t, map[string]any{"status": "accepted", "source": "svix", "event_id": "msg_ref_1"}, a.Body)
	require.Equal(t, "duplicate", post(t, hs.URL+"/webhooks/svix", body, signed("msg_ref_1", time.Now())...).Body["status"])

	var typ string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT event_type FROM hookline_events WHERE event_id = 'msg_ref_1'`).Scan(&typ))
	require.Equal(t, "invoice.paid", typ)

	require.Equal(t, http.StatusUnauthorized, post(t, hs.URL+"/webhooks/svix", body, signed("msg_ref_2", time.Now().Add(-10*time.Minute))...).Status)
	require.Equal(t, http.StatusUnauthorized, post(t, hs.URL+"/webhooks/svix", body, signed("msg_ref_3", time.Now().Add(10*time.Minute))...).Status)
	wrong := signed("msg_ref_4", time.Now())
	wrong[5] = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	require.Equal(t, http.StatusUnauthorized, post(t, hs.URL+"/webhooks/svix", body, wrong...).Status)
}
