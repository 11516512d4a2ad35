package ingest

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/jobs"
)

// The group committer writes the job rows in its own statement
// (storeJobsSQL over jobs.InsertEventJobsSQL); the naive mode asks River's
// InsertManyTx. The same story of deliveries, through each, must give the
// same answers and leave the same job rows, column for column: new events,
// duplicates in a batch, a duplicate of a waiting job, of an event completed
// within its window and past it, of a dead event, of an event whose job is
// gone, and ids JSON must escape. (River's format itself is pinned in
// jobs/riverrow_test.go.)
func TestNaiveAndBatchedModesAgree(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := testSource(&Source{Name: "a", OnDuplicate: OnDuplicateSkip, MaxAttempts: 3})
	b := testSource(&Source{Name: `b "quoted" <&> é☃`, OnDuplicate: OnDuplicateReject, MaxAttempts: 5000})
	d := func(src *Source, ids ...string) *Delivery {
		dl := testDelivery(src, ids[0], "x")
		for _, id := range ids[1:] {
			dl.Events = append(dl.Events, DeliveryEvent{ID: id, Type: "t", Length: -1, Matched: []int{0}})
		}
		return dl
	}
	tricky := `q"u\o<&>é☃ ` + "\u2028\t"
	type step struct {
		setup string // SQL run before the call
		call  []*Delivery
	}
	steps := []step{
		{call: []*Delivery{d(a, "A", "B"), d(a, "A"), d(b, tricky), d(a, "C"), d(a, "D"), d(a, "E"), d(b, "A")}},
		{call: []*Delivery{d(a, "A"), d(b, tricky, "A")}}, // jobs waiting: duplicates
		{setup: `UPDATE river_job SET state = 'completed', finalized_at = now() WHERE args->>'event_id' IN ('B', 'D');
			UPDATE hookline_event_destinations SET state = 'completed', completed_at = now(), dedup_until = now() + interval '1 hour' WHERE event_id = 'B';
			UPDATE hookline_event_destinations SET state = 'completed', completed_at = now() - interval '2 hours', dedup_until = now() - interval '1 hour' WHERE event_id = 'D';
			UPDATE river_job SET state = 'discarded', finalized_at = now() WHERE args->>'event_id' = 'E';
			UPDATE hookline_event_destinations SET state = 'dead' WHERE event_id = 'E';
			DELETE FROM river_job WHERE args->>'event_id' = 'C'`,
			call: []*Delivery{d(a, "B"), d(a, "C"), d(a, "D", "E"), d(a, "F")}}, // duplicate, then re-queued ×3, new
		{call: []*Delivery{d(a, "B", "C", "D", "E", "F")}}, // all duplicates now
	}
	type result struct {
		Answers [][][]EventResult
		Jobs    []string
		Dead    int
	}
	run := func(pipelined bool) result {
		st, pool := testStore(t)
		commit := st.commit
		if pipelined {
			commit = st.commitPipelined
		}
		var r result
		for _, s := range steps {
			if s.setup != "" {
				_, err := pool.Exec(ctx, s.setup)
				require.NoError(t, err)
			}
			out, err := commit(ctx, s.call)
			require.NoError(t, err)
			for i := range out {
				for j := range out[i] {
					out[i][j].firstSeen = time.Time{}
				}
			}
			r.Answers = append(r.Answers, out)
		}
		// Every column but the ones that differ by when and in which order
		// the rows were written.
		rows, err := pool.Query(ctx, `SELECT (to_jsonb(j) - 'id' - 'created_at' - 'scheduled_at' - 'finalized_at')::text
			FROM river_job j WHERE kind = $1 ORDER BY args->>'source', args->>'event_id', id`, jobs.EventArgs{}.Kind())
		require.NoError(t, err)
		r.Jobs, err = pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		var sameTimes bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT bool_and(created_at = scheduled_at AND created_at > now() - interval '1 hour') FROM river_job`).Scan(&sameTimes))
		require.True(t, sameTimes, "created_at and scheduled_at are the insert's now()")
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM hookline_dead`).Scan(&r.Dead))
		return r
	}
	naive, batched := run(false), run(true)
	require.Equal(t, naive, batched)

	// And the story is the one intended (so that the comparison compares something).
	status := func(r result, step, delivery, event int) string { return r.Answers[step][delivery][event].Status }
	require.Equal(t, StatusAccepted, status(naive, 0, 0, 0))
	require.Equal(t, StatusDuplicate, status(naive, 0, 1, 0), "A twice in a batch")
	require.Equal(t, StatusAccepted, status(naive, 0, 6, 0), "A of another source")
	require.Equal(t, StatusDuplicate, status(naive, 1, 1, 0), "tricky id, job waiting")
	require.Equal(t, []string{StatusDuplicate, StatusAccepted, StatusAccepted, StatusAccepted, StatusAccepted},
		[]string{status(naive, 2, 0, 0), status(naive, 2, 1, 0), status(naive, 2, 2, 0), status(naive, 2, 2, 1), status(naive, 2, 3, 0)},
		"B completed within its window; C lost its job; D past its window; E dead; F new")
	for _, e := range batched.Answers[3][0] {
		require.Equal(t, StatusDuplicate, e.Status, e.EventID)
	}
	require.Len(t, naive.Jobs, 10, "A, B, C (its lost job deleted), D×2, E×2, F of a; A and the tricky id of b")
	require.Equal(t, 2, naive.Dead, "b rejects its duplicates (step 2)")
	var job struct {
		Args        jobs.EventArgs `json:"args"`
		MaxAttempts int            `json:"max_attempts"`
	}
	require.NoError(t, json.Unmarshal([]byte(naive.Jobs[len(naive.Jobs)-1]), &job))
	require.Equal(t, jobs.EventArgs{Source: b.Name, EventID: tricky, Destination: jobs.DefaultDestination}, job.Args)
	require.Equal(t, 20000, job.MaxAttempts)
}

