package jobs_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/internal/metrics"
	"github.com/hookline/hookline/internal/pgtest"
	"github.com/hookline/hookline/jobs"
)

type dsBundle struct {
	pool  *pgxpool.Pool
	river *river.Client[pgx.Tx]
	dead  *jobs.DeadSet
}

// dsSetup builds a DeadSet over a fresh database with an insert-only River
// client; sources "s" (3 attempts) and "t" (5) are configured.
func dsSetup(t *testing.T, batch int) *dsBundle {
	t.Helper()
	pool := pgtest.NewPool(t)
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: quiet()})
	require.NoError(t, err)
	budgets := map[string]int{"s": 3, "t": 5}
	dead, err := jobs.NewDeadSet(&jobs.DeadSetConfig{Pool: pool, River: rc, BulkBatch: batch,
		MaxAttempts: func(s, _ string) (int, bool) { n, ok := budgets[s]; return n, ok }})
	require.NoError(t, err)
	return &dsBundle{pool: pool, river: rc, dead: dead}
}

// deadEvents inserts n consistent dead events (delivery, event, dead item)
// of source with ids prefix1..prefixN.
func (b *dsBundle) deadEvents(t testing.TB, source, prefix string, n int) {
	t.Helper()
	_, err := b.pool.Exec(context.Background(), `WITH d AS (
			INSERT INTO hookline_deliveries (source, content_type, body)
			SELECT $1, 'application/json', convert_to('{"id":"' || $3 || i || '"}', 'UTF8') FROM generate_series(1, $2) i
			RETURNING id, convert_from(body, 'UTF8')::jsonb->>'id' AS eid, body),
		e AS (INSERT INTO hookline_events (source, event_id, delivery_id) SELECT $1, eid, id FROM d),
		r AS (INSERT INTO hookline_event_destinations (source, event_id, destination, state, delivery_id, attempts, last_error)
			SELECT $1, eid, 'default', 'dead', id, 3, 'boom' FROM d)
		INSERT INTO hookline_dead (source, event_id, reason, attempts, last_error, delivery_id, content_type, payload)
		SELECT $1, eid, 'failed', 3, 'boom', id, 'application/json', body FROM d`, source, n, prefix)
	require.NoError(t, err)
}

func (b *dsBundle) count(t testing.TB, q string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), q, args...).Scan(&n))
	return n
}

