package jobs_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/ingest"
	"github.com/hookline/hookline/internal/pgtest"
	"github.com/hookline/hookline/jobs"
	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/stripe"
)

// An event waiting in a queue that no instance keeps goes to the dead set
// within seconds, not minutes; one whose queue a live instance runs never
// does, whatever the sweeping instance configures; one whose queue a live
// instance configures but none runs is given a rolling deploy's ten
// minutes; a killed instance's record keeps its queues for ten minutes
// after its last renewal, a cleanly stopped one's for seconds.
func TestOrphanedEventsGoDead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	client, err := jobs.NewClient(jobs.ClientConfig{Pool: pool, InsertOnly: true, Logger: quiet()})
	require.NoError(t, err)
	prov, err := stripe.New(providers.Config{Secrets: []string{secret}})
	require.NoError(t, err)
	names := []string{"gone", "fresh", "elsewhere", "unrun", "unrun_old", "killed", "killed_long_ago", "stopped", "just_stopped", "mine",
		"killed_bounded", "unrun_bounded", "paused_gone", "paused_bounded"}
	var sources []*ingest.Source
	for _, n := range names {
		sources = append(sources, &ingest.Source{Name: n, Provider: prov})
	}
	srv, err := ingest.New(ingest.Config{Pool: pool, River: client, IngestRoutes: true, Batch: true, Logger: quiet(), Sources: sources})
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	for _, n := range names {
		b := &bundle{pool: pool, client: client, ingest: hs.URL + "/webhooks/" + n}
		require.Equal(t, "accepted", b.send(t, "evt_"+n))
	}
	queue := func(source string) string { return jobs.QueueFor(source, jobs.DefaultDestination) }

	// Every event but "fresh"'s was accepted a minute ago (past the grace
	// of a queue nobody configures); unrun_old's eleven minutes ago.
	_, err = pool.Exec(ctx, `UPDATE river_job SET created_at = now() - interval '1 minute' WHERE args->>'source' <> 'fresh'`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE river_job SET created_at = now() - interval '11 minutes' WHERE args->>'source' = 'unrun_old'`)
	require.NoError(t, err)

	// Another live instance runs "elsewhere"; an ingest instance
	// configures "unrun" and "unrun_old" without running them; records
	// last renewed two and eleven minutes ago (killed instances) ran
	// "killed" and "killed_long_ago"; instances that stopped a minute ago
	// and just now ran "stopped" and "just_stopped".
	other, err := jobs.StartInstance(ctx, pool, "other", jobs.InstanceQueues{Configures: []string{queue("elsewhere")}, Runs: []string{queue("elsewhere")}}, quiet())
	require.NoError(t, err)
	defer other.Stop(ctx)
	// Its record gives unrun_bounded's events a bound of 45 s (a source with
	// small settings), which the minute they waited has passed.
	ingestOnly, err := jobs.StartInstance(ctx, pool, "ingest-only", jobs.InstanceQueues{
		Configures: []string{queue("unrun"), queue("unrun_old"), queue("unrun_bounded")},
		Bounds:     []time.Duration{0, 0, 45 * time.Second}}, quiet())
	require.NoError(t, err)
	defer ingestOnly.Stop(ctx)
	for id, ago := range map[string]string{"killed": "2 minutes", "killed_long_ago": "11 minutes", "killed_bounded": "2 minutes"} {
		_, err = pool.Exec(ctx, `INSERT INTO hookline_instances (id, configures, runs, seen_at) VALUES ($1, $2, $2, now() - $3::interval)`,
			id, []string{queue(id)}, ago)
		require.NoError(t, err)
	}
	// killed_bounded's record gives its events a bound of 30 s: a killed
	// instance keeps its queue no longer than that.
	_, err = pool.Exec(ctx, `UPDATE hookline_instances SET bounds = '{30000000}' WHERE id = 'killed_bounded'`)
	require.NoError(t, err)
	for _, id := range []string{"stopped", "just_stopped"} {
		in, err := jobs.StartInstance(ctx, pool, id, jobs.InstanceQueues{Configures: []string{queue(id)}, Runs: []string{queue(id)}}, quiet())
		require.NoError(t, err)
		in.Stop(ctx)
	}
	_, err = pool.Exec(ctx, `UPDATE hookline_instances SET stopped_at = now() - interval '1 minute' WHERE id = 'stopped'`)
	require.NoError(t, err)

	// Paused destinations' events wait on purpose, for as long as the
	// pause lasts: one whose queue no instance keeps, and one whose killed
	// instance's record bounds its events to 30 s, are both left alone.
	_, err = pool.Exec(ctx, `INSERT INTO hookline_instances (id, configures, runs, seen_at, bounds) VALUES ('paused_bounded', $1, $1, now() - interval '2 minutes', '{30000000}')`,
		[]string{queue("paused_bounded")})
	require.NoError(t, err)
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	require.NoError(t, err)
	for _, n := range []string{"paused_gone", "paused_bounded"} {
		_, err = pool.Exec(ctx, `INSERT INTO river_queue (name, created_at, metadata, updated_at) VALUES ($1, now(), '{}', now()) ON CONFLICT DO NOTHING`, queue(n))
		require.NoError(t, err)
		require.NoError(t, rc.QueuePause(ctx, queue(n), nil))
	}

	w := &jobs.OrphanWorker{Pool: pool, Queues: []string{queue("mine")}, Logger: quiet()}
	require.NoError(t, w.Work(ctx, &river.Job[jobs.OrphanArgs]{}))

	want := map[string]string{"gone": "dead", "fresh": "queued", "elsewhere": "queued", "unrun": "queued", "unrun_old": "dead",
		"killed": "queued", "killed_long_ago": "dead", "stopped": "dead", "just_stopped": "queued", "mine": "queued",
		"killed_bounded": "dead", "unrun_bounded": "dead", "paused_gone": "queued", "paused_bounded": "queued"}
	for _, n := range names {
		var state, lastErr string
		var deadItems, waitingJobs int
		require.NoError(t, pool.QueryRow(ctx, `SELECT r.state, COALESCE(r.last_error, ''),
				(SELECT count(*) FROM hookline_dead d WHERE d.source = r.source AND d.event_id = r.event_id AND d.reason = 'failed'),
				(SELECT count(*) FROM river_job j WHERE j.args->>'source' = r.source AND j.state IN ('available', 'pending', 'retryable', 'scheduled'))
			FROM hookline_event_destinations r WHERE r.source = $1`, n).Scan(&state, &lastErr, &deadItems, &waitingJobs))
		require.Equal(t, want[n], state, "source %s", n)
		if want[n] == "dead" {
			require.Equal(t, 1, deadItems, "source %s: one dead item", n)
			require.Zero(t, waitingJobs, "source %s: its job is finished", n)
			wantErr := "not configured on any running instance"
			if n == "unrun_old" || n == "unrun_bounded" {
				wantErr = "no worker configures it"
			}
			require.Contains(t, lastErr, wantErr, "source %s", n)
		} else {
			require.Zero(t, deadItems, "source %s", n)
			require.Equal(t, 1, waitingJobs, "source %s: its job still waits", n)
		}
	}

	// The sweep is idempotent: a second one changes nothing.
	require.NoError(t, w.Work(ctx, &river.Job[jobs.OrphanArgs]{}))
	var dead int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM hookline_dead`).Scan(&dead))
	require.Equal(t, 6, dead)
}

