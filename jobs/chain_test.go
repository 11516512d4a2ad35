package jobs_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/ingest"
	"github.com/hookline/hookline/jobs"
	"github.com/hookline/hookline/providers"
)

// TestChainRunsTheLineHere: the worker that ends a place of a hot key's
// line takes the next job itself (straight from pending to running, in the
// transaction that ends the place) and runs it, so the line is not woken
// through River; a chained job that fails is recorded in River as River's
// executor records it (retryable, its error in errors), then retried by
// River in the line's order. Per key: forwards never overlap and follow
// acceptance order; every job ends completed. Once the chain runs, the
// advance that takes a job answers the job after it, whose claim then
// rides with the next completion: one round trip (the completion, the
// advance, the claim and the COMMIT in one pgx batch) per event.
func TestChainRunsTheLineHere(t *testing.T) {
	t.Parallel()
	const events = 12
	release := make(chan struct{})
	dest := newOrderRecorder(t, recorderOptions{IDFormat: "evt_hot_%d", Hold: time.Millisecond,
		Before: func(n int) {
			if n == 0 {
				<-release // the line's later events are all waiting (pending) when the head completes
			}
		},
		Fail: func(n, earlier int) bool { return n == 5 && earlier == 0 }, // the first attempt of event 5 fails
	})
	keyOf, err := providers.ParseKeyResolver("json:data.object.id")
	require.NoError(t, err)
	trips := &batchRecorder{}
	b := startOrdered(t, &jobs.Source{MaxAttempts: 3, BackoffMin: 5 * time.Millisecond, BackoffMax: 10 * time.Millisecond,
		Destination: &jobs.Destination{URL: dest.URL}}, false, func(c *jobs.ClientConfig) { c.Pool = tracedPool(t, c.Pool, trips) },
		&ingest.Ordering{Key: keyOf, KeyName: "json:data.object.id"})
	for n := range events {
		body := fmt.Sprintf(`{"id":"evt_hot_%d","type":"charge.updated","created":1764504000,"data":{"object":{"id":"ch_hot"}}}`, n)
		require.Equal(t, "accepted", b.sendBody(t, []byte(body)))
	}
	close(release)

	b.waitIdle(t, 60*time.Second)
	ctx := context.Background()

	want := []int{0, 1, 2, 3, 4, 5, 5, 6, 7, 8, 9, 10, 11}
	require.Equal(t, map[string][]int{"ch_hot": want}, dest.forwards(t), "forwards in acceptance order, the failed one retried before the next")

	requireJobsRemoved(t, b, events)
	var chained int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM `+everyJob+` j WHERE kind = $1 AND attempted_at = scheduled_at`,
		jobs.EventArgs{}.Kind()).Scan(&chained))
	t.Logf("%d of %d jobs chained", chained, events)
	require.Positive(t, chained, "no job was taken into a chain (a chained job is attempted at the instant it is scheduled)")
	ahead := claimedAhead(t, b)
	t.Logf("%d of %d claims taken with the completion before them", ahead, events)
	require.Positive(t, ahead, "no chained job's claim was taken in the transaction that took the job")
	single := trips.count(func(sqls []string) bool {
		return slices.Contains(sqls, "COMMIT") && slices.ContainsFunc(sqls, func(q string) bool { return strings.Contains(q, "UPDATE hookline_order_keys") })
	})
	t.Logf("%d of %d completions took the next claim in their own round trip", single, events)
	require.GreaterOrEqual(t, single, 3, "a chained completion whose next job was known took its claim in a second round trip")

	// The failed attempt of event 5: recorded in River (an error, attempt
	// counted), retried, completed; hookline counted two attempts.
	requireRetriedOnce(t, b, "evt_hot_5")
}

// batchRecorder records the SQL of every pgx batch a pool sends (one
// round trip each).
type batchRecorder struct {
	mu      sync.Mutex
	batches [][]string
}

func (r *batchRecorder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}
func (r *batchRecorder) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData)     {}
func (r *batchRecorder) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *batchRecorder) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}
func (r *batchRecorder) TraceBatchStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	sqls := make([]string, 0, data.Batch.Len())
	for _, q := range data.Batch.QueuedQueries {
		sqls = append(sqls, q.SQL)
	}
	r.mu.Lock()
	r.batches = append(r.batches, sqls)
	r.mu.Unlock()
	return ctx
}

// count is the number of batches recorded whose statements match.
func (r *batchRecorder) count(match func(sqls []string) bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, b := range r.batches {
		if match(b) {
			n++
		}
	}
	return n
}

// tracedPool is a second pool on pool's database whose batches rec
// records.
func tracedPool(t *testing.T, pool *pgxpool.Pool, rec *batchRecorder) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pool.Config().ConnString())
	require.NoError(t, err)
	cfg.ConnConfig.Tracer = rec
	traced, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(traced.Close)
	return traced
}

// claimedAhead counts the claims taken in the transaction that completed
// the place before theirs (claimAhead): their claimed_at is that
// transaction's now(), the earlier claim's completed_at.
func claimedAhead(t *testing.T, b *bundle) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM hookline_claims c
		JOIN hookline_event_destinations r ON c.key = 'hookline:' || r.source || ':' || r.destination || ':' || r.event_id
		JOIN hookline_event_destinations p ON p.source = r.source AND p.destination = r.destination AND p.order_key = r.order_key
			AND p.order_seq = r.order_seq - 1
		JOIN hookline_claims pc ON pc.key = 'hookline:' || p.source || ':' || p.destination || ':' || p.event_id
		WHERE c.claimed_at = pc.completed_at`).Scan(&n))
	return n
}

