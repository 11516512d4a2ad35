package jobs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/internal/pgtest"
	"github.com/hookline/hookline/jobs"
)

// NewEventJob is the row River's InsertManyTx writes for the same job: args,
// unique key, unique states, attempt cap, priority, queue and kind, for ids
// that JSON must escape too. (ingest's TestBatchedJobsAreRiversJobs compares
// whole rows, written by the group committer's statement.)
func TestEventJobMatchesRiver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	require.NoError(t, err)
	type job struct {
		source, id  string
		maxAttempts int
	}
	cases := []job{
		{"stripe", "evt_1NG8Du2eZvKYlo2CUI79vXWy", 10},
		{"paddle", "ntf_01hv8x2a", 1},
		{`we "quote" \ and <tag>&`, `id "with" \ <&> é ☃ 😀` + "\u2028\u2029\t\n", 5000},
		{"s", "", 300},
	}
	var params []river.InsertManyParams
	for _, c := range cases {
		params = append(params, river.InsertManyParams{Args: jobs.EventArgs{Source: c.source, EventID: c.id}, InsertOpts: jobs.InsertOptsFor(c.maxAttempts)})
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
		want, err := jobs.NewEventJob(c.source, c.id, c.maxAttempts)
		require.NoError(t, err)
		require.Equal(t, want.UniqueKey, got.key, "unique key of %+v", c)
		require.Equal(t, int(jobs.EventUniqueStates), got.states)
		require.Equal(t, int(want.MaxAttempts), got.maxAttempts)
		require.Equal(t, jobs.EventJobPriority, got.priority)
		require.Equal(t, jobs.Queue, got.queue)
		require.Equal(t, jobs.EventArgs{}.Kind(), got.kind)
		var same bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT $1::jsonb = args FROM river_job WHERE unique_key = $2`, string(want.Args), want.UniqueKey).Scan(&same))
		require.True(t, same, "args %s", want.Args)
	}
	_, err = jobs.NewEventJob("s", "x", 9000)
	require.ErrorContains(t, err, "smallint", "an attempt cap River could not store")
}

// An event's job row, for a statement that inserts it itself; the unique
// key is what River computes for EventArgs.
func ExampleNewEventJob() {
	j, err := jobs.NewEventJob("stripe", "evt_123", 10)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s\n%d-byte unique key, states %08b, max_attempts %d\n", j.Args, len(j.UniqueKey), jobs.EventUniqueStates, j.MaxAttempts)
	// Output:
	// {"source":"stripe","event_id":"evt_123"}
	// 32-byte unique key, states 11110001, max_attempts 1000
}

// NewEventJob's args are json.Marshal(EventArgs), byte for byte, and its
// attempt cap InsertOptsFor's.
func TestEventJobArgsAreEventArgs(t *testing.T) {
	t.Parallel()
	for _, c := range [][2]string{{"stripe", "evt_1"}, {`q"<&>\`, "é☃ 😀\u2028\x01"}, {"", ""}, {"a\xffb", "\xed\xa0\x80"}} {
		for _, maxAttempts := range []int{1, 10, 250, 251, 8000} {
			j, err := jobs.NewEventJob(c[0], c[1], maxAttempts)
			require.NoError(t, err)
			want, err := json.Marshal(jobs.EventArgs{Source: c[0], EventID: c[1]})
			require.NoError(t, err)
			require.Equal(t, string(want), string(j.Args))
			require.Equal(t, jobs.InsertOptsFor(maxAttempts).MaxAttempts, int(j.MaxAttempts))
		}
	}
}