// The sweep ends the places of an ordered destination's events in their
// line: once the destination is configured again, the next event of the
// key is the line's head at once, not pending behind dead places until the
// clean-up moves the line on.
func TestOrphanedEventsLeaveTheirLine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	client, err := jobs.NewClient(jobs.ClientConfig{Pool: pool, InsertOnly: true, Logger: quiet()})
	require.NoError(t, err)
	prov, err := stripe.New(providers.Config{Secrets: []string{secret}})
	require.NoError(t, err)
	keyOf, err := providers.ParseKeyResolver("json:data.object.id")
	require.NoError(t, err)
	srv, err := ingest.New(ingest.Config{Pool: pool, River: client, IngestRoutes: true, Batch: true, Logger: quiet(),
		Sources: []*ingest.Source{{Name: "gone", Provider: prov, Ordering: &ingest.Ordering{Key: keyOf, KeyName: "json:data.object.id"}}}})
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	b := &bundle{pool: pool, client: client, ingest: hs.URL + "/webhooks/gone"}
	body := func(id string) []byte {
		return []byte(`{"id":"` + id + `","type":"charge.updated","created":1764504000,"data":{"object":{"id":"ch_1"}}}`)
	}
	for _, id := range []string{"evt_1", "evt_2"} {
		require.Equal(t, "accepted", b.sendBody(t, body(id)))
	}
	jobState := func(id string) string {
		var s string
		require.NoError(t, pool.QueryRow(ctx, `SELECT state FROM river_job WHERE args->>'event_id' = $1 ORDER BY id DESC LIMIT 1`, id).Scan(&s))
		return s
	}
	require.Equal(t, "pending", jobState("evt_2"), "the second event waits behind the first")

	// No instance keeps the queue, and the events waited past its grace.
	_, err = pool.Exec(ctx, `UPDATE river_job SET created_at = now() - interval '1 minute'`)
	require.NoError(t, err)
	w := &jobs.OrphanWorker{Pool: pool, Logger: quiet()}
	require.NoError(t, w.Work(ctx, &river.Job[jobs.OrphanArgs]{}))
	var dead int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM hookline_event_destinations WHERE state = 'dead'`).Scan(&dead))
	require.Equal(t, 2, dead)
	var doneSeq, lastSeq int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT done_seq, last_seq FROM hookline_order_keys WHERE source = 'gone' AND key = 'ch_1'`).Scan(&doneSeq, &lastSeq))
	require.Equal(t, lastSeq, doneSeq, "no place of the line waits")

	require.Equal(t, "accepted", b.sendBody(t, body("evt_3")))
	require.Equal(t, "available", jobState("evt_3"), "nothing waits before the key's next event")
}

// A source's single destination (Destination or Handler, no Targets) has
// its queue too: an embedding program records it with StartInstance.
func TestEventQueuesOfASingleDestination(t *testing.T) {
	t.Parallel()
	sources := []*jobs.Source{
		{Name: "ledger", Handler: jobs.HandlerFunc(nil)},
		{Name: "shop", Destination: &jobs.Destination{URL: "http://127.0.0.1:9/"}, MaxAttempts: 3},
		{Name: "fan", Targets: []*jobs.Target{{Name: "a"}, {Name: "b"}}},
	}
	require.Equal(t, []string{jobs.QueueFor("ledger", jobs.DefaultDestination), jobs.QueueFor("shop", jobs.DefaultDestination),
		jobs.QueueFor("fan", "a"), jobs.QueueFor("fan", "b")}, jobs.EventQueues(sources))
	require.Len(t, jobs.EventQueueBounds(sources), 4)
	require.Empty(t, sources[0].Targets, "reading the queues changes no source")
}
