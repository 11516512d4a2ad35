package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/idem"
	"github.com/hookline/hookline/jobs"
)

// TestTransactionalExactlyOnce: 1,000 events, each delivered 10 times by
// concurrent senders, a Go handler that writes a ledger row and then fails
// at random (so its row must roll back) — exactly 1,000 ledger rows.
func TestTransactionalExactlyOnce(t *testing.T) {
	t.Parallel()
	const events, copies = 1000, 10
	var failures atomic.Int64
	handler := jobs.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev *jobs.Event) error {
		if _, err := tx.Exec(ctx, `INSERT INTO ledger (event_id) VALUES ($1)`, ev.ID); err != nil {
			return err
		}
		if rand.IntN(4) == 0 { // a quarter of the attempts fail after writing
			failures.Add(1)
			return errors.New("random failure after the ledger write")
		}
		return nil
	})
	b := start(t, &jobs.Source{Handler: handler, MaxAttempts: 25, BackoffMin: time.Millisecond, BackoffMax: 10 * time.Millisecond}, false)
	_, err := b.pool.Exec(context.Background(), `CREATE TABLE ledger (event_id text NOT NULL)`) // no unique index: duplicates would show
	require.NoError(t, err)

	work := make(chan string)
	var wg sync.WaitGroup
	var accepted atomic.Int64
	for range 32 {
		wg.Go(func() {
			for id := range work {
				if b.send(t, id) == "accepted" {
					accepted.Add(1)
				}
			}
		})
	}
	for c := range copies {
		for i := range events {
			work <- fmt.Sprintf("evt_%04d", (i+c*37)%events) // copies interleave
		}
	}
	close(work)
	wg.Wait()
	require.EqualValues(t, events, accepted.Load(), "each event accepted once, the rest duplicates")

	require.Eventually(t, func() bool {
		var n int
		_ = b.pool.QueryRow(context.Background(), `SELECT count(*) FROM hookline_event_states WHERE state = 'completed'`).Scan(&n)
		return n == events
	}, 120*time.Second, 50*time.Millisecond)
	var rows, distinct int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*), count(DISTINCT event_id) FROM ledger`).Scan(&rows, &distinct))
	require.Equal(t, events, rows, "exactly one ledger row per event")
	require.Equal(t, events, distinct)
	require.Positive(t, failures.Load(), "the random failures must have happened")
}

// TestLeaseRenewalKeepsLongHandler: a handler running three times its lease
// keeps the claim (renewed while it runs); a competing claimer keeps getting
// a duplicate, and the event completes once.
func TestLeaseRenewalKeepsLongHandler(t *testing.T) {
	t.Parallel()
	const lease = time.Second // renewed every third of it; long enough that a loaded machine keeps the pace
	running := make(chan struct{})
	finish := make(chan struct{})
	var runs atomic.Int32
	handler := jobs.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev *jobs.Event) error {
		runs.Add(1)
		close(running)
		select {
		case <-finish:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	b := start(t, &jobs.Source{Handler: handler, Lease: lease, Timeout: time.Minute}, false)
	require.Equal(t, "accepted", b.send(t, "evt_long"))
	<-running
	store, err := idem.NewStore(b.pool, &idem.Config{Table: jobs.ClaimsTable})
	require.NoError(t, err)
	// Compete for 3× the lease: every claim attempt finds the key held.
	deadline := time.Now().Add(3 * lease)
	tries := 0
	for time.Now().Before(deadline) {
		_, err := store.Claim(context.Background(), nil, idem.Options{Namespace: jobs.Namespace, Scope: "s", Segment: jobs.DefaultDestination + ":evt_long", Holder: "intruder", Lease: lease})
		var dup *idem.DuplicateError
		require.ErrorAs(t, err, &dup, "the claim must still be held after %d tries", tries)
		require.Equal(t, idem.StateProcessing, dup.State)
		tries++
		<-time.After(lease / 10)
	}
	close(finish)
	b.waitState(t, "evt_long", "completed")
	require.EqualValues(t, 1, runs.Load())
}