// A claim taken ahead, in the transaction that ended the place before it,
// sees the line as that transaction left it: with ordering.stale: skip,
// an event older (ordering.by) than one forwarded just before it in the
// same chain is completed unforwarded, and a newer one is forwarded.
func TestChainClaimAheadSeesStale(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	dest := newOrderRecorder(t, recorderOptions{IDFormat: "evt_st_%d", Before: func(n int) {
		if n == 0 {
			<-release
		}
	}})
	keyOf, err := providers.ParseKeyResolver("json:data.object.id")
	require.NoError(t, err)
	byOf, err := providers.ParseKeyResolver("json:created")
	require.NoError(t, err)
	b := startOrdered(t, &jobs.Source{MaxAttempts: 3, StaleSkip: true, Destination: &jobs.Destination{URL: dest.URL}}, false,
		func(*jobs.ClientConfig) {}, &ingest.Ordering{Key: keyOf, By: byOf, KeyName: "json:data.object.id"})
	created := []int{100, 50, 200, 150, 300, 300, 250, 400}
	for n, c := range created {
		body := fmt.Sprintf(`{"id":"evt_st_%d","type":"charge.updated","created":%d,"data":{"object":{"id":"ch_st"}}}`, n, c)
		require.Equal(t, "accepted", b.sendBody(t, []byte(body)))
	}
	close(release)

	b.waitIdle(t, 60*time.Second)
	ctx := context.Background()
	require.Equal(t, map[string][]int{"ch_st": {0, 2, 4, 5, 7}}, dest.forwards(t),
		"forwarded: each event not older than the greatest created forwarded before it")
	var skipped []string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT array_agg(event_id ORDER BY order_seq) FROM hookline_event_destinations
		WHERE state = 'completed' AND skipped = 'stale'`).Scan(&skipped))
	require.Equal(t, []string{"evt_st_1", "evt_st_3", "evt_st_6"}, skipped)
	var counted, logged int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT (SELECT coalesce(sum(attempts + job_attempts), 0) FROM hookline_event_destinations WHERE skipped = 'stale'),
		(SELECT count(*) FROM hookline_attempts a JOIN hookline_event_destinations r USING (source, event_id, destination) WHERE r.skipped = 'stale')`).Scan(&counted, &logged))
	require.Zero(t, counted, "a skipped event spent no attempt")
	require.Zero(t, logged, "and logged none")
	ahead := claimedAhead(t, b)
	t.Logf("%d of %d claims taken with the completion before them", ahead, len(created))
	require.Positive(t, ahead, "no chained job's claim was taken in the transaction that took the job")
}

