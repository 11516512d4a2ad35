package jobs_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/hookline/hookline/ingest"
	"github.com/hookline/hookline/internal/pgtest"
	"github.com/hookline/hookline/jobs"
	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/stripe"
)

// A Go program that records Stripe payments in its own table, exactly once:
// the ledger row and the event's completed mark commit in one transaction
// (transactional mode), so duplicate deliveries, retries and crashes never
// write a second row.
func ExampleHandlerFunc() {
	ctx := context.Background()
	tb, done := pgtest.ExampleTB()
	defer done()
	pool := pgtest.NewPool(tb) // in production: pgxpool.New(ctx, databaseURL), then migrations.Up
	if _, err := pool.Exec(ctx, `CREATE TABLE payments (event_id text PRIMARY KEY, body jsonb)`); err != nil {
		panic(err)
	}

	// The handler: one ledger row per event, written inside tx.
	record := jobs.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev *jobs.Event) error {
		_, err := tx.Exec(ctx, `INSERT INTO payments (event_id, body) VALUES ($1, $2)`, ev.ID, ev.Body)
		return err
	})
	sources := []*jobs.Source{{Name: "stripe", Handler: jobs.TypeMux{"payment_intent.succeeded": record}}}
	client, err := jobs.NewClient(jobs.ClientConfig{Pool: pool, Sources: sources, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	// Record this instance's queues before accepting events: the elected
	// leader of any instance sharing the database sends the events of
	// queues no live instance records to the dead set.
	queues := jobs.EventQueues(sources)
	instance, err := jobs.StartInstance(ctx, pool, client.ID(), jobs.InstanceQueues{Configures: queues, Runs: queues,
		Bounds: jobs.EventQueueBounds(sources)}, slog.New(slog.DiscardHandler))
	if err != nil {
		panic(err)
	}
	defer instance.Stop(ctx)
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	defer client.Stop(ctx) //nolint:errcheck
	// Ingest: verify Stripe signatures, store, enqueue.
	verifier, _ := stripe.New(providers.Config{Secrets: []string{"whsec_example"}})
	srv, err := ingest.New(ingest.Config{Pool: pool, River: client, IngestRoutes: true, Logger: slog.New(slog.DiscardHandler),
		Sources: []*ingest.Source{{Name: "stripe", Provider: verifier}}})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv)
	defer hs.Close()

	// Stripe delivers the same event three times.
	body := `{"id":"evt_1","type":"payment_intent.succeeded","data":{"object":{"amount":2000}}}`
	for range 3 {
		sig := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: []byte(body), Secret: "whsec_example", Timestamp: time.Now()}).Header
		req := httptest.NewRequest("POST", hs.URL+"/webhooks/stripe", strings.NewReader(body))
		req.RequestURI = ""
		req.Header.Set("Stripe-Signature", sig)
		resp, err := hs.Client().Do(req)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
	}

	// One event job (the duplicates never reached the queue): wait for the
	// event to complete, as the admin API's event lookup reports it.
	events := jobs.NewEvents(pool)
	poll, timeout := time.NewTicker(20*time.Millisecond), time.After(10*time.Second)
	defer poll.Stop()
	for done := false; !done; {
		select {
		case <-poll.C:
			st, err := events.Lookup(ctx, "stripe", "evt_1")
			done = err == nil && st.State == "completed"
		case <-timeout:
			panic("the event was not processed")
		}
	}
	var rows int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM payments`).Scan(&rows); err != nil {
		panic(err)
	}
	fmt.Println("payments recorded:", rows)
	// Output: payments recorded: 1
}
