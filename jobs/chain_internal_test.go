package jobs

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/idem"
	"github.com/hookline/hookline/internal/pgtest"
)

// A job taken into a chain (takePendingJobsSQL) is the row River's own
// fetch leaves once the job is woken: running, its attempt counted, the
// runner last in attempted_by, attempted_at set — every column alike but
// the times and what names the event; and it is attempted at the instant
// it is scheduled (no wait for a fetch).
func TestTakenJobIsRiversFetchedJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	require.NoError(t, err)
	for _, src := range []string{"mine", "theirs"} {
		opts := InsertOptsFor(7)
		opts.Pending = true
		_, err := rc.Insert(ctx, EventArgs{Source: src, EventID: "e", Destination: "d"}, opts)
		require.NoError(t, err)
	}
	const runner = "runner-1"

	// Theirs: woken (made available), then fetched by River.
	_, err = pool.Exec(ctx, wakePendingJobSQL("'theirs'", "'e'", "'d'"))
	require.NoError(t, err)
	fetched, err := riverpgxv5.New(pool).GetExecutor().JobGetAvailable(ctx, &riverdriver.JobGetAvailableParams{
		ClientID: runner, MaxAttemptedBy: 100, MaxToLock: 10, Queue: QueueFor("theirs", "d")})
	require.NoError(t, err)
	require.Len(t, fetched.Jobs, 1)

	// Mine: taken.
	var taken takenJob
	var also string
	require.NoError(t, pool.QueryRow(ctx, `WITH took AS (`+takePendingJobsSQL(`(SELECT 'mine' AS source, 'e' AS event_id, 'd' AS destination) h`,
		"h.source", "h.event_id", "h.destination", "'"+runner+"'", "h.source AS also")+`) SELECT `+takenColumns+`, also FROM took`).
		Scan(append(taken.targets(), &also)...))
	require.Equal(t, QueueFor("mine", "d"), taken.Queue)
	require.Equal(t, "mine", also)

	rows, err := pool.Query(ctx, `SELECT args->>'source', (to_jsonb(j) - 'id' - 'created_at' - 'scheduled_at' - 'attempted_at' - 'args' - 'unique_key' - 'queue')::text,
		attempted_at IS NOT NULL, attempted_at = scheduled_at FROM river_job j`)
	require.NoError(t, err)
	cols := map[string]string{}
	chained := map[string]bool{}
	var src, c string
	var attempted, atOnce bool
	_, err = pgx.ForEachRow(rows, []any{&src, &c, &attempted, &atOnce}, func() error {
		require.True(t, attempted, src)
		cols[src], chained[src] = c, atOnce
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, cols["theirs"], cols["mine"])
	require.Contains(t, cols["mine"], `"state": "running"`)
	require.Contains(t, cols["mine"], `"attempted_by": ["`+runner+`"]`)
	require.Equal(t, map[string]bool{"mine": true, "theirs": false}, chained)

	job, err := taken.job()
	require.NoError(t, err)
	require.Equal(t, EventArgs{Source: "mine", EventID: "e", Destination: "d"}, job.Args)
	require.Equal(t, 1, job.Attempt)
	require.Equal(t, fetched.Jobs[0].MaxAttempts, job.MaxAttempts)
}

// Which chained jobs have their claim taken ahead, with the completion
// that took them: those of a destination with no gate to ask (no rate
// limit, in-flight cap or breaker) and no operator's override; the others
// claim the usual way, through the gate. An ahead claim is the one the job
// would take itself: its key, holder (job and attempt) and lease.
func TestClaimAheadOnlyWhereTheGateHasNothingToSay(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	http := &Destination{URL: "http://127.0.0.1:1/"}
	w, err := NewEventWorker(WorkerConfig{Pool: pool, Sources: []*Source{{Name: "s", Lease: 45 * time.Second, Targets: []*Target{
		{Name: "plain", HTTP: http},
		{Name: "limited", HTTP: http, RateLimit: 5},
		{Name: "capped", HTTP: http, MaxInFlight: 2},
		{Name: "breaker", HTTP: http, Circuit: &Circuit{Failures: 3, CoolDown: time.Second}},
	}}}})
	require.NoError(t, err)
	job := func(dest, id string, override time.Time) *river.Job[EventArgs] {
		return &river.Job[EventArgs]{JobRow: &rivertype.JobRow{ID: 42, Attempt: 3},
			Args: EventArgs{Source: "s", EventID: id, Destination: dest, OverrideBefore: override}}
	}
	it, ok := w.claimAhead(job("plain", "evt_1", time.Time{}))
	require.True(t, ok)
	require.Equal(t, claimItem{key: "hookline:s:plain:evt_1", holder: "job:42:attempt:3", leaseUS: 45_000_000,
		source: "s", eventID: "evt_1", dest: "plain", jobID: 42, attempt: 3}, it)
	for name, j := range map[string]*river.Job[EventArgs]{
		"rate limit":          job("limited", "evt_1", time.Time{}),
		"in-flight cap":       job("capped", "evt_1", time.Time{}),
		"circuit breaker":     job("breaker", "evt_1", time.Time{}),
		"operator's override": job("plain", "evt_1", time.Now()),
		"blank event id":      job("plain", " ", time.Time{}),
		"unknown destination": job("gone", "evt_1", time.Time{}),
	} {
		_, ok := w.claimAhead(j)
		require.False(t, ok, name)
	}
}