func (b *dsBundle) firstDeadID(t testing.TB, where string, args ...any) int64 {
	t.Helper()
	var id int64
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT min(id) FROM hookline_dead WHERE `+where, args...).Scan(&id))
	return id
}

func TestDeadSetRetry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("RequeuesEventWithOverrideAndFreshBudget", func(t *testing.T) {
		t.Parallel()
		b := dsSetup(t, 0)
		b.deadEvents(t, "t", "evt_", 1)
		id := b.firstDeadID(t, "true")
		r, err := b.dead.Retry(ctx, id)
		require.NoError(t, err)
		require.False(t, r.Joined)
		require.Equal(t, "t", r.Source)
		require.Equal(t, "evt_1", r.EventID)
		require.Equal(t, "failed", r.Reason)

		job, err := b.river.JobGet(ctx, r.JobID)
		require.NoError(t, err)
		// The budget (the destination's max_attempts) is counted by hookline
		// in the destination's job_attempts per job: a new job starts afresh.
		require.Equal(t, jobs.RiverMaxAttempts, job.MaxAttempts, "River's cap, not the budget")
		require.Equal(t, jobs.QueueFor("t", jobs.DefaultDestination), job.Queue)
		require.Contains(t, string(job.EncodedArgs), `"override_before"`)

		var state string
		var attempts int
		var delivery int64
		var body []byte
		var completedAt *time.Time
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT e.state, e.attempts, e.delivery_id, d.body, e.completed_at FROM hookline_event_destinations e
			JOIN hookline_deliveries d ON d.id = e.delivery_id WHERE e.source = 't' AND e.event_id = 'evt_1' AND e.destination = 'default'`).
			Scan(&state, &attempts, &delivery, &body, &completedAt))
		require.Equal(t, "queued", state)
		require.Equal(t, 3, attempts, "attempts keep counting")
		require.JSONEq(t, `{"id":"evt_1"}`, string(body))
		require.Nil(t, completedAt)
		require.Zero(t, b.count(t, `SELECT count(*) FROM hookline_dead`))

		_, err = b.dead.Retry(ctx, id)
		require.ErrorIs(t, err, jobs.ErrDeadItemNotFound)
	})

	t.Run("KeepsOriginAndTrace", func(t *testing.T) {
		t.Parallel()
		b := dsSetup(t, 0)
		b.deadEvents(t, "t", "evt_", 2)
		const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		_, err := b.pool.Exec(ctx, `UPDATE hookline_deliveries SET origin = 'reconcile', traceparent = $1
			WHERE id = (SELECT delivery_id FROM hookline_events WHERE event_id = 'evt_1')`, tp)
		require.NoError(t, err)
		for _, id := range []string{"evt_1", "evt_2"} {
			_, err = b.dead.Retry(ctx, b.firstDeadID(t, "event_id = $1", id))
			require.NoError(t, err)
		}
		var origin, trace string
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT d.origin, d.traceparent FROM hookline_event_destinations r
			JOIN hookline_deliveries d ON d.id = r.delivery_id WHERE r.event_id = 'evt_1'`).Scan(&origin, &trace))
		require.Equal(t, "reconcile", origin, "the retry's delivery keeps the origin of the one the event died with")
		require.Equal(t, tp, trace, "and its trace")
		var trace2 *string
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT d.origin, d.traceparent FROM hookline_event_destinations r
			JOIN hookline_deliveries d ON d.id = r.delivery_id WHERE r.event_id = 'evt_2'`).Scan(&origin, &trace2))
		require.Equal(t, "webhook", origin)
		require.Nil(t, trace2, "none to keep")
	})

	// The retry forwards the dead item's payload from the delivery it came
	// in with (its Hookline-Delivery-Id) while that delivery holds those
	// bytes: the whole body, or a batch item inside it. Pruned, a copy takes
	// its id back, unless a batch item of another event points into it.
	t.Run("KeepsTheDeliveryItCameInWith", func(t *testing.T) {
		t.Parallel()
		b := dsSetup(t, 0)
		b.deadEvents(t, "t", "evt_", 1)
		b.deadEvents(t, "t", "pruned_", 1)
		b.deadEvents(t, "t", "batch_", 2)
		b.deadEvents(t, "t", "sibling_", 2)
		// batch_1 and batch_2 are two items of one delivery; so are
		// sibling_1 and sibling_2, whose delivery is then pruned.
		for _, prefix := range []string{"batch_", "sibling_"} {
			_, err := b.pool.Exec(ctx, `WITH one AS (
					UPDATE hookline_deliveries SET body = convert_to('{"items":[{"id":"'||$1||'1"},{"id":"'||$1||'2"}]}', 'UTF8')
					WHERE id = (SELECT delivery_id FROM hookline_events WHERE event_id = $1||'1') RETURNING id)
				UPDATE hookline_event_destinations r SET delivery_id = one.id,
					item_offset = CASE r.event_id WHEN $1||'1' THEN 10 ELSE 10 + length('{"id":"'||$1||'1"},') END,
					item_length = length('{"id":"'||$1||'1"}')
				FROM one WHERE r.event_id LIKE $1||'%'`, prefix)
			require.NoError(t, err)
			_, err = b.pool.Exec(ctx, `UPDATE hookline_dead x SET delivery_id = r.delivery_id FROM hookline_event_destinations r
				WHERE r.event_id = x.event_id AND x.event_id LIKE $1||'%'`, prefix)
			require.NoError(t, err)
		}
		deliveryOf := func(eventID string) (int64, string) {
			var id int64
			var body []byte
			require.NoError(t, b.pool.QueryRow(ctx, `SELECT r.delivery_id, hookline_item(d.body, r.item_offset, r.item_length)
				FROM hookline_event_destinations r JOIN hookline_deliveries d ON d.id = r.delivery_id WHERE r.event_id = $1`, eventID).Scan(&id, &body))
			return id, string(body)
		}
		var deadDelivery = map[string]int64{}
		for _, id := range []string{"evt_1", "pruned_1", "batch_2", "sibling_1", "sibling_2"} {
			var d int64
			require.NoError(t, b.pool.QueryRow(ctx, `SELECT delivery_id FROM hookline_dead WHERE event_id = $1`, id).Scan(&d))
			deadDelivery[id] = d
		}
		_, err := b.pool.Exec(ctx, `DELETE FROM hookline_deliveries WHERE id IN ($1, $2)`, deadDelivery["pruned_1"], deadDelivery["sibling_1"])
		require.NoError(t, err)

		for _, id := range []string{"evt_1", "pruned_1", "batch_2", "sibling_1", "sibling_2"} {
			_, err := b.dead.Retry(ctx, b.firstDeadID(t, "event_id = $1", id))
			require.NoError(t, err, id)
		}
		d, body := deliveryOf("evt_1")
		require.Equal(t, deadDelivery["evt_1"], d, "a stored delivery is kept")
		require.JSONEq(t, `{"id":"evt_1"}`, body)
		d, body = deliveryOf("pruned_1")
		require.Equal(t, deadDelivery["pruned_1"], d, "a pruned delivery's id is taken back by its copy")
		require.JSONEq(t, `{"id":"pruned_1"}`, body)
		d, body = deliveryOf("batch_2")
		require.Equal(t, deadDelivery["batch_2"], d, "a batch item is found in its delivery")
		require.JSONEq(t, `{"id":"batch_2"}`, body)
		d1, body := deliveryOf("sibling_1")
		require.JSONEq(t, `{"id":"sibling_1"}`, body)
		d2, body := deliveryOf("sibling_2")
		require.JSONEq(t, `{"id":"sibling_2"}`, body)
		require.NotEqual(t, deadDelivery["sibling_1"], d1, "other items point into the pruned batch: a new id")
		require.NotEqual(t, d1, d2)
	})

	t.Run("CreatesMissingEvent", func(t *testing.T) {
		t.Parallel()
		b := dsSetup(t, 0)
		_, err := b.pool.Exec(ctx, `INSERT INTO hookline_dead (source, event_id, event_type, reason, payload) VALUES ('s', 'orphan', 'x.y', 'duplicate', 'p')`)
		require.NoError(t, err)
		_, err = b.dead.Retry(ctx, b.firstDeadID(t, "true"))
		require.NoError(t, err)
		require.Equal(t, 1, b.count(t, `SELECT count(*) FROM hookline_event_states WHERE source = 's' AND event_id = 'orphan' AND state = 'queued' AND event_type = 'x.y'`))
	})

	t.Run("UnknownSource", func(t *testing.T) {
		t.Parallel()
		b := dsSetup(t, 0)
		b.deadEvents(t, "gone", "evt_", 1)
		_, err := b.dead.Retry(ctx, b.firstDeadID(t, "true"))
		require.ErrorIs(t, err, jobs.ErrUnknownSource)
		require.Equal(t, 1, b.count(t, `SELECT count(*) FROM hookline_dead`), "left in place")
		require.Zero(t, b.count(t, `SELECT count(*) FROM river_job`))
	})

	t.Run("JoinsActiveJob", func(t *testing.T) {
		t.Parallel()
		b := dsSetup(t, 0)
		b.deadEvents(t, "s", "evt_", 1)
		opts := jobs.InsertOptsFor(3)
		opts.ScheduledAt = time.Now().Add(time.Hour)
		waiting, err := b.river.Insert(ctx, jobs.EventArgs{Source: "s", EventID: "evt_1", Destination: jobs.DefaultDestination}, opts)
		require.NoError(t, err)
		_, err = b.pool.Exec(ctx, `UPDATE river_job SET attempt = 2 WHERE id = $1`, waiting.Job.ID)
		require.NoError(t, err)
		_, err = b.pool.Exec(ctx, `UPDATE hookline_event_destinations SET job_id = $1, job_attempts = 2 WHERE source = 's' AND event_id = 'evt_1'`, waiting.Job.ID)
		require.NoError(t, err)

		r, err := b.dead.Retry(ctx, b.firstDeadID(t, "true"))
		require.NoError(t, err)
		require.True(t, r.Joined)
		require.Equal(t, waiting.Job.ID, r.JobID)
		job, err := b.river.JobGet(ctx, r.JobID)
		require.NoError(t, err)
		require.Equal(t, rivertype.JobStateAvailable, job.State, "made available now")
		require.False(t, job.ScheduledAt.After(time.Now().Add(time.Minute)))
		require.Equal(t, 0, b.count(t, `SELECT job_attempts FROM hookline_event_destinations WHERE source = 's' AND event_id = 'evt_1'`),
			"a fresh budget for the joined job")
		require.Contains(t, string(job.EncodedArgs), `"override_before"`)
		require.Equal(t, 1, b.count(t, `SELECT count(*) FROM river_job`))
	})

	t.Run("ConcurrentRetriesOfOneItem", func(t *testing.T) {
		t.Parallel()
		b := dsSetup(t, 0)
		b.deadEvents(t, "s", "evt_", 1)
		id := b.firstDeadID(t, "true")
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Go(func() { _, errs[i] = b.dead.Retry(ctx, id) })
		}
		wg.Wait()
		var ok, gone int
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case errors.Is(err, jobs.ErrDeadItemNotFound):
				gone++
			default:
				t.Fatalf("unexpected error: %v", err)
			}
		}
		require.Equal(t, 1, ok)
		require.Equal(t, 7, gone)
		require.Equal(t, 1, b.count(t, `SELECT count(*) FROM river_job`))
	})
}

