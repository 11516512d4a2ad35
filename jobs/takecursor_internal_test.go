package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/internal/pgtest"
)

// A completion's take of available jobs starts after the last job the
// worker's takes committed (its cursor), so a job that becomes available
// behind it waits until a take of the queue comes up short, which sends
// the cursor back to the front; a take that may not have committed leaves
// the cursor where it was. River's own fetch, which starts at the front, is not affected.
func TestTakeStartsAfterItsCursor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	require.NoError(t, err)
	queue := QueueFor("s", "d")
	insert := func(eventID string, at time.Time) int64 {
		opts := InsertOptsFor(7)
		opts.ScheduledAt = at
		res, err := rc.Insert(ctx, EventArgs{Source: "s", EventID: eventID, Destination: "d"}, opts)
		require.NoError(t, err)
		require.Equal(t, queue, res.Job.Queue)
		_, err = pool.Exec(ctx, `UPDATE river_job SET state = 'available' WHERE id = $1`, res.Job.ID) // as River's scheduler would
		require.NoError(t, err)
		return res.Job.ID
	}
	base := time.Now().Add(-time.Hour).UTC().Truncate(time.Microsecond)
	e1, e2, e3 := insert("e1", base), insert("e2", base.Add(time.Second)), insert("e3", base.Add(2*time.Second))

	cursor := newTakeCursor()
	// take runs one completion batch's take of want jobs from queue,
	// committed (failed: it did not) and recorded in the cursor; it
	// checks that each job taken is the row River holds.
	take := func(want int, failed error) []int64 {
		c := &completionBatch{wantQueues: []string{queue}, wanting: map[string][]int{}, out: make([]completed, want),
			ahead: &claimAhead{cursor: cursor}}
		for i := range want {
			c.wanting[queue] = append(c.wanting[queue], i)
		}
		priorities, scheduledAts, ids := cursor.args(c.wantQueues)
		b := &pgx.Batch{}
		b.Queue(takeAvailableJobsSQL, c.wantQueues, []int32{int32(want)}, "runner", priorities, scheduledAts, ids)
		br := pool.SendBatch(ctx, b)
		require.NoError(t, c.readTaken(br))
		require.NoError(t, br.Close())
		c.moveCursor(failed)
		var took []int64
		for _, o := range c.out {
			if o.next == nil {
				continue
			}
			took = append(took, o.next.ID)
			held, err := rc.JobGet(ctx, o.next.ID) // River's own read of the row
			require.NoError(t, err)
			got := o.next.JobRow
			require.Equal(t, rivertype.JobStateRunning, held.State)
			require.Equal(t, []any{held.Queue, held.Kind, held.Priority, held.Attempt, held.MaxAttempts},
				[]any{got.Queue, got.Kind, got.Priority, got.Attempt, got.MaxAttempts}, "job %d", got.ID)
			require.JSONEq(t, string(held.EncodedArgs), string(got.EncodedArgs))
			require.JSONEq(t, string(held.Metadata), string(got.Metadata))
			require.True(t, held.CreatedAt.Equal(got.CreatedAt) && held.ScheduledAt.Equal(got.ScheduledAt) &&
				held.AttemptedAt.Equal(*got.AttemptedAt), "job %d", got.ID)
			var args EventArgs
			require.NoError(t, json.Unmarshal(held.EncodedArgs, &args))
			require.Equal(t, args, o.next.Args)
		}
		return took
	}

	require.Equal(t, []int64{e1, e2}, take(2, nil))
	late := insert("late", base.Add(-time.Second)) // before e1 in River's order
	require.Equal(t, []int64{e3}, take(1, nil), "the take starts after e2")
	require.Empty(t, take(1, nil), "nothing after e3: the take comes up short")
	require.Equal(t, []int64{late}, take(1, nil), "a short take sends the cursor to the front")

	e4, e5 := insert("e4", base.Add(3*time.Second)), insert("e5", base.Add(4*time.Second))
	require.Equal(t, []int64{e4}, take(1, errors.New("commit: connection lost")))
	_, err = pool.Exec(ctx, `UPDATE river_job SET state = 'available' WHERE id = $1`, e4) // as if rolled back
	require.NoError(t, err)
	require.Equal(t, []int64{e4, e5}, take(2, nil), "a take that may not have committed does not move the cursor")
}

// The cursor keeps, per queue, the last place a take committed; a short
// take forgets it.
func TestTakeCursorPerQueue(t *testing.T) {
	t.Parallel()
	now := time.Now()
	c := newTakeCursor()
	c.advance("a", takePos{priority: 1, scheduledAt: now, id: 7}, false)
	c.advance("b", takePos{priority: 1, scheduledAt: now, id: 9}, true)
	ps, ss, ids := c.args([]string{"a", "b"})
	require.Equal(t, []int16{1, takeStart.priority}, ps)
	require.True(t, ss[0].Equal(now) && ss[1].Equal(takeStart.scheduledAt))
	require.Equal(t, []int64{7, takeStart.id}, ids)

	// A take that committed after a later one (both in flight at once)
	// does not move the cursor back; a short one still resets it.
	c.advance("a", takePos{priority: 1, scheduledAt: now, id: 5}, false)
	_, _, ids = c.args([]string{"a"})
	require.Equal(t, []int64{7}, ids)
	c.advance("a", takePos{priority: 1, scheduledAt: now, id: 5}, true)
	_, _, ids = c.args([]string{"a"})
	require.Equal(t, []int64{takeStart.id}, ids)

	later := takePos{priority: 1, scheduledAt: now, id: 8}
	require.True(t, later.after(takePos{priority: 1, scheduledAt: now, id: 7}))
	require.True(t, later.after(takePos{priority: 1, scheduledAt: now.Add(-time.Microsecond), id: 9}))
	require.False(t, later.after(takePos{priority: 2, scheduledAt: now.Add(-time.Hour), id: 1}))
	require.True(t, later.after(takeStart))
}
