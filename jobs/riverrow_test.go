package jobs_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/internal/pgtest"
	"github.com/hookline/hookline/jobs"
)

// River's table format as hookline writes and reads it (riverrow.go),
// pinned to River's own behaviour for the River version in go.mod.

// NewEventJob is the row River's InsertManyTx writes for the same job: args,
// unique key, unique states, attempt cap, priority, queue and kind, for ids
// that JSON must escape too.
func TestEventJobMatchesRiver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	require.NoError(t, err)
	type job struct {
		source, id, dest string
		maxAttempts      int
	}
	cases := []job{
		{"stripe", "evt_1NG8Du2eZvKYlo2CUI79vXWy", jobs.DefaultDestination, 10},
		{"paddle", "ntf_01hv8x2a", "billing", 1},
		{`we "quote" \ and <tag>&`, `id "with" \ <&> é ☃ 😀` + "\u2028\u2029\t\n", `d"<&>\é`, 5000},
		{"s", "", "ledger", 300},
	}
	var params []river.InsertManyParams
	for _, c := range cases {
		params = append(params, river.InsertManyParams{Args: jobs.EventArgs{Source: c.source, EventID: c.id, Destination: c.dest}, InsertOpts: jobs.InsertOptsFor(c.maxAttempts)})
	}
	_, err = rc.InsertMany(ctx, params)
	require.NoError(t, err)
	for _, c := range cases {
		var got struct {
			key                           []byte
			states, maxAttempts, priority int
			queue, kind                   string
		}
		require.NoError(t, pool.QueryRow(ctx, `SELECT unique_key, unique_states::int, max_attempts, priority, queue, kind
			FROM river_job WHERE args->>'source' = $1 AND args->>'event_id' = $2`, c.source, c.id).
			Scan(&got.key, &got.states, &got.maxAttempts, &got.priority, &got.queue, &got.kind))
		want, err := jobs.NewEventJob(c.source, c.id, c.dest, c.maxAttempts)
		require.NoError(t, err)
		require.Equal(t, want.UniqueKey, got.key, "unique key of %+v", c)
		require.Equal(t, int(jobs.EventUniqueStates), got.states)
		require.Equal(t, int(want.MaxAttempts), got.maxAttempts)
		require.Equal(t, jobs.EventJobPriority, got.priority)
		require.Equal(t, want.Queue, got.queue, "the destination's queue")
		require.Equal(t, jobs.EventArgs{}.Kind(), got.kind)
		var same bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT $1::jsonb = args FROM river_job WHERE unique_key = $2`, string(want.Args), want.UniqueKey).Scan(&same))
		require.True(t, same, "args %s", want.Args)
	}
	_, err = jobs.NewEventJob("s", "x", "d", 9000)
	require.ErrorContains(t, err, "smallint", "an attempt cap River could not store")
}

// An event's job row, for a statement that inserts it itself; the unique
// key is what River computes for EventArgs.
func ExampleNewEventJob() {
	j, err := jobs.NewEventJob("stripe", "evt_123", "billing", 10)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s\n%d-byte unique key, states %08b, max_attempts %d, queue %s\n", j.Args, len(j.UniqueKey), jobs.EventUniqueStates, j.MaxAttempts, j.Queue)
	// Output:
	// {"source":"stripe","event_id":"evt_123","destination":"billing"}
	// 32-byte unique key, states 11110001, max_attempts 1000, queue hookline-stripe-billing-57b15171
}

// The unique key PostgreSQL computes (to find a job by River's unique
// index) is NewEventJob's, for strings every JSON escape applies to; the
// legacy key (args without a destination) is River's key of such args.
func TestUniqueKeySQLIsNewEventJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	strs := []string{"stripe", "", "evt_1", `q"<&>\`, "é☃ 😀\u2028\u2029", "\x01\x1f\x7f\b\f\n\r\t", "a'b", "<script>&amp;</script>", strings.Repeat("x", 300)}
	for _, src := range strs {
		for _, id := range strs {
			dest := id + "-dest"
			var got, legacy []byte
			require.NoError(t, pool.QueryRow(ctx, `SELECT `+jobs.UniqueKeySQL+`, `+jobs.LegacyUniqueKeySQL, src, id, dest).Scan(&got, &legacy))
			want, err := jobs.NewEventJob(src, id, dest, 1)
			require.NoError(t, err)
			require.Equal(t, want.UniqueKey, got, "source %q, event %q", src, id)
			args, err := json.Marshal(struct {
				EventID string `json:"event_id"`
				Source  string `json:"source"`
			}{id, src})
			require.NoError(t, err)
			wantLegacy := sha256.Sum256([]byte("&kind=" + jobs.EventArgs{}.Kind() + "&args=" + string(args)))
			require.Equal(t, wantLegacy[:], legacy, "legacy key of source %q, event %q", src, id)
		}
	}
}

