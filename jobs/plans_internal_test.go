package jobs

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/idem"
	"github.com/hookline/hookline/internal/pgtest"
)

// The worker's batch statements run under force_generic_plan (batch.go):
// planned once per connection, maybe on the statistics of empty tables (a
// worker started on a freshly filled queue, or a fresh database), and kept
// while the tables grow until autovacuum analyzes them. Such plans still
// find every row through an index: none reads a whole table of claims,
// destinations, deliveries, dead items, attempts, lines or River jobs (the
// destinations' table has a row per configured destination: a few). The
// plans are made while the tables are empty and read once they hold 20,000
// rows each, autovacuum kept off them in between.
func TestBatchStatementsGenericPlansUseIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	store, err := idem.NewStore(pool, &idem.Config{Table: ClaimsTable})
	require.NoError(t, err)
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	tables := `hookline_claims, hookline_deliveries, hookline_events, hookline_event_destinations, hookline_dead, hookline_attempts,
		hookline_order_keys, river_job`
	for _, table := range strings.Split(tables, ",") {
		_, err = conn.Exec(ctx, `ALTER TABLE `+table+` SET (autovacuum_enabled = false)`)
		require.NoError(t, err)
	}
	_, err = conn.Exec(ctx, `ANALYZE hookline_destinations, `+tables)
	require.NoError(t, err)
	for _, q := range batchPlansSQL {
		_, err = conn.Exec(ctx, q)
		require.NoError(t, err)
	}
	statements := map[string]struct{ sql, args string }{
		"claim": {claimManyStartSQL(store.ClaimManySQL),
			`ARRAY['hookline:s:d:e1'], ARRAY['job:1:attempt:1'], ARRAY[60000000]::bigint[], ARRAY['s'], ARRAY['e1'], ARRAY['d'], ARRAY[1]::bigint[]`},
		"claim taken": {claimTakenManyStartSQL(store.ClaimManySQL),
			`ARRAY['hookline:s:d:e1'], ARRAY['job:1:attempt:1'], ARRAY[60000000]::bigint[], ARRAY['s'], ARRAY['e1'], ARRAY['d'], ARRAY[1]::bigint[],
			ARRAY[1], 'runner'`},
		"complete": {completeManySQL(store.CompleteManySQL),
			`ARRAY['hookline:s:d:e1'], ARRAY[1]::bigint[], ARRAY[1]::bigint[], ARRAY['s'], ARRAY['e1'], ARRAY['d'], ARRAY[1]::bigint[],
			ARRAY[1]::bigint[], ARRAY[1], ARRAY[200], ARRAY[3], ARRAY[NULL]::text[]`},
		"lock lines":                 {lockLinesSQL, `ARRAY['s'], ARRAY['d'], ARRAY['key1']`},
		"take available":             {takeAvailableJobsSQL, `ARRAY['q'], ARRAY[5], 'runner', ` + takeCursorArgs},
		"take available after lines": {takeAvailableJobsAfterLinesSQL, `ARRAY['q'], ARRAY[5], 'runner', ` + takeCursorArgs},
		"advance lines": {advanceLinesSQL,
			`ARRAY['s'], ARRAY['d'], ARRAY['key1'], ARRAY['e1'], ARRAY[NULL]::text[], ARRAY['']::text[], ARRAY[true], 'runner'`},
	}
	for name, st := range statements {
		_, err := conn.Exec(ctx, `PREPARE "`+name+`" AS `+st.sql)
		require.NoError(t, err, name)
		_, err = ExplainForTest(ctx, conn, `EXECUTE "`+name+`"(`+st.args+`)`) // the generic plan, made and kept
		require.NoError(t, err, name)
	}
	for _, fill := range []string{
		`INSERT INTO hookline_deliveries (source, content_type, body) SELECT 's', 'application/json', '{}' FROM generate_series(1, 20000)`,
		`INSERT INTO hookline_events (source, event_id, event_type, delivery_id) SELECT 's', 'e' || i, 't', 1 FROM generate_series(1, 20000) i`,
		`INSERT INTO hookline_event_destinations (source, event_id, destination, delivery_id, order_key, order_seq)
			SELECT 's', 'e' || i, 'd', 1, 'key' || (i % 10000), i / 10000 + 1 FROM generate_series(1, 20000) i`,
		`INSERT INTO hookline_claims (key, state, expires_at) SELECT 'hookline:s:d:e' || i, 'processing', now() FROM generate_series(1, 20000) i`,
		`INSERT INTO hookline_order_keys (source, destination, key, last_seq, done_seq) SELECT 's', 'd', 'key' || i, 2, 0 FROM generate_series(0, 9999) i`,
		`INSERT INTO hookline_attempts (source, event_id, destination, n, status, duration_ms, error)
			SELECT 's', 'e' || i, 'd', 1, 500, 1, 'x' FROM generate_series(1, 20000) i`,
		`INSERT INTO hookline_dead (source, event_id, destination, reason, payload) SELECT 's', 'e' || i, 'd', 'failed', '' FROM generate_series(1, 20000) i`,
		`INSERT INTO river_job (args, kind, max_attempts, queue, state, unique_key, unique_states)
			SELECT jsonb_build_object('source', 's', 'event_id', 'e' || i, 'destination', 'd'), 'hookline.event', 25, 'q',
				'available'::river_job_state, sha256(('e' || i)::bytea), B'11110001'
			FROM generate_series(1, 20000) i`,
	} {
		_, err := conn.Exec(ctx, fill)
		require.NoError(t, err, fill)
	}
	for name, st := range statements {
		plan, err := ExplainForTest(ctx, conn, `EXECUTE "`+name+`"(`+st.args+`)`)
		require.NoError(t, err, name)
		if strings.HasPrefix(name, "take available") { // starts at its cursor in River's fetch index
			require.Regexp(t, `Index Cond: [^\n]*ROW\(priority, scheduled_at, id\) > ROW\(u\.priority, u\.scheduled_at, u\.id\)`, plan, name)
		}
		if name == "advance lines" { // looks for a line's first waiting place after its ended ones
			require.Regexp(t, `Index Cond: [^\n]*\(order_key = k\.key\) AND \(order_seq > k\.done_seq\)`, plan, name)
		}
		for _, table := range strings.Split(tables, ",") {
			require.NotContains(t, plan, "Seq Scan on "+strings.TrimSpace(table)+" ", "%s reads a whole table:\n%s", name, plan)
		}
	}
}

// takeCursorArgs are a take's cursor arguments: after priority 1, a
// scheduled_at and id 10.
const takeCursorArgs = `ARRAY[1]::smallint[], ARRAY['2026-01-01']::timestamptz[], ARRAY[10]::bigint[]`
