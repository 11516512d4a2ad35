package jobs_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

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
