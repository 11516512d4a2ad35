package migrations_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/internal/pgtest"
	"github.com/hookline/hookline/migrations"
)

func TestUpIsIdempotentAndConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewEmptyPool(t)

	st, err := migrations.Check(ctx, pool)
	require.NoError(t, err)
	require.False(t, st.Current())

	var wg sync.WaitGroup
	errs := make(chan error, 5)
	for range 5 {
		wg.Go(func() { errs <- migrations.Up(ctx, pool, nil) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	st, err = migrations.Check(ctx, pool)
	require.NoError(t, err)
	require.True(t, st.Current())
	require.Len(t, st.HooklineDone, len(migrations.All()))

	var n int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM hookline_events").Scan(&n))
}

func TestDownAndUpAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)

	// down rolls back one step at a time, newest first.
	var exists bool
	for i := len(migrations.All()); i > 1; i-- {
		require.NoError(t, migrations.Down(ctx, pool, false, nil))
		st, err := migrations.Check(ctx, pool)
		require.NoError(t, err)
		require.Len(t, st.HooklineDone, i-1)
	}
	require.NoError(t, pool.QueryRow(ctx, "SELECT to_regclass('hookline_events') IS NOT NULL").Scan(&exists))
	require.True(t, exists)
	require.NoError(t, migrations.Down(ctx, pool, false, nil))
	require.NoError(t, pool.QueryRow(ctx, "SELECT to_regclass('hookline_events') IS NOT NULL").Scan(&exists))
	require.False(t, exists)

	require.NoError(t, migrations.Down(ctx, pool, true, nil))
	require.NoError(t, pool.QueryRow(ctx, "SELECT to_regclass('river_job') IS NOT NULL").Scan(&exists))
	require.False(t, exists)

	require.NoError(t, migrations.Up(ctx, pool, nil))
	st, err := migrations.Check(ctx, pool)
	require.NoError(t, err)
	require.True(t, st.Current())
}

// A database populated by the release before destinations (schema 003: one
// destination per event, its state on the event row) migrates up without
// loss: every event keeps its state, attempts, budget and payload pointer
// as the "default" destination's, claims keep working under their new key,
// dead items belong to the default destination, and the lookup view reads
// the events as they were.
func TestMigrateAPopulatedPreviousRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	for range len(migrations.All()) - 3 {
		require.NoError(t, migrations.Down(ctx, pool, false, nil))
	}
	_, err := pool.Exec(ctx, `
		INSERT INTO hookline_deliveries (id, source, headers, body) VALUES
			(1, 's', '{"Authorization":["Bearer x"],"Content-Type":["application/json"]}', '{"id":"q"}'),
			(2, 's', '{}', '[{"id":"b1"},{"id":"b2"}]');
		INSERT INTO hookline_events (source, event_id, event_type, state, delivery_id, item_offset, item_length, deliveries, attempts,
			completed_at, dedup_until, last_error, job_id, job_attempts) VALUES
			('s', 'q', 't', 'queued', 1, NULL, NULL, 2, 1, NULL, NULL, 'destination answered 500', 7, 1),
			('s', 'p', 't', 'processing', 1, NULL, NULL, 1, 1, NULL, NULL, NULL, 8, 1),
			('s', 'c', 't', 'completed', 2, 1, 11, 1, 1, now(), now() + interval '1 day', NULL, 9, 1),
			('s', 'd', 't', 'dead', 2, 13, 11, 3, 10, NULL, NULL, 'destination answered 503', 10, 10);
		INSERT INTO hookline_dead (source, event_id, reason, attempts, last_error, payload) VALUES ('s', 'd', 'failed', 10, 'destination answered 503', '{"id":"b2"}');
		INSERT INTO hookline_claims (key, state, expires_at) VALUES ('hookline:s:c', 'completed', now() + interval '1 day');`)
	require.NoError(t, err)

	require.NoError(t, migrations.Up(ctx, pool, nil))

	type row struct {
		state, lastErr        string
		attempts, jobAttempts int
		delivery              int64
		offset                *int
	}
	got := map[string]row{}
	rows, err := pool.Query(ctx, `SELECT event_id, state, COALESCE(last_error, ''), attempts, job_attempts, delivery_id, item_offset
		FROM hookline_event_destinations WHERE source = 's' AND destination = 'default'`)
	require.NoError(t, err)
	for rows.Next() {
		var id string
		var r row
		require.NoError(t, rows.Scan(&id, &r.state, &r.lastErr, &r.attempts, &r.jobAttempts, &r.delivery, &r.offset))
		got[id] = r
	}
	require.NoError(t, rows.Err())
	offC, offD := 1, 13
	require.Equal(t, map[string]row{
		"q": {state: "queued", lastErr: "destination answered 500", attempts: 1, jobAttempts: 1, delivery: 1},
		"p": {state: "queued", attempts: 1, jobAttempts: 1, delivery: 1},
		"c": {state: "completed", attempts: 1, jobAttempts: 1, delivery: 2, offset: &offC},
		"d": {state: "dead", lastErr: "destination answered 503", attempts: 10, jobAttempts: 10, delivery: 2, offset: &offD},
	}, got)

	var states []string
	require.NoError(t, pool.QueryRow(ctx, `SELECT array_agg(event_id || '=' || state ORDER BY event_id) FROM hookline_event_states`).Scan(&states))
	require.Equal(t, []string{"c=completed", "d=dead", "p=queued", "q=queued"}, states)
	var claim, dest, headers string
	require.NoError(t, pool.QueryRow(ctx, `SELECT key FROM hookline_claims`).Scan(&claim))
	require.Equal(t, "hookline:s:default:c", claim)
	require.NoError(t, pool.QueryRow(ctx, `SELECT destination FROM hookline_dead`).Scan(&dest))
	require.Equal(t, "default", dest)
	require.NoError(t, pool.QueryRow(ctx, `SELECT headers::text FROM hookline_deliveries WHERE id = 1`).Scan(&headers))
	require.NotContains(t, headers, "Authorization", "credentials are stripped from stored rows")
}

// down --all rolls River back too on a database where a unique job ran more
// than once: its finished runs share a key, which River's own down of its
// migration 006 would have to make unique per kind.
func TestDownAllWithFinishedUniqueJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	_, err := pool.Exec(ctx, `INSERT INTO river_job (args, kind, max_attempts, queue, state, finalized_at, unique_key, unique_states)
		SELECT '{}', 'hookline.orphans', 1, 'default', 'completed', now(), '\x01', B'11110001' FROM generate_series(1, 2);
		INSERT INTO river_job (args, kind, max_attempts, queue, state, unique_key, unique_states)
		VALUES ('{}', 'hookline.orphans', 1, 'default', 'available', '\x01', B'11110001')`)
	require.NoError(t, err)

	require.NoError(t, migrations.Down(ctx, pool, true, nil))
	var exists bool
	require.NoError(t, pool.QueryRow(ctx, "SELECT to_regclass('river_job') IS NOT NULL").Scan(&exists))
	require.False(t, exists)
	require.NoError(t, migrations.Up(ctx, pool, nil))
	st, err := migrations.Check(ctx, pool)
	require.NoError(t, err)
	require.True(t, st.Current())
}
