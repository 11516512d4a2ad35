package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRatePacesTheSenders: with -rate the senders together send no more
// than the rate allows (at most one request per sender ahead of the
// schedule), where closed-loop senders against the same instant answers
// send as fast as the answers come.
func TestRatePacesTheSenders(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"status":"accepted"}`))
	}))
	t.Cleanup(srv.Close)
	g, err := newGenerator(benchSecret, "p", srv.URL+"/webhooks/stripe", 100, 0)
	require.NoError(t, err)

	const senders, rate, d = 4, 100.0, 500 * time.Millisecond
	paced := runLoad(context.Background(), loadConfig{concurrency: senders, duration: d, rate: rate, gen: g})
	require.Zero(t, paced.errors)
	require.LessOrEqual(t, paced.sent, int(rate*d.Seconds())+senders, "paced requests")
	require.Positive(t, paced.sent)

	closed := runLoad(context.Background(), loadConfig{concurrency: senders, duration: d, gen: g})
	require.Greater(t, closed.sent, int(rate*d.Seconds())+senders, "closed-loop requests against instant answers")
}