func TestDeadSetBulk(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("RetryAllInBatches", func(t *testing.T) {
		t.Parallel()
		b := dsSetup(t, 7)
		b.deadEvents(t, "s", "a_", 50)
		b.deadEvents(t, "t", "b_", 5)
		b.deadEvents(t, "gone", "c_", 3)
		// Two items of one event: the second joins the first's job.
		_, err := b.pool.Exec(ctx, `INSERT INTO hookline_dead (source, event_id, reason, payload) VALUES ('s', 'a_1', 'duplicate', 'x')`)
		require.NoError(t, err)

		res, err := b.dead.RetryAll(ctx, jobs.DeadFilter{Source: "s"})
		require.NoError(t, err)
		require.Equal(t, jobs.BulkResult{Matched: 51, Done: 51}, res)
		require.Equal(t, 50, b.count(t, `SELECT count(*) FROM river_job WHERE args->>'source' = 's'`))
		require.Equal(t, 8, b.count(t, `SELECT count(*) FROM hookline_dead`))

		res, err = b.dead.RetryAll(ctx, jobs.DeadFilter{})
		require.NoError(t, err)
		require.Equal(t, jobs.BulkResult{Matched: 8, Done: 5, Skipped: 3}, res)
		require.Equal(t, 3, b.count(t, `SELECT count(*) FROM hookline_dead WHERE source = 'gone'`))

		res, err = b.dead.RetryAll(ctx, jobs.DeadFilter{Source: "nobody"})
		require.NoError(t, err)
		require.Equal(t, jobs.BulkResult{}, res)
	})

	t.Run("DeleteAllInBatches", func(t *testing.T) {
		t.Parallel()
		b := dsSetup(t, 7)
		b.deadEvents(t, "s", "a_", 30)
		b.deadEvents(t, "t", "b_", 4)
		_, err := b.pool.Exec(ctx, `UPDATE hookline_dead SET reason = 'duplicate' WHERE event_id IN ('a_1', 'a_2')`)
		require.NoError(t, err)
		n, err := b.dead.Count(ctx, jobs.DeadFilter{Source: "s", Reason: "duplicate"})
		require.NoError(t, err)
		require.Equal(t, 2, n)

		res, err := b.dead.DeleteAll(ctx, jobs.DeadFilter{Source: "s", Reason: "failed"})
		require.NoError(t, err)
		require.Equal(t, jobs.BulkResult{Matched: 28, Done: 28}, res)
		require.Equal(t, 6, b.count(t, `SELECT count(*) FROM hookline_dead`))

		res, err = b.dead.DeleteAll(ctx, jobs.DeadFilter{Since: time.Now().Add(time.Hour)})
		require.NoError(t, err)
		require.Equal(t, jobs.BulkResult{}, res)
		res, err = b.dead.DeleteAll(ctx, jobs.DeadFilter{})
		require.NoError(t, err)
		require.Equal(t, jobs.BulkResult{Matched: 6, Done: 6}, res)
	})

	t.Run("FilterValidation", func(t *testing.T) {
		t.Parallel()
		require.ErrorContains(t, jobs.DeadFilter{Reason: "nope"}.Validate(), "reason")
		now := time.Now()
		require.ErrorContains(t, jobs.DeadFilter{Since: now, Until: now}.Validate(), "since")
		require.NoError(t, jobs.DeadFilter{Reason: "duplicate", Since: now, Until: now.Add(time.Second)}.Validate())
	})
}

