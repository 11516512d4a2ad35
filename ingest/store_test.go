package ingest

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/internal/pgtest"
)

// testStore is a store on a fresh migrated database, with an insert-only
// River client.
func testStore(t testing.TB) (*store, *pgxpool.Pool) {
	t.Helper()
	pool := pgtest.NewPool(t)
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	require.NoError(t, err)
	return &store{pool: pool, river: rc}, pool
}

// testSource is src with its defaults (one destination), as New leaves it.
func testSource(src *Source) *Source {
	src.withDefaults()
	return src
}

// testDelivery is a one-event JSON delivery of src with id, and header as
// its X-Note header.
func testDelivery(src *Source, id, header string) *Delivery {
	return &Delivery{Source: src, ReceivedAt: time.Now(), ContentType: "application/json",
		Headers: map[string][]string{"X-Note": {header}}, Body: []byte(`{"id":"` + id + `"}`),
		Events: []DeliveryEvent{{ID: id, Type: "t", Length: -1, Matched: []int{0}}}}
}