// Finding an event's active job is a probe of River's unique index, not a
// search of the args index: the plan names the unique index.
func TestActiveJobLookupUsesRiversUniqueIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	require.NoError(t, err)
	var params []river.InsertManyParams
	for i := range 2000 {
		params = append(params, river.InsertManyParams{Args: jobs.EventArgs{Source: "stripe", EventID: fmt.Sprint("evt_", i), Destination: jobs.DefaultDestination}, InsertOpts: jobs.InsertOptsFor(3)})
	}
	_, err = rc.InsertMany(ctx, params)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `ANALYZE river_job`)
	require.NoError(t, err)
	var has bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT `+jobs.HasActiveJobSQL, "stripe", "evt_7", jobs.DefaultDestination).Scan(&has))
	require.True(t, has)
	require.NoError(t, pool.QueryRow(ctx, `SELECT `+jobs.HasActiveJobSQL, "stripe", "evt_7", "other").Scan(&has))
	require.False(t, has, "another destination's job is not this one's")
	var plan strings.Builder
	rows, err := pool.Query(ctx, `EXPLAIN SELECT `+jobs.HasActiveJobSQL, "stripe", "evt_7", jobs.DefaultDestination)
	require.NoError(t, err)
	for rows.Next() {
		var line string
		require.NoError(t, rows.Scan(&line))
		plan.WriteString(line + "\n")
	}
	require.NoError(t, rows.Err())
	require.Contains(t, plan.String(), "river_job_unique_idx", plan.String())
	require.NotContains(t, plan.String(), "river_job_args_index", plan.String())
}

// NewEventJob's args are json.Marshal(EventArgs), byte for byte, and its
// attempt cap InsertOptsFor's.
func TestEventJobArgsAreEventArgs(t *testing.T) {
	t.Parallel()
	for _, c := range [][2]string{{"stripe", "evt_1"}, {`q"<&>\`, "é☃ 😀\u2028\x01"}, {"", ""}, {"a\xffb", "\xed\xa0\x80"}} {
		for _, maxAttempts := range []int{1, 10, 250, 251, 8000} {
			j, err := jobs.NewEventJob(c[0], c[1], "dest", maxAttempts)
			require.NoError(t, err)
			want, err := json.Marshal(jobs.EventArgs{Source: c[0], EventID: c[1], Destination: "dest"})
			require.NoError(t, err)
			require.Equal(t, string(want), string(j.Args))
			require.Equal(t, jobs.InsertOptsFor(maxAttempts).MaxAttempts, int(j.MaxAttempts))
		}
	}
}