func TestDeadSetListKeyset(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := dsSetup(t, 0)
	at := time.Now().Truncate(time.Microsecond)
	// Ten items at one instant: only the id orders them.
	_, err := b.pool.Exec(ctx, `INSERT INTO hookline_dead (source, event_id, reason, dead_at, payload)
		SELECT 's', 'e' || i, 'failed', $1, 'x' FROM generate_series(1, 10) i`, at)
	require.NoError(t, err)
	var all []int64
	var after *jobs.DeadKey
	for {
		items, more, err := b.dead.List(ctx, jobs.DeadFilter{}, after, 3)
		require.NoError(t, err)
		for _, it := range items {
			all = append(all, it.ID)
			require.True(t, it.DeadAt.Equal(at))
		}
		if !more {
			break
		}
		last := items[len(items)-1]
		after = &jobs.DeadKey{DeadAt: last.DeadAt, ID: last.ID}
	}
	require.Len(t, all, 10)
	for i := 1; i < len(all); i++ {
		require.Less(t, all[i], all[i-1])
	}

	it, err := b.dead.Get(ctx, all[0])
	require.NoError(t, err)
	require.Equal(t, []byte("x"), it.Payload)
	_, err = b.dead.Get(ctx, 1<<40)
	require.ErrorIs(t, err, jobs.ErrDeadItemNotFound)
	require.ErrorIs(t, b.dead.Delete(ctx, 1<<40), jobs.ErrDeadItemNotFound)
	require.NoError(t, b.dead.Delete(ctx, all[0]))
}

func TestDeadSetEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := dsSetup(t, 0)
	b.deadEvents(t, "s", "evt_", 1)
	_, err := b.pool.Exec(ctx, `INSERT INTO hookline_dead (source, event_id, reason, payload) VALUES ('s', 'evt_1', 'duplicate', 'x')`)
	require.NoError(t, err)
	ev, err := jobs.NewEvents(b.pool).Lookup(ctx, "s", "evt_1")
	require.NoError(t, err)
	require.Equal(t, jobs.EventDead, ev.State)
	require.NotNil(t, ev.DeadItemID)
	require.Equal(t, b.firstDeadID(t, "reason = 'failed'"), *ev.DeadItemID, "the failed item, though the duplicate is newer")
	require.Equal(t, 3, ev.Attempts)
	require.Equal(t, 1, ev.Deliveries)
	require.Nil(t, ev.CompletedAt)

	_, err = jobs.NewEvents(b.pool).Lookup(ctx, "s", "nope")
	require.ErrorIs(t, err, jobs.ErrEventNotFound)
	_, err = jobs.NewEvents(b.pool).Lookup(ctx, "s", " ")
	require.ErrorIs(t, err, jobs.ErrEventNotFound)

	// A completed event that came back after its window: queued, and its
	// old completed_at is not reported.
	_, err = b.pool.Exec(ctx, `UPDATE hookline_event_destinations SET state = 'queued', completed_at = now() - interval '1 day'`)
	require.NoError(t, err)
	ev, err = jobs.NewEvents(b.pool).Lookup(ctx, "s", "evt_1")
	require.NoError(t, err)
	require.Equal(t, jobs.EventQueued, ev.State)
	require.Nil(t, ev.CompletedAt)
}

