package reconcile_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/hookline/hookline/internal/pgtest"
	"github.com/hookline/hookline/internal/reconcile"
	"github.com/hookline/hookline/internal/reconcile/fakeapi"
)

// printStore knows no event and prints what it stores (in production:
// package ingest's store).
type printStore struct{}

func (printStore) Known(_ context.Context, _ string, events []reconcile.Event) ([]reconcile.Lookup, error) {
	return make([]reconcile.Lookup, len(events)), nil
}

func (printStore) Store(_ context.Context, source string, events []reconcile.Event) (int, error) {
	for _, e := range events {
		fmt.Println("store", source, e.ID, e.Type)
	}
	return len(events), nil
}

// One on-demand run against a fake Stripe: the events within the lookback
// that hookline never accepted are stored, oldest first.
func ExampleRunner_Run() {
	tb, done := pgtest.ExampleTB()
	defer done()
	pool := pgtest.NewPool(tb) // in production: the instance's pool, migrated

	now := time.Now()
	api := fakeapi.NewStripe(nil, "sk_test_example", []fakeapi.Event{
		{ID: "evt_3", Type: "charge.refunded", Created: now.Add(-time.Hour)},
		{ID: "evt_2", Type: "charge.succeeded", Created: now.Add(-2 * time.Hour)},
		{ID: "evt_1", Type: "charge.succeeded", Created: now.Add(-100 * time.Hour)}, // before the lookback
	})
	defer api.Close()

	r, err := reconcile.New(reconcile.Config{
		Pool:   pool,
		Store:  printStore{},
		Logger: slog.New(slog.DiscardHandler),
		Sources: []reconcile.SourceConfig{{
			Name: "stripe", Provider: "stripe", Lookback: 72 * time.Hour,
			APIKey: "sk_test_example", APIURL: api.URL, // APIURL "": https://api.stripe.com
		}},
	})
	if err != nil {
		panic(err)
	}
	res, err := r.Run(context.Background(), "stripe")
	if err != nil {
		panic(err)
	}
	fmt.Printf("checked %d, missing %d\n", res.Checked, res.Missing)
	// Output:
	// store stripe evt_2 charge.succeeded
	// store stripe evt_3 charge.refunded
	// checked 2, missing 2
}