// TestChainTakesAvailableJobs: a worker that completes an unordered event
// takes an available job of the destination's queue in the same
// transaction, with its claim, and runs it itself. Every event is forwarded
// once and every job ends completed; River recorded a chained job that
// failed (errors 1, attempt 2) and retried it.
func TestChainTakesAvailableJobs(t *testing.T) {
	t.Parallel()
	const events = 60
	var mu sync.Mutex
	forwards := map[string]int{}
	failed := false
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Hookline-Event-Id")
		mu.Lock()
		forwards[id]++
		fail := id == "evt_av_30" && !failed
		failed = failed || fail
		mu.Unlock()
		time.Sleep(time.Millisecond)
		if fail {
			http.Error(w, "first attempt fails", http.StatusInternalServerError)
		}
	}))
	t.Cleanup(dest.Close)
	b := startOrdered(t, &jobs.Source{MaxAttempts: 3, BackoffMin: 5 * time.Millisecond, BackoffMax: 10 * time.Millisecond,
		Destination: &jobs.Destination{URL: dest.URL}}, false, func(c *jobs.ClientConfig) { c.Workers = 4 }, nil)
	for n := range events {
		require.Equal(t, "accepted", b.send(t, fmt.Sprintf("evt_av_%d", n)))
	}
	b.waitIdle(t, 60*time.Second)
	ctx := context.Background()

	mu.Lock()
	for n := range events {
		id := fmt.Sprintf("evt_av_%d", n)
		want := 1
		if id == "evt_av_30" {
			want = 2
		}
		require.Equal(t, want, forwards[id], id)
	}
	mu.Unlock()
	requireJobsRemoved(t, b, events)
	var ahead int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM hookline_claims c
		WHERE EXISTS (SELECT 1 FROM hookline_claims p WHERE p.key <> c.key AND p.completed_at = c.claimed_at)`).Scan(&ahead))
	t.Logf("%d of %d claims taken with another event's completion", ahead, events)
	require.Positive(t, ahead, "no available job was taken and claimed by a completing worker")
	requireRetriedOnce(t, b, "evt_av_30")
}

// An ordered event whose line has no next job waiting takes an available
// job of the queue instead: another line's head. Per key, forwards still
// follow acceptance order and never overlap.
func TestChainTakesAnotherLinesHead(t *testing.T) {
	t.Parallel()
	const keys, perKey = 30, 2
	dest := newOrderRecorder(t, recorderOptions{IDFormat: "evt_ln_%d_%d", Hold: time.Millisecond})
	keyOf, err := providers.ParseKeyResolver("json:data.object.id")
	require.NoError(t, err)
	b := startOrdered(t, &jobs.Source{MaxAttempts: 3, Destination: &jobs.Destination{URL: dest.URL}}, false,
		func(c *jobs.ClientConfig) { c.Workers = 3 }, &ingest.Ordering{Key: keyOf, KeyName: "json:data.object.id"})
	for n := range perKey {
		for k := range keys {
			body := fmt.Sprintf(`{"id":"evt_ln_%d_%d","type":"charge.updated","created":1764504000,"data":{"object":{"id":"ch_%d"}}}`, k, n, k)
			require.Equal(t, "accepted", b.sendBody(t, []byte(body)))
		}
	}
	b.waitIdle(t, 60*time.Second)
	got := dest.forwards(t)
	require.Len(t, got, keys)
	for key, ns := range got {
		require.Equal(t, []int{0, 1}, ns, key)
	}
	var heads int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM hookline_claims c
		JOIN hookline_event_destinations r ON c.key = 'hookline:' || r.source || ':' || r.destination || ':' || r.event_id
		WHERE r.order_seq = 1 AND EXISTS (SELECT 1 FROM hookline_claims p WHERE p.key <> c.key AND p.completed_at = c.claimed_at)`).Scan(&heads))
	t.Logf("%d of %d line heads claimed with another event's completion", heads, keys)
	require.Positive(t, heads, "no line's head was taken by a worker completing another line's event")
}

// requireJobsRemoved: every event job (n of them) was removed from River's
// table while running, by the completion of its event; none is left.
func requireJobsRemoved(t *testing.T, b *bundle, n int) {
	t.Helper()
	var left, removed int
	var states []string
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM river_job WHERE kind = $1),
			(SELECT count(*) FROM removed_river_job WHERE kind = $1),
			(SELECT array_agg(DISTINCT state::text) FROM removed_river_job WHERE kind = $1)`,
		jobs.EventArgs{}.Kind()).Scan(&left, &removed, &states))
	require.Zero(t, left, "event jobs left in River's table")
	require.Equal(t, n, removed)
	require.Equal(t, []string{"running"}, states)
}

// requireRetriedOnce: the event's job failed once and then completed: River
// recorded the failure (an error, attempt 2) and hookline counted two
// attempts.
func requireRetriedOnce(t *testing.T, b *bundle, eventID string) {
	t.Helper()
	var attempt, errs, attempts int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT j.attempt, coalesce(array_length(j.errors, 1), 0), r.attempts
		FROM `+everyJob+` j JOIN hookline_event_destinations r ON r.event_id = j.args->>'event_id'
		WHERE j.kind = $1 AND j.args->>'event_id' = $2`, jobs.EventArgs{}.Kind(), eventID).Scan(&attempt, &errs, &attempts))
	require.Equal(t, 2, attempt, eventID)
	require.Equal(t, 1, errs, eventID)
	require.Equal(t, 2, attempts, eventID)
}