// The group committer wakes River's workers (jobs.InsertNotifySQL, River's
// insert topic), at most once per notifyEvery. Without it a worker in
// another process would find the jobs only at its next poll.
func TestBatchedCommitsNotifyWorkers(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, pool := testStore(t)
	l := riverpgxv5.New(pool).GetListener(&riverdriver.GetListenenerParams{})
	require.NoError(t, l.Connect(ctx))
	defer func() { _ = l.Close(context.Background()) }()
	require.NoError(t, l.Listen(ctx, "river_insert")) // River's notifier.NotificationTopicInsert

	src := testSource(&Source{Name: "s", OnDuplicate: OnDuplicateSkip, MaxAttempts: 3})
	_, err := st.commitPipelined(ctx, []*Delivery{testDelivery(src, "evt_n1", "x")})
	require.NoError(t, err)
	n, err := l.WaitForNotification(ctx)
	require.NoError(t, err)
	var payload struct {
		Queue string `json:"queue"`
	}
	require.NoError(t, json.Unmarshal([]byte(n.Payload), &payload), n.Payload)
	require.Equal(t, jobs.QueueFor("s", jobs.DefaultDestination), payload.Queue)

	// At most one per notifyEvery: a batch right behind it does not notify.
	last, _ := st.lastNotify.Load(payload.Queue)
	last.(*atomic.Int64).Store(time.Now().Add(time.Hour).UnixNano())
	_, err = st.commitPipelined(ctx, []*Delivery{testDelivery(src, "evt_n2", "x")})
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `SELECT pg_notify(current_schema() || '.river_insert', '{"queue": "marker"}')`)
	require.NoError(t, err)
	n, err = l.WaitForNotification(ctx)
	require.NoError(t, err)
	require.JSONEq(t, `{"queue": "marker"}`, n.Payload, "no notification for the second batch")
}