// InsertEventJobsSQL writes the rows River's InsertManyTx writes, column for
// column (a waiting job as River's Pending option writes it), and follows
// River's conflict rule: no second job while one is waiting or running
// (skipped), a new one once the first finished.
func TestInsertEventJobsIsRiversInsert(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	require.NoError(t, err)
	insert := func(events ...string) map[string]bool {
		t.Helper()
		var args, keys [][]byte
		var maxes []int16
		var queues []string
		var waits []bool
		for _, id := range events {
			j, err := jobs.NewEventJob("mine", id, "d", 7)
			require.NoError(t, err)
			args, keys, maxes, queues = append(args, j.Args), append(keys, j.UniqueKey), append(maxes, j.MaxAttempts), append(queues, j.Queue)
			waits = append(waits, strings.HasPrefix(id, "pending"))
		}
		sql := `WITH job AS (` + jobs.InsertEventJobsSQL(`SELECT a, m, k, q, o, w FROM unnest($1::jsonb[], $2::int2[], $3::bytea[], $4::text[], $5::bool[]) WITH ORDINALITY AS u(a, m, k, q, w, o)`, 6) + `)
			SELECT event_id, skipped FROM job`
		rows, err := pool.Query(ctx, sql, append([]any{args, maxes, keys, queues, waits}, jobs.EventJobParams()...)...)
		require.NoError(t, err)
		skipped := map[string]bool{}
		var id string
		var s bool
		_, err = pgx.ForEachRow(rows, []any{&id, &s}, func() error { skipped[id] = s; return nil })
		require.NoError(t, err)
		return skipped
	}
	theirs := func(events ...string) map[string]bool {
		t.Helper()
		var params []river.InsertManyParams
		for _, id := range events {
			opts := jobs.InsertOptsFor(7)
			opts.Pending = strings.HasPrefix(id, "pending")
			params = append(params, river.InsertManyParams{Args: jobs.EventArgs{Source: "theirs", EventID: id, Destination: "d"}, InsertOpts: opts})
		}
		res, err := rc.InsertMany(ctx, params)
		require.NoError(t, err)
		skipped := map[string]bool{}
		for i, r := range res {
			skipped[events[i]] = r.UniqueSkippedAsDuplicate
		}
		return skipped
	}
	require.Equal(t, map[string]bool{"a": false, "b": false, "pending-c": false}, insert("a", "b", "pending-c"))
	require.Equal(t, map[string]bool{"a": false, "b": false, "pending-c": false}, theirs("a", "b", "pending-c"))
	require.Equal(t, map[string]bool{"pending-c": true}, insert("pending-c"), "a pending job: a duplicate")
	require.Equal(t, map[string]bool{"pending-c": true}, theirs("pending-c"))
	require.Equal(t, map[string]bool{"a": true}, insert("a"), "a job waiting: a duplicate")
	require.Equal(t, map[string]bool{"a": true}, theirs("a"))
	_, err = pool.Exec(ctx, `UPDATE river_job SET state = 'completed', finalized_at = now() WHERE args->>'event_id' = 'a'`)
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"a": false}, insert("a"), "the job finished: a new one")
	require.Equal(t, map[string]bool{"a": false}, theirs("a"))

	rows, err := pool.Query(ctx, `SELECT (to_jsonb(j) - 'id' - 'created_at' - 'scheduled_at' - 'finalized_at' - 'args' - 'unique_key' - 'queue')::text, args->>'source'
		FROM river_job j ORDER BY args->>'source', args->>'event_id', id`)
	require.NoError(t, err)
	bySource := map[string][]string{}
	var row, source string
	_, err = pgx.ForEachRow(rows, []any{&row, &source}, func() error { bySource[source] = append(bySource[source], row); return nil })
	require.NoError(t, err)
	require.Len(t, bySource["mine"], 4)
	require.Equal(t, bySource["theirs"], bySource["mine"], "every column but the times and what depends on the source (args, unique key, queue: TestEventJobMatchesRiver)")
}

// The insert notification is the one River's own insert sends: its topic
// and payload, which River's listener in another process subscribes to.
func TestInsertNotifyIsRivers(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := pgtest.NewPool(t)
	l := riverpgxv5.New(pool).GetListener(&riverdriver.GetListenenerParams{})
	require.NoError(t, l.Connect(ctx))
	defer func() { _ = l.Close(context.Background()) }()
	require.NoError(t, l.Listen(ctx, "river_insert")) // River's notifier.NotificationTopicInsert
	q1, q2 := jobs.QueueFor("s", "a"), jobs.QueueFor("s", "b")
	_, err := pool.Exec(ctx, jobs.InsertNotifySQL(q1, q2))
	require.NoError(t, err)
	for _, q := range []string{q1, q2} {
		n, err := l.WaitForNotification(ctx)
		require.NoError(t, err)
		require.JSONEq(t, `{"queue": "`+q+`"}`, n.Payload)
	}
}

