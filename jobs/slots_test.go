package jobs_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/jobs"
)

// TestWorkersBoundForwardsNotJobs: with group commit River runs more of a
// destination's jobs than workers (the others wait for their claim or
// completion batch), yet no more than workers forwards reach the
// destination at once.
func TestWorkersBoundForwardsNotJobs(t *testing.T) {
	t.Parallel()
	const workers = 3
	var mu sync.Mutex
	inFlight, most := 0, 0
	release := make(chan struct{})
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		mu.Unlock()
		select {
		case <-release:
		case <-r.Context().Done():
		}
		mu.Lock()
		inFlight--
		mu.Unlock()
	}))
	t.Cleanup(dest.Close)
	b := startWith(t, &jobs.Source{MaxAttempts: 3, Destination: &jobs.Destination{URL: dest.URL}}, false,
		func(c *jobs.ClientConfig) { c.Workers = workers })
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(free) // first of the clean-ups, should the test fail while the destination holds
	for i := range 4 * workers {
		require.Equal(t, "accepted", b.send(t, "evt_"+strconv.Itoa(i)))
	}

	// The destination holds every forward: River's running jobs pile up
	// behind the slots.
	require.Eventually(t, func() bool {
		var running int
		require.NoError(t, b.pool.QueryRow(context.Background(),
			`SELECT count(*) FROM river_job WHERE state = 'running' AND kind = $1`, jobs.EventArgs{}.Kind()).Scan(&running))
		mu.Lock()
		defer mu.Unlock()
		return running > workers && inFlight == workers
	}, 30*time.Second, 10*time.Millisecond, "River never ran more jobs than the forwards in flight")
	free()
	b.waitIdle(t, 60*time.Second)
	for i := range 4 * workers {
		require.Equal(t, "completed", b.event(t, "evt_"+strconv.Itoa(i)).State)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, workers, most, "forwards at once")
}

// TestNoForwardSlotGivesTheAttemptBack: a job whose River timeout no longer
// leaves a whole forward's timeout while it waits for a slot does not
// forward; its attempt is logged as interrupted and not counted, and River
// retries it.
func TestNoForwardSlotGivesTheAttemptBack(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var mu sync.Mutex
	held := false
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		first := !held
		held = true
		mu.Unlock()
		if first { // the first forward keeps the only slot
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
	}))
	t.Cleanup(dest.Close)
	// One slot, two River jobs; a job may run 2.5 s and a forward 2 s, so
	// the second job gives up on the slot 0.5 s after it started, long
	// before the first forward could time out.
	b := startWith(t, &jobs.Source{MaxAttempts: 3, Timeout: 2500 * time.Millisecond, BackoffMin: 10 * time.Millisecond,
		BackoffMax: 20 * time.Millisecond, Destination: &jobs.Destination{URL: dest.URL, Timeout: 2 * time.Second}}, false,
		func(c *jobs.ClientConfig) { c.Workers = 1 })
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(free)
	require.Equal(t, "accepted", b.send(t, "evt_a"))
	require.Equal(t, "accepted", b.send(t, "evt_b"))

	var interrupted string
	require.Eventually(t, func() bool {
		err := b.pool.QueryRow(context.Background(),
			`SELECT event_id FROM hookline_attempts WHERE error LIKE 'interrupted: no forward slot%' LIMIT 1`).Scan(&interrupted)
		return err == nil
	}, 30*time.Second, 10*time.Millisecond, "no attempt was interrupted for want of a slot")
	free()
	b.waitIdle(t, 60*time.Second)
	for _, id := range []string{"evt_a", "evt_b"} {
		require.Equal(t, "completed", b.event(t, id).State, id)
	}
	var counted, attempts int
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT job_attempts, attempts FROM hookline_event_destinations WHERE event_id = $1`, interrupted).Scan(&counted, &attempts))
	require.Equal(t, 1, counted, "budget spent for %s, whose first attempt found no slot", interrupted)
	require.Equal(t, 1, attempts, "destination attempts counted for %s, whose first attempt found no slot", interrupted)
	// The attempt that reached the destination carries the number the
	// interrupted one had.
	rows, err := b.pool.Query(context.Background(), `SELECT n FROM hookline_attempts WHERE event_id = $1 ORDER BY at`, interrupted)
	require.NoError(t, err)
	ns, err := pgx.CollectRows(rows, pgx.RowTo[int])
	require.NoError(t, err)
	require.Equal(t, []int{1, 1}, ns, "the interrupted attempt and the one that followed")
}
