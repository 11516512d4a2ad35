package jobs_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/ingest"
	"github.com/hookline/hookline/jobs"
	"github.com/hookline/hookline/providers"
)

// Group commit changes how many statements record the work, not what they
// record: the same events through the per-event path and through batches
// (every third event failing its first attempt) end with the same rows —
// each event completed after the same attempts, the same attempts log,
// every claim completed, every job finished — and the destination saw each
// attempt once. The batched run did share statements (some batch held
// more than one job), so the comparison is not of two per-event runs.
func TestGroupCommitMatchesPerEvent(t *testing.T) {
	t.Parallel()
	const events = 120
	type outcome struct {
		rows    []string // event_id state attempts
		log     []string // event_id n status
		claims  []string // state count
		jobs    []string // state count
		forward map[string]int
	}
	run := func(t *testing.T, perEvent bool) (outcome, *prometheus.Registry) {
		var mu sync.Mutex
		forwards := map[string]int{}
		dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			key := r.Header.Get("Idempotency-Key")
			mu.Lock()
			forwards[key]++
			n := forwards[key]
			mu.Unlock()
			var i int
			_, _ = fmt.Sscanf(key, "s:evt_gc_%d", &i)
			if i%3 == 0 && n == 1 {
				http.Error(w, "first attempt fails", http.StatusInternalServerError)
			}
		}))
		t.Cleanup(dest.Close)
		reg := prometheus.NewRegistry()
		b := startWith(t, &jobs.Source{MaxAttempts: 5, BackoffMin: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond,
			Destination: &jobs.Destination{URL: dest.URL}}, false, func(c *jobs.ClientConfig) { c.PerEvent, c.Registerer = perEvent, reg })
		var wg sync.WaitGroup
		for g := range 12 {
			wg.Go(func() {
				for i := g; i < events; i += 12 {
					require.Equal(t, "accepted", b.send(t, fmt.Sprintf("evt_gc_%03d", i)))
				}
			})
		}
		wg.Wait()
		ctx := context.Background()
		require.Eventually(t, func() bool {
			var n int
			require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM hookline_event_destinations WHERE state = 'completed'`).Scan(&n))
			return n == events
		}, 60*time.Second, 20*time.Millisecond)
		b.waitIdle(t, 30*time.Second)
		var o outcome
		strs := func(sql string) []string {
			var out []string
			require.NoError(t, b.pool.QueryRow(ctx, sql).Scan(&out))
			return out
		}
		o.rows = strs(`SELECT array_agg(event_id || ' ' || state || ' ' || attempts ORDER BY event_id) FROM hookline_event_destinations`)
		o.log = strs(`SELECT array_agg(event_id || ' ' || n || ' ' || status ORDER BY event_id, n) FROM hookline_attempts`)
		o.claims = strs(`SELECT array_agg(state || ' ' || n) FROM (SELECT state, count(*) n FROM hookline_claims GROUP BY 1) x`)
		o.jobs = strs(`SELECT array_agg(t || state || ' ' || n) FROM (
			SELECT 'left ' t, state::text, count(*) n FROM river_job WHERE kind = '` + jobs.EventArgs{}.Kind() + `' GROUP BY 1, 2
			UNION ALL SELECT 'removed ', state::text, count(*) FROM removed_river_job WHERE kind = '` + jobs.EventArgs{}.Kind() + `' GROUP BY 1, 2) x`)
		mu.Lock()
		o.forward = maps.Clone(forwards)
		mu.Unlock()
		return o, reg
	}
	perEvent, _ := run(t, true)
	batched, reg := run(t, false)
	require.Equal(t, perEvent, batched)
	require.Len(t, batched.rows, events)
	require.Equal(t, []string{fmt.Sprint("completed ", events)}, batched.claims)
	require.Equal(t, []string{fmt.Sprint("removed running ", events)}, batched.jobs, "the job of each event removed by its completion")
	require.True(t, slices.Contains(batched.log, "evt_gc_000 1 500") && slices.Contains(batched.log, "evt_gc_000 2 200"), batched.log[:4])

	shared := sharedBatches(t, reg)
	require.True(t, shared["claim"] || shared["complete"], "no claim or completion batch held more than one job: %v", shared)
}

// TestGroupCommitEndsLinePlaces: the completions of ordered events share
// batches too (each batch locks its lines in key order, completes, and
// hands every line on, in one transaction), and the lines still hold: per
// key, forwards never overlap and arrive in acceptance order, and every
// line ends with all its places passed.
func TestGroupCommitEndsLinePlaces(t *testing.T) {
	t.Parallel()
	const keys, perKey = 40, 5
	// A forward takes a while, so lines overlap in time.
	dest := newOrderRecorder(t, recorderOptions{IDFormat: "evt_k%d_%d", Hold: 2 * time.Millisecond})
	keyOf, err := providers.ParseKeyResolver("json:data.object.id")
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	b := startOrdered(t, &jobs.Source{MaxAttempts: 3, Destination: &jobs.Destination{URL: dest.URL}}, false,
		func(c *jobs.ClientConfig) { c.Registerer = reg }, &ingest.Ordering{Key: keyOf, KeyName: "json:data.object.id"})

	// Each key's events are sent one after another (acceptance order is
	// sending order); the keys concurrently.
	var wg sync.WaitGroup
	for k := range keys {
		wg.Go(func() {
			for n := range perKey {
				body := fmt.Sprintf(`{"id":"evt_k%d_%d","type":"charge.updated","created":1764504000,"data":{"object":{"id":"ch_%d"}}}`, k, n, k)
				require.Equal(t, "accepted", b.sendBody(t, []byte(body)))
			}
		})
	}
	wg.Wait()
	ctx := context.Background()
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM hookline_event_destinations WHERE state = 'completed'`).Scan(&n))
		return n == keys*perKey
	}, 60*time.Second, 20*time.Millisecond)

	seen := dest.forwards(t)
	require.Len(t, seen, keys)
	for key, ns := range seen {
		require.Equal(t, []int{0, 1, 2, 3, 4}, ns, "key %s forwarded out of order", key)
	}
	var behind int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM hookline_order_keys WHERE done_seq <> last_seq`).Scan(&behind))
	require.Zero(t, behind, "a line was left with places not passed")

	require.True(t, sharedBatches(t, reg)["complete"], "no completion batch held more than one ordered event")
}

// sharedBatches reads hookline_worker_batch_size from reg: per statement
// (claim, complete), whether some batch held more than one job.
func sharedBatches(t *testing.T, reg *prometheus.Registry) map[string]bool {
	t.Helper()
	shared := map[string]bool{}
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "hookline_worker_batch_size" {
			continue
		}
		for _, m := range f.GetMetric() {
			h := m.GetHistogram()
			one := h.GetBucket()[0] // le=1
			require.Equal(t, 1.0, one.GetUpperBound())
			shared[m.GetLabel()[0].GetValue()] = h.GetSampleCount() > one.GetCumulativeCount()
		}
	}
	return shared
}