// The worker removes its running job when the event completes; River's
// completer, which still reports the job after Work returns, then finds no
// row and does nothing (no error, no event), and a job that is not running
// is not removed. The queue and job statistics read River's states.
func TestRemovalAndStatsReadRiversRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	require.NoError(t, err)
	var ids []int64
	for _, id := range []string{"x", "y", "later"} {
		o := jobs.InsertOptsFor(3)
		if id == "later" {
			o.ScheduledAt = time.Now().Add(time.Hour)
		}
		res, err := rc.Insert(ctx, jobs.EventArgs{Source: "s", EventID: id}, o)
		require.NoError(t, err)
		ids = append(ids, res.Job.ID)
	}
	_, err = pool.Exec(ctx, `UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now() WHERE id = ANY($1)`, ids[:2])
	require.NoError(t, err)

	st, err := jobs.ReadJobStats(ctx, pool, true)
	require.NoError(t, err)
	require.Equal(t, jobs.JobStats{Total: 3, Unfinished: 3, LatestAttempts: map[string]int{"s:default:x": 1, "s:default:y": 1, "s:default:later": 0}}, st)
	active, err := jobs.AnyUnfinishedJob(ctx, pool)
	require.NoError(t, err)
	require.True(t, active)

	require.NoError(t, jobs.DeleteRunningJobForTest(ctx, pool, ids[0]))
	require.NoError(t, jobs.DeleteRunningJobForTest(ctx, pool, ids[2])) // scheduled: left
	// What River's completer (and JobCompleteTx) run for a completed job,
	// for the removed job and for one still running.
	now := time.Now()
	var params riverdriver.JobSetStateIfRunningManyParams
	for _, id := range ids[:2] {
		done := riverdriver.JobSetStateCompleted(id, now, nil)
		params.ID, params.Attempt, params.ErrData = append(params.ID, done.ID), append(params.Attempt, done.Attempt), append(params.ErrData, done.ErrData)
		params.FinalizedAt, params.MetadataDoMerge = append(params.FinalizedAt, done.FinalizedAt), append(params.MetadataDoMerge, false)
		params.MetadataUpdates, params.ScheduledAt = append(params.MetadataUpdates, nil), append(params.ScheduledAt, done.ScheduledAt)
		params.State = append(params.State, done.State)
	}
	rows, err := riverpgxv5.New(pool).GetExecutor().JobSetStateIfRunningMany(ctx, &params)
	require.NoError(t, err)
	require.Len(t, rows, 1, "River's completer finds only the job the worker did not remove")
	require.Equal(t, ids[1], rows[0].ID)
	require.Equal(t, rivertype.JobStateCompleted, rows[0].State)
	var left []int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT array_agg(id ORDER BY id) FROM river_job`).Scan(&left))
	require.Equal(t, ids[1:], left)

	qs, err := jobs.ReadQueueStats(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"available": 0, "pending": 0, "retryable": 0, "running": 0, "scheduled": 1}, qs.ByState)
}

// The queue's lag leaves out the jobs of a paused queue (a paused
// destination): they wait on purpose, and counting them would report a
// lag nobody can act on but by resuming.
func TestQueueLagLeavesOutPausedQueues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	require.NoError(t, err)
	for _, j := range []struct {
		dest, id string
		ago      time.Duration
	}{{"paused", "old", time.Hour}, {"live", "recent", time.Minute}} {
		opts := jobs.InsertOptsFor(5)
		opts.Queue = jobs.QueueFor("s", j.dest)
		res, err := rc.Insert(ctx, jobs.EventArgs{Source: "s", EventID: j.id, Destination: j.dest}, opts)
		require.NoError(t, err)
		_, err = pool.Exec(ctx, `UPDATE river_job SET state = 'available', scheduled_at = now() - $2::bigint * interval '1 second' WHERE id = $1`,
			res.Job.ID, int64(j.ago.Seconds()))
		require.NoError(t, err)
	}
	lag := func() float64 {
		qs, err := jobs.ReadQueueStats(ctx, pool)
		require.NoError(t, err)
		require.EqualValues(t, 2, qs.ByState["available"])
		return qs.OldestAvailableSeconds
	}
	require.Greater(t, lag(), 3000.0, "both queues running: the hour-old job")
	_, err = pool.Exec(ctx, `INSERT INTO river_queue (name, created_at, metadata, updated_at, paused_at) VALUES ($1, now(), '{}', now(), now())
		ON CONFLICT (name) DO UPDATE SET paused_at = now()`, jobs.QueueFor("s", "paused"))
	require.NoError(t, err)
	l := lag()
	require.Greater(t, l, 50.0)
	require.Less(t, l, 600.0, "the paused queue's hour-old job is left out")
}

// QueueFor names a River-valid queue for any source and destination, and a
// different one for each pair.
func FuzzQueueFor(f *testing.F) {
	f.Add("stripe", "billing")
	f.Add(`we "quote"`, "é☃--__x")
	f.Add("", "")
	valid := regexp.MustCompile(`^(?:[a-z0-9])+(?:[_|\-]?[a-z0-9]+)*$`) // River's rule
	f.Fuzz(func(t *testing.T, source, dest string) {
		q := jobs.QueueFor(source, dest)
		if len(q) > 64 || !valid.MatchString(q) {
			t.Fatalf("QueueFor(%q, %q) = %q: not a River queue name", source, dest, q)
		}
		if other := jobs.QueueFor(source+"x", dest); other == q {
			t.Fatalf("QueueFor(%q, %q) = QueueFor(%q, %q)", source, dest, source+"x", dest)
		}
	})
}
