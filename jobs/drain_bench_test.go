package jobs_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/ingest"
	"github.com/hookline/hookline/internal/pgtest"
	"github.com/hookline/hookline/jobs"
	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/stripe"
)

// BenchmarkDrain measures a worker draining a backlog of 1,000 accepted
// events (building it is not timed), side by side: an HTTP destination
// answering 200 with group commit (the default) and with the per-event
// path, and a Go handler in transactional mode writing one row, which
// always takes the per-event path (its completion commits in the handler's
// own transaction). events/s is the figure; cmd/hookline-bench measures
// the same against a textbook River worker at scale.
func BenchmarkDrain(b *testing.B) {
	const backlog = 1000
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	b.Cleanup(dest.Close)
	handler := jobs.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev *jobs.Event) error {
		_, err := tx.Exec(ctx, `INSERT INTO ledger (event_id) VALUES ($1)`, ev.ID)
		return err
	})
	cases := []struct {
		name     string
		src      func() *jobs.Source
		perEvent bool
	}{
		{"http-batched", func() *jobs.Source { return &jobs.Source{Destination: &jobs.Destination{URL: dest.URL}} }, false},
		{"http-per-event", func() *jobs.Source { return &jobs.Source{Destination: &jobs.Destination{URL: dest.URL}} }, true},
		{"go-handler", func() *jobs.Source { return &jobs.Source{Handler: handler} }, false},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var total time.Duration
			for range b.N {
				b.StopTimer()
				client, wait := drainBacklog(b, c.src(), c.perEvent, backlog)
				b.StartTimer()
				start := time.Now()
				require.NoError(b, client.Start(context.Background()))
				wait()
				total += time.Since(start)
				b.StopTimer()
				stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_ = client.Stop(stopCtx)
				cancel()
				b.StartTimer()
			}
			b.ReportMetric(float64(backlog*b.N)/total.Seconds(), "events/s")
		})
	}
}

// drainBacklog stores backlog accepted events for src on a fresh database
// and returns a worker client, not started, and a function that waits
// until every event is completed.
func drainBacklog(b *testing.B, src *jobs.Source, perEvent bool, backlog int) (*river.Client[pgx.Tx], func()) {
	pool := pgtest.NewPool(b)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `CREATE TABLE ledger (event_id text NOT NULL)`)
	require.NoError(b, err)
	src.Name = "s"
	client, err := jobs.NewClient(jobs.ClientConfig{Pool: pool, Sources: []*jobs.Source{src}, Logger: quiet(), PerEvent: perEvent})
	require.NoError(b, err)
	prov, err := stripe.New(providers.Config{Secrets: []string{secret}})
	require.NoError(b, err)
	srv, err := ingest.New(ingest.Config{Pool: pool, River: client, IngestRoutes: true, Batch: true, Logger: quiet(),
		Sources: []*ingest.Source{{Name: "s", Provider: prov, MaxAttempts: 3}}})
	require.NoError(b, err)
	hs := httptest.NewServer(srv)
	bd := &bundle{pool: pool, client: client, ingest: hs.URL + "/webhooks/s"}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := g; i < backlog; i += 16 {
				bd.send(b, fmt.Sprintf("evt_drain_%05d", i))
			}
		})
	}
	wg.Wait()
	hs.Close()
	srv.Close()
	wait := func() {
		for {
			var n int
			require.NoError(b, pool.QueryRow(ctx, `SELECT count(*) FROM hookline_event_destinations WHERE state = 'completed'`).Scan(&n))
			if n == backlog {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return client, wait
}
