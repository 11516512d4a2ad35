package app_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/internal/app"
	"github.com/hookline/hookline/internal/pgtest"
	"github.com/hookline/hookline/jobs"
)

// paceDelay reads hookline_ingest_pace_delay_seconds from /metrics.
func paceDelay(t *testing.T, base string) float64 {
	t.Helper()
	_, _, m := get(base + "/metrics")
	for _, l := range strings.Split(m, "\n") {
		if strings.HasPrefix(l, "hookline_ingest_pace_delay_seconds ") {
			v, err := strconv.ParseFloat(strings.Fields(l)[1], 64)
			require.NoError(t, err)
			return v
		}
	}
	t.Fatal("hookline_ingest_pace_delay_seconds is not in /metrics")
	return 0
}

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestIngestPacesToItsWorkers: under --role all, while the workers' oldest
// ready event waits longer than ingest.pace_lag, deliveries wait up to
// ingest.pace_max_delay before they are read, and the wait ends once the
// workers catch up. One worker whose Go handler holds the first event
// makes the others wait.
func TestIngestPacesToItsWorkers(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var once sync.Once
	held := make(chan struct{})
	handler := jobs.HandlerFunc(func(ctx context.Context, _ pgx.Tx, ev *jobs.Event) error {
		if ev.ID == "evt_hold" {
			once.Do(func() { close(held) })
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	logs := &syncBuffer{}
	yaml := fmt.Sprintf(`listen: 127.0.0.1:0
database_url: %q
admin_token: %s
workers: 1
ingest: {pace_lag: 100ms, pace_max_delay: 300ms}
sources:
  - name: s
    provider: stripe
    secrets: [%q]
`, pgtest.NewURL(t), hostileToken, stripeSecret)
	ip := startApp(t, yaml, app.Options{Handlers: map[string]jobs.Handler{"s": handler},
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	base := ip.url(0)

	require.Equal(t, http.StatusOK, postEvent(testClient, base, "s", "evt_hold", stripeSecret).Status)
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("the handler did not start within 30s")
	}
	require.Zero(t, paceDelay(t, base), "no backlog yet: deliveries are not slowed")
	for i := range 3 {
		a := postEvent(testClient, base, "s", fmt.Sprintf("evt_wait_%d", i), stripeSecret)
		require.Equal(t, http.StatusOK, a.Status, a.Body)
	}

	// The three wait behind the held event: the delay climbs to its most.
	require.Eventually(t, func() bool { return paceDelay(t, base) == 0.3 }, 30*time.Second, 20*time.Millisecond,
		"the pace delay reaches ingest.pace_max_delay while the workers are behind")
	a := postEvent(testClient, base, "s", "evt_paced", stripeSecret)
	require.Equal(t, http.StatusOK, a.Status, a.Body)
	require.GreaterOrEqual(t, a.Took, 300*time.Millisecond, "a delivery waits the pace delay before it is read")
	require.Contains(t, logs.String(), "the workers are behind")

	close(release)
	require.Eventually(t, func() bool { return paceDelay(t, base) == 0 }, 30*time.Second, 20*time.Millisecond,
		"the delay returns to 0 once the workers have caught up")
	require.Contains(t, logs.String(), "the workers have caught up")
	for _, id := range []string{"evt_hold", "evt_wait_0", "evt_wait_1", "evt_wait_2", "evt_paced"} {
		eventState(t, base, "s", id, 30*time.Second, "completed")
	}
}
