package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/internal/pgtest"
	"github.com/hookline/hookline/jobs"
)

// A paused destination removed from the configuration can still be
// resumed (its events wait only while the pause lasts, so that is how they
// leave); one that is not paused, or never was, is not found, and a
// destination not configured cannot be paused.
func TestResumeARemovedPausedDestination(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	require.NoError(t, err)
	before := jobs.NewDestinations(pool, client, []jobs.DestinationName{{Source: "s", Name: "gone"}})
	require.NoError(t, before.Pause(ctx, "s", "gone"))

	after := jobs.NewDestinations(pool, client, nil) // restarted without it
	require.ErrorIs(t, after.Pause(ctx, "s", "gone"), jobs.ErrUnknownDestination)
	require.ErrorIs(t, after.Resume(ctx, "s", "never"), jobs.ErrUnknownDestination)
	require.NoError(t, after.Resume(ctx, "s", "gone"))
	var pausedAt *time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT paused_at FROM hookline_destinations WHERE source = 's' AND name = 'gone'`).Scan(&pausedAt))
	require.Nil(t, pausedAt)
	var queuePaused bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT paused_at IS NOT NULL FROM river_queue WHERE name = $1`, jobs.QueueFor("s", "gone")).Scan(&queuePaused))
	require.False(t, queuePaused, "its River queue is resumed too")
	require.ErrorIs(t, after.Resume(ctx, "s", "gone"), jobs.ErrUnknownDestination, "no longer paused: nothing to resume")
}