func TestDeadItemsCollector(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := dsSetup(t, 0)
	c := metrics.NewDatabaseCollector(jobs.Stats{Pool: b.pool}, quiet(), 0)
	require.Zero(t, testutil.CollectAndCount(c, "hookline_dead_items"))

	b.deadEvents(t, "s", "a_", 3)
	b.deadEvents(t, "t", "b_", 1)
	_, err := b.pool.Exec(ctx, `UPDATE hookline_dead SET reason = 'duplicate' WHERE event_id = 'a_1'`)
	require.NoError(t, err)
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(`
# HELP hookline_dead_items Items in the dead set now, by source and reason.
# TYPE hookline_dead_items gauge
hookline_dead_items{reason="duplicate",source="s"} 1
hookline_dead_items{reason="failed",source="s"} 2
hookline_dead_items{reason="failed",source="t"} 1
`), "hookline_dead_items"))

	// Items gone: the gauge drops to zero rather than vanishing.
	_, err = b.dead.DeleteAll(ctx, jobs.DeadFilter{Source: "s"})
	require.NoError(t, err)
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(`
# HELP hookline_dead_items Items in the dead set now, by source and reason.
# TYPE hookline_dead_items gauge
hookline_dead_items{reason="duplicate",source="s"} 0
hookline_dead_items{reason="failed",source="s"} 0
hookline_dead_items{reason="failed",source="t"} 1
`), "hookline_dead_items"))

	// A configured source is reported with both reasons from the first
	// scrape, 0 when it has no items: alerts and absent() see a series.
	configured := metrics.NewDatabaseCollector(jobs.Stats{Pool: b.pool, Destinations: []jobs.DestinationName{{Source: "u", Name: "default"}, {Source: "u", Name: "second"}, {Source: "t", Name: "default"}}}, quiet(), 0)
	require.NoError(t, testutil.CollectAndCompare(configured, strings.NewReader(`
# HELP hookline_dead_items Items in the dead set now, by source and reason.
# TYPE hookline_dead_items gauge
hookline_dead_items{reason="duplicate",source="t"} 0
hookline_dead_items{reason="duplicate",source="u"} 0
hookline_dead_items{reason="failed",source="t"} 1
hookline_dead_items{reason="failed",source="u"} 0
`), "hookline_dead_items"))

	require.NoError(t, testutil.CollectAndCompare(configured, strings.NewReader(`
# HELP hookline_database_up 1 when this scrape's database queries (dead items, queue, destinations) answered; 0 when one failed and its series are absent.
# TYPE hookline_database_up gauge
hookline_database_up 1
`), "hookline_database_up"))

	// Database unreachable: none of the database's series is emitted (no
	// false zeros), and hookline_database_up says so.
	pool, err := pgxpool.New(ctx, "postgres://nobody@127.0.0.1:1/none?connect_timeout=1")
	require.NoError(t, err)
	pool.Close()
	down := metrics.NewDatabaseCollector(jobs.Stats{Pool: pool}, quiet(), 0)
	require.Equal(t, 1, testutil.CollectAndCount(down))
	require.NoError(t, testutil.CollectAndCompare(down, strings.NewReader(`
# HELP hookline_database_up 1 when this scrape's database queries (dead items, queue, destinations) answered; 0 when one failed and its series are absent.
# TYPE hookline_database_up gauge
hookline_database_up 0
`), "hookline_database_up"))
}

func TestQueueCollector(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := dsSetup(t, 0)
	c := metrics.NewDatabaseCollector(jobs.Stats{Pool: b.pool}, quiet(), 0)
	require.Equal(t, 6, testutil.CollectAndCount(c, "hookline_queue_jobs", "hookline_queue_oldest_available_seconds"), "five states and the lag, all zero")
	require.Zero(t, testutil.ToFloat64(onlyLag{c}))

	late := jobs.InsertOptsFor(3)
	late.ScheduledAt = time.Now().Add(time.Hour)
	_, err := b.river.Insert(ctx, jobs.EventArgs{Source: "s", EventID: "later"}, late)
	require.NoError(t, err)
	waiting, err := b.river.Insert(ctx, jobs.EventArgs{Source: "s", EventID: "waiting"}, jobs.InsertOptsFor(3))
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, `UPDATE river_job SET scheduled_at = now() - interval '1 minute' WHERE id = $1`, waiting.Job.ID)
	require.NoError(t, err)
	_, err = b.river.Insert(ctx, jobs.EventArgs{Source: "s", EventID: "now"}, jobs.InsertOptsFor(3))
	require.NoError(t, err)
	_, err = b.river.Insert(ctx, jobs.CleanupArgs{}, nil) // another kind: not counted
	require.NoError(t, err)

	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(`
# HELP hookline_queue_jobs Event jobs in River's queue by state (unfinished states only).
# TYPE hookline_queue_jobs gauge
hookline_queue_jobs{state="available"} 2
hookline_queue_jobs{state="pending"} 0
hookline_queue_jobs{state="retryable"} 0
hookline_queue_jobs{state="running"} 0
hookline_queue_jobs{state="scheduled"} 1
`), "hookline_queue_jobs"))
	lag := testutil.ToFloat64(onlyLag{c})
	require.GreaterOrEqual(t, lag, 59.0)
	require.Less(t, lag, 600.0)
}

// onlyLag exposes just hookline_queue_oldest_available_seconds of a queue
// collector, for testutil.ToFloat64 (which wants a single metric).
type onlyLag struct{ c prometheus.Collector }

func (o onlyLag) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(o, ch) }

func (o onlyLag) Collect(ch chan<- prometheus.Metric) {
	all := make(chan prometheus.Metric, 64)
	o.c.Collect(all)
	close(all)
	for m := range all {
		if strings.Contains(m.Desc().String(), `"hookline_queue_oldest_available_seconds"`) {
			ch <- m
		}
	}
}
