package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/internal/pgtest"
)

// A backlog's lag is the age of the oldest ready job on the queues whose
// speed is the process's own: not those of flow-controlled or paused
// destinations, nor of one whose forward slots are all busy.
func TestBacklogLag(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	require.NoError(t, err)
	open := &Target{Name: "open", HTTP: &Destination{URL: "http://127.0.0.1:9/"}}
	limited := &Target{Name: "limited", HTTP: &Destination{URL: "http://127.0.0.1:9/"}, RateLimit: 5}
	handled := &Target{Name: "handled", Handler: HandlerFunc(nil)}
	sources := []*Source{{Name: "s", Targets: []*Target{open, limited, handled}}}
	b := NewBacklog(pool, sources)
	slots := newAttemptSlots(sources, 2, prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "w"}, []string{"source", "destination"}))
	b.watch(map[string]*Source{"s": sources[0]}, slots)

	lag := func() time.Duration {
		t.Helper()
		d, err := b.Lag(ctx)
		require.NoError(t, err)
		return d
	}
	insert := func(dest, id string, age time.Duration) {
		t.Helper()
		opts := InsertOptsFor(5)
		opts.ScheduledAt = time.Now().Add(-age)
		_, err := rc.Insert(ctx, EventArgs{Source: "s", EventID: id, Destination: dest}, opts)
		require.NoError(t, err)
		// What River's scheduler does to a job whose time has come.
		_, err = pool.Exec(ctx, `UPDATE river_job SET state = 'available' WHERE state = 'scheduled' AND scheduled_at <= now()`)
		require.NoError(t, err)
	}
	near := func(got, want time.Duration) {
		t.Helper()
		require.True(t, got >= want && got < want+time.Minute, "lag %s, want about %s", got, want)
	}

	require.Zero(t, lag(), "no jobs: no lag")
	insert("limited", "evt_limited", time.Hour)
	require.Zero(t, lag(), "a rate-limited destination's jobs wait on purpose")
	insert("open", "evt_open_new", time.Second)
	insert("open", "evt_open_old", 10*time.Second)
	near(lag(), 10*time.Second)

	slots[open].busy <- struct{}{}
	slots[open].busy <- struct{}{}
	require.Zero(t, lag(), "every forward slot of the destination is busy: it waits on the destination")
	insert("handled", "evt_handled", 3*time.Second)
	near(lag(), 3*time.Second)
	<-slots[open].busy
	near(lag(), 10*time.Second)

	_, err = pool.Exec(ctx, ensureQueueSQL, QueueFor("s", "open"))
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE river_queue SET paused_at = now() WHERE name = $1`, QueueFor("s", "open"))
	require.NoError(t, err)
	near(lag(), 3*time.Second) // a paused destination's jobs wait on purpose
}
