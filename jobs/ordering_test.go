package jobs_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/http/httpguts"

	"github.com/hookline/hookline/internal/pgtest"
	"github.com/hookline/hookline/jobs"
)

func TestOrderKeyHeader(t *testing.T) {
	t.Parallel()
	require.Equal(t, "pi_3MtwBwLkdIwHu7ix28a3tqPa", jobs.OrderKeyHeader("pi_3MtwBwLkdIwHu7ix28a3tqPa"))
	require.Equal(t, "a b\tc%d", jobs.OrderKeyHeader("a b\tc%d"), "nothing to encode: left as it is")
	require.Equal(t, "line%0Abreak%25", jobs.OrderKeyHeader("line\nbreak%"))
	require.Equal(t, "ключ", jobs.OrderKeyHeader("ключ"))
	// HTTP trims a header value: spaces and tabs at either end are encoded,
	// or " k " would reach the destination as the key "k".
	require.Equal(t, "%20k%25 1%09", jobs.OrderKeyHeader(" k% 1\t"))
	require.Equal(t, "%09%20a b", jobs.OrderKeyHeader("\t a b"))
}

// Whatever the key, the header value is one net/http sends.
func FuzzOrderKeyHeader(f *testing.F) {
	for _, s := range []string{"pi_1", "a\r\nX-Evil: 1", "\x00\x7f", "ключ"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		v := jobs.OrderKeyHeader(key)
		if !httpguts.ValidHeaderFieldValue(v) {
			t.Fatalf("%q renders as %q, which net/http refuses", key, v)
		}
		if v != strings.Trim(v, " \t") {
			t.Fatalf("%q renders as %q, which HTTP trims", key, v)
		}
		h := http.Header{}
		h.Set("Hookline-Order-Key", v)
		if h.Get("Hookline-Order-Key") != v {
			t.Fatalf("%q does not round-trip", v)
		}
	})
}

// Handing a line on reads the line's own places (the line index) and
// wakes the next place's job through River's unique index, even in a
// generic plan made on the statistics of empty tables (a cached plan, as a
// pooled connection keeps it). The plan this rules out was measured reading
// every waiting row of the destination per hand-over: 4.5 ms on average,
// up to a second, at a 20,000-event backlog.
func TestAdvanceLineReadsOnlyTheLine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	// The backlog of a drain, 20,000 waiting places of one destination in
	// 10,000 lines, with statistics taken while the tables were empty (as
	// when the worker starts on a freshly filled queue).
	_, err = conn.Exec(ctx, `ANALYZE hookline_event_destinations, river_job`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `INSERT INTO hookline_event_destinations (source, event_id, destination, delivery_id, order_key, order_seq)
		SELECT 's', 'e' || i, 'd', 1, 'key' || (i % 10000), i / 10000 + 1 FROM generate_series(1, 20000) i`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `INSERT INTO river_job (args, kind, max_attempts, queue, state, unique_key, unique_states)
		SELECT jsonb_build_object('source', 's', 'event_id', 'e' || i, 'destination', 'd'), 'hookline.event', 25, 'q',
			CASE WHEN i > 10000 THEN 'pending' ELSE 'available' END::river_job_state, sha256(('e' || i)::bytea), B'11110001'
		FROM generate_series(1, 20000) i`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `PREPARE advance AS `+jobs.AdvanceLineSQL)
	require.NoError(t, err)
	plan, err := jobs.ExplainForTest(ctx, conn, `EXECUTE advance('s', 'd', 'k', 'e', NULL, NULL, false)`)
	require.NoError(t, err)
	require.Contains(t, plan, "hookline_event_destinations_line", plan)
	require.NotContains(t, plan, "hookline_event_destinations_queued", plan)
	require.Contains(t, plan, "river_job_unique_idx", "the next place's job is found by its unique key:\n%s", plan)
}