// A predicted claim (claimTakenManyStartSQL) is taken only for a job this
// transaction took for the runner at the attempt predicted: not for a job
// still pending, taken for another runner, taken at another attempt, or
// taken by an earlier transaction. The pending job the advance answers
// (pendingJobSQL) is the job as it will be once taken.
func TestPredictedClaimOnlyForTheJobTakenHere(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	store, err := idem.NewStore(pool, &idem.Config{Table: ClaimsTable})
	require.NoError(t, err)
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	require.NoError(t, err)
	for _, id := range []string{"e1", "e2", "e3", "e4"} {
		opts := InsertOptsFor(7)
		opts.Pending = true
		_, err := rc.Insert(ctx, EventArgs{Source: "s", EventID: id, Destination: "d"}, opts)
		require.NoError(t, err)
	}
	predict := func(id string) *river.Job[EventArgs] {
		var row []byte
		require.NoError(t, pool.QueryRow(ctx, `SELECT `+pendingJobSQL("'s'", "$1::text", "'d'"), id).Scan(&row))
		var p pendingJob
		require.NoError(t, json.Unmarshal(row, &p))
		job, err := p.taken()
		require.NoError(t, err)
		require.Equal(t, EventArgs{Source: "s", EventID: id, Destination: "d"}, job.Args)
		require.Equal(t, 1, job.Attempt)
		return job
	}
	item := func(job *river.Job[EventArgs]) claimItem {
		return claimItem{key: "hookline:s:d:" + job.Args.EventID, holder: holder(job), leaseUS: 60_000_000,
			source: "s", eventID: job.Args.EventID, dest: "d", jobID: job.ID, attempt: int32(job.Attempt)}
	}
	take := func(tx pgx.Tx, id, runner string) {
		_, err := tx.Exec(ctx, `WITH took AS (`+takePendingJobsSQL(`(SELECT 's' AS source, $1::text AS event_id, 'd' AS destination) h`,
			"h.source", "h.event_id", "h.destination", "$2::text", "1")+`) SELECT count(*) FROM took`, id, runner)
		require.NoError(t, err)
	}
	claimed := func(tx pgx.Tx, items ...claimItem) []string {
		args, _ := claimTakenArgs(items, "r1")
		rows, err := tx.Query(ctx, claimTakenManyStartSQL(store.ClaimManySQL), args...)
		require.NoError(t, err)
		var keys []string
		for rows.Next() {
			vals, err := rows.Values()
			require.NoError(t, err)
			keys = append(keys, vals[0].(string))
		}
		require.NoError(t, rows.Err())
		return keys
	}
	j1, j2, j3, j4 := predict("e1"), predict("e2"), predict("e3"), predict("e4")

	// e4 is taken by an earlier transaction, for r1.
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { take(tx, "e4", "r1"); return nil }))

	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		take(tx, "e1", "r1") // as predicted
		take(tx, "e2", "r2") // for another runner
		wrong := item(j3)    // e3 stays pending
		other := item(j1)
		other.key, other.attempt = "hookline:s:d:e1-again", 2 // e1 at another attempt
		require.Equal(t, []string{"hookline:s:d:e1"}, claimed(tx, item(j1), item(j2), wrong, other, item(j4)))
		return nil
	}))
}