// With group commit off (processing.batch: false), a stale event skipped by
// its own completion statement spends no attempt either.
func TestStaleSkipPerEventSpendsNoAttempt(t *testing.T) {
	t.Parallel()
	dest := newOrderRecorder(t, recorderOptions{IDFormat: "evt_pe_%d"})
	keyOf, err := providers.ParseKeyResolver("json:data.object.id")
	require.NoError(t, err)
	byOf, err := providers.ParseKeyResolver("json:created")
	require.NoError(t, err)
	b := startOrdered(t, &jobs.Source{MaxAttempts: 3, StaleSkip: true, Destination: &jobs.Destination{URL: dest.URL}}, false,
		func(c *jobs.ClientConfig) { c.PerEvent = true }, &ingest.Ordering{Key: keyOf, By: byOf, KeyName: "json:data.object.id"})
	for n, c := range []int{100, 300, 200} {
		body := fmt.Sprintf(`{"id":"evt_pe_%d","type":"charge.updated","created":%d,"data":{"object":{"id":"ch_pe"}}}`, n, c)
		require.Equal(t, "accepted", b.sendBody(t, []byte(body)))
	}
	b.waitIdle(t, 60*time.Second)
	var attempts, budget, logged int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT r.attempts, r.job_attempts,
			(SELECT count(*) FROM hookline_attempts a WHERE a.source = r.source AND a.event_id = r.event_id)
		FROM hookline_event_destinations r WHERE r.event_id = 'evt_pe_2' AND r.skipped = 'stale'`).Scan(&attempts, &budget, &logged))
	require.Zero(t, attempts+budget+logged, "attempts %d, budget %d, log rows %d", attempts, budget, logged)
	require.Equal(t, map[string][]int{"ch_pe": {0, 1}}, dest.forwards(t))
}

// A stale event skipped by the attempt that took a half-open circuit's
// probe leaves the probe to the next attempt: the destination goes on
// forwarding at once, not after the skipped job's lease.
func TestStaleSkipGivesUpTheProbe(t *testing.T) {
	t.Parallel()
	dest := newOrderRecorder(t, recorderOptions{IDFormat: "evt_pr_%d"})
	keyOf, err := providers.ParseKeyResolver("json:data.object.id")
	require.NoError(t, err)
	byOf, err := providers.ParseKeyResolver("json:created")
	require.NoError(t, err)
	b := startOrdered(t, &jobs.Source{StaleSkip: true, Targets: []*jobs.Target{{Name: jobs.DefaultDestination, MaxAttempts: 3,
		HTTP: &jobs.Destination{URL: dest.URL}, Circuit: &jobs.Circuit{Failures: 5, CoolDown: time.Second}}}}, false,
		func(*jobs.ClientConfig) {}, &ingest.Ordering{Key: keyOf, By: byOf, KeyName: "json:data.object.id"})
	send := func(n, created int, key string) {
		body := fmt.Sprintf(`{"id":"evt_pr_%d","type":"charge.updated","created":%d,"data":{"object":{"id":"%s"}}}`, n, created, key)
		require.Equal(t, "accepted", b.sendBody(t, []byte(body)))
	}
	send(0, 200, "ch_a")
	b.waitIdle(t, 30*time.Second)
	// The circuit opened, and its cool-down has passed: the next attempt
	// is the probe.
	ctx := context.Background()
	_, err = b.pool.Exec(ctx, `UPDATE hookline_destinations SET circuit = 'open', failure_streak = 5, opened_at = now() - interval '1 minute'`)
	require.NoError(t, err)
	send(1, 100, "ch_a") // stale: skipped by the attempt holding the probe
	b.waitIdle(t, 30*time.Second)
	var skipped string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT COALESCE(skipped, '') FROM hookline_event_destinations WHERE event_id = 'evt_pr_1'`).Scan(&skipped))
	require.Equal(t, jobs.SkippedStale, skipped)

	send(2, 300, "ch_b")
	b.waitIdle(t, 10*time.Second)
	require.Equal(t, map[string][]int{"ch_a": {0}, "ch_b": {2}}, dest.forwards(t))
	// The probe's success is recorded after its completion: wait for it.
	require.Eventually(t, func() bool {
		var circuit string
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT circuit FROM hookline_destinations`).Scan(&circuit))
		return circuit == "closed"
	}, 10*time.Second, 20*time.Millisecond, "the next event probed and closed the circuit")
}
