package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/internal/pgtest"
)

// The stranded-event sweep checks one window of the unfinished events per
// run and goes on from there next run, wrapping around: every stranded event
// is re-enqueued once, within (events / window) runs, and none that has an
// active job gets a second one.
func TestSweepWindowRotates(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	require.NoError(t, err)

	// 25 unfinished events, queued 5 minutes ago (in pairs with the same
	// queued_at, as a batch's are); every third one still has its job.
	var withJob []river.InsertManyParams
	for i := range 25 {
		id := fmt.Sprintf("evt_sweep_%02d", i)
		_, err := pool.Exec(ctx, `WITH e AS (INSERT INTO hookline_events (source, event_id, delivery_id) VALUES ('s', $1, 1))
			INSERT INTO hookline_event_destinations (source, event_id, destination, delivery_id, queued_at)
			VALUES ('s', $1, 'default', 1, now() - interval '5 minutes' + $2 * interval '1 second')`, id, i/2)
		require.NoError(t, err)
		if i%3 == 0 {
			withJob = append(withJob, river.InsertManyParams{Args: EventArgs{Source: "s", EventID: id, Destination: DefaultDestination}, InsertOpts: InsertOptsFor(3)})
		}
	}
	_, err = rc.InsertMany(ctx, withJob)
	require.NoError(t, err)
	stranded := 25 - len(withJob)

	w := &CleanupWorker{Pool: pool, Logger: slog.New(slog.DiscardHandler), SweepWindow: 10}
	var perRun []int
	for range 4 {
		n, err := w.requeueStranded(ctx, rc.InsertMany)
		require.NoError(t, err)
		perRun = append(perRun, n)
	}
	require.Equal(t, stranded, perRun[0]+perRun[1]+perRun[2], "three windows of 10 cover the 25 events: %v", perRun)
	require.Zero(t, perRun[3], "the fourth run starts over and finds every event with its job")
	require.Positive(t, perRun[0])
	require.Positive(t, perRun[1])

	var jobsPerEvent []int
	require.NoError(t, pool.QueryRow(ctx, `SELECT array_agg(n ORDER BY id) FROM (
		SELECT e.event_id AS id, (SELECT count(*) FROM river_job j WHERE j.args->>'event_id' = e.event_id) AS n
		FROM hookline_events e) x`).Scan(&jobsPerEvent))
	require.Len(t, jobsPerEvent, 25)
	for i, n := range jobsPerEvent {
		require.Equal(t, 1, n, "event %d has %d jobs", i, n)
	}
}
