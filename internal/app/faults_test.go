package app_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/internal/app"
	"github.com/hookline/hookline/internal/config"
	"github.com/hookline/hookline/internal/pgcluster"
	"github.com/hookline/hookline/internal/pgtest"
	"github.com/hookline/hookline/migrations"
)

// Time bounds hookline promises (docs/operations.md), plus slack for a loaded 2-core machine
// running the race detector.
const (
	outageAnswerBound = 5 * time.Second
	rescueBound       = 3*time.Second + 30*time.Second + 20*time.Second // lease + River's rescuer interval + slack
)

// outageDuration is how long TestPostgresOutage keeps Postgres down:
// HOOKLINE_TEST_OUTAGE (a Go duration), default 5s. The chaos harness runs
// the full 30 s.
func outageDuration(t *testing.T) time.Duration {
	if s := os.Getenv("HOOKLINE_TEST_OUTAGE"); s != "" {
		d, err := time.ParseDuration(s)
		require.NoError(t, err, "HOOKLINE_TEST_OUTAGE")
		return d
	}
	return 5 * time.Second
}

func connect(t *testing.T, dbURL string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dbURL)
	require.NoError(t, err)
	cfg.MaxConns = 4
	cfg.ConnConfig.ConnectTimeout = 2 * time.Second
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// states returns the state of every event of source s, by event id.
func states(ctx context.Context, pool *pgxpool.Pool) (map[string]string, error) {
	rows, err := pool.Query(ctx, `SELECT event_id, state FROM hookline_event_states WHERE source = 's'`)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	var id, st string
	_, err = pgx.ForEachRow(rows, []any{&id, &st}, func() error { out[id] = st; return nil })
	return out, err
}

// requireAllCompleted waits (bounded) until every id is completed and the
// sink got each, never concurrently for one key.
func requireAllCompleted(t *testing.T, pool *pgxpool.Pool, dest *sink, ids []string, within time.Duration) {
	t.Helper()
	// Event states live in Postgres: poll them (bounded), there is no signal.
	deadline := time.Now().Add(within)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for ; ; <-tick.C {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := states(ctx, pool)
		cancel()
		var open []string
		for _, id := range ids {
			if err != nil || st[id] != "completed" || dest.got("s:"+id) == 0 {
				open = append(open, id)
			}
		}
		if len(open) == 0 {
			break
		}
		if time.Now().After(deadline) {
			// Say what became of the first few: event state and River job.
			var why []string
			for _, id := range open[:min(len(open), 5)] {
				var job string
				_ = pool.QueryRow(context.Background(), `SELECT state || ' attempt ' || attempt || '/' || max_attempts || ' errors ' || coalesce(array_to_string(errors, ' | '), '')
					FROM river_job WHERE args->>'event_id' = $1 ORDER BY id DESC LIMIT 1`, id).Scan(&job)
				why = append(why, fmt.Sprintf("%s: event %q, sink got %d, job %s", id, st[id], dest.got("s:"+id), job))
			}
			t.Fatalf("%d events not completed within %s (err %v):\n%s", len(open), within, err, strings.Join(why, "\n"))
		}
	}
	require.LessOrEqual(t, dest.concurrent(), 1, "never two concurrent deliveries for one key")
	var processing int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM hookline_claims WHERE state = 'processing'`).Scan(&processing))
	require.Zero(t, processing, "no claim left processing")
}

// TestInstancesStartTogether: three `hookline serve` processes (all, ingest,
// worker) started at once on an EMPTY database all come up (migrations run
// under an advisory lock), one River leader is elected for the periodic
// work, and dedupe spans instances: the same event posted to two ingest
// instances concurrently is accepted once and delivered once.
func TestInstancesStartTogether(t *testing.T) {
	t.Parallel()
	empty := pgtest.NewEmptyPool(t)
	dbURL := empty.Config().ConnString()
	dest := newSink(t, 0)
	var procs []*proc
	for _, role := range []string{"all", "ingest", "worker"} {
		addr := freeAddr(t)
		procs = append(procs, launch(t, addr, nil, "serve", "--config", writeConfig(t, serveConfig(addr, dbURL, dest.URL, "", "")), "--role", role))
	}
	for _, p := range procs {
		p.WaitHealthy(t, 90*time.Second)
	}
	for _, p := range procs {
		code, _, body := get(p.BaseURL() + "/readyz")
		require.Equal(t, http.StatusOK, code, body)
	}
	out, err := launchOutput(t, "migrate", "status", "--config", writeConfig(t, serveConfig("127.0.0.1:0", dbURL, dest.URL, "", "")))
	require.NoError(t, err, out)
	require.NotContains(t, out, "pending")

	ctx := context.Background()
	pool := connect(t, dbURL)
	require.Eventually(t, func() bool {
		var n int
		return pool.QueryRow(ctx, `SELECT count(*) FROM river_leader`).Scan(&n) == nil && n == 1
	}, 30*time.Second, 100*time.Millisecond, "one River leader for the periodic clean-up")

	// The same event, 10 times to each ingest instance, concurrently.
	var accepted, duplicate atomic.Int32
	var wg sync.WaitGroup
	for i := range 20 {
		p := procs[i%2]
		wg.Go(func() {
			a := postEvent(testClient, p.BaseURL(), "s", "evt_shared", stripeSecret)
			switch {
			case a.Status == http.StatusOK && strings.Contains(a.Body, `"accepted"`):
				accepted.Add(1)
			case a.Status == http.StatusOK && strings.Contains(a.Body, `"duplicate"`):
				duplicate.Add(1)
			default:
				t.Errorf("answer %d %s", a.Status, a.Body)
			}
		})
	}
	wg.Wait()
	require.EqualValues(t, 1, accepted.Load())
	require.EqualValues(t, 19, duplicate.Load())
	requireAllCompleted(t, pool, dest, []string{"evt_shared"}, 30*time.Second)
	require.Equal(t, 1, dest.got("s:evt_shared"))
	var deliveries int
	require.NoError(t, pool.QueryRow(ctx, `SELECT deliveries FROM hookline_events WHERE event_id = 'evt_shared'`).Scan(&deliveries))
	require.Equal(t, 20, deliveries)
}

func launchOutput(t *testing.T, args ...string) (string, error) {
	out, err := exec.Command(hooklineBin(t), args...).CombinedOutput()
	return string(out), err
}

// TestTerminateBackendsWhileDelivering: hookline's Postgres connections are
// killed (pg_terminate_backend) every 100 ms while deliveries flow into two
// instances: a delivery answered 2xx is always stored, nothing else is ever
// answered 2xx, and once the terminations stop every stored event is
// delivered.
func TestTerminateBackendsWhileDelivering(t *testing.T) {
	t.Parallel()
	// A generous budget: an attempt whose transaction dies with its
	// connection still uses one of River's attempts, and a job whose last
	// attempt fails that way is discarded with its event unfinished (see
	// TestDatabaseErrorsDoNotStrandEvents). This test is about ingest and
	// recovery, not about that.
	dbURL, dest, ids := terminateWhileDelivering(t, 5, 100*time.Millisecond)
	requireAllCompleted(t, connect(t, dbURL), dest, ids, rescueBound+30*time.Second)
}

// TestDatabaseErrorsDoNotStrandEvents: the same with max_attempts: 2 and
// terminations every 15 ms. Attempts that fail on a dropped connection
// (claiming, or recording the failure) use up River's budget without a
// destination attempt; when the last one fails that way River discards the
// job, and the accepted event stays "queued" or "processing" for ever: never
// delivered, not in the dead set (nothing disappears silently) — as it did before
// this test. (Regression test: jobs/ now counts the budget itself, snoozes on database
// errors before the claim, and sweeps events left without a job.)
func TestDatabaseErrorsDoNotStrandEvents(t *testing.T) {
	t.Parallel()
	dbURL, _, ids := terminateWhileDelivering(t, 2, 15*time.Millisecond)
	pool := connect(t, dbURL)
	deadline := time.Now().Add(rescueBound + 30*time.Second)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for ; ; <-tick.C {
		st, err := states(context.Background(), pool)
		var open []string
		for _, id := range ids {
			if err != nil || (st[id] != "completed" && st[id] != "dead") {
				open = append(open, id+"="+st[id])
			}
		}
		if len(open) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d accepted events neither completed nor dead (their River jobs were discarded): %v", len(open), open)
		}
	}
}

// terminateWhileDelivering runs two `hookline serve` instances (budget
// maxAttempts), posts 150 events from 6 senders (retrying 503s) while every
// hookline backend is terminated each period (for a second, then half a
// second's pause, and again), checks that every event
// answered 2xx is stored, and returns the database, the sink and the ids of
// the stored events.
func terminateWhileDelivering(t *testing.T, maxAttempts int, period time.Duration) (string, *sink, []string) {
	dbURL := pgtest.NewURL(t)
	dest := newSink(t, 20*time.Millisecond)
	var procs []*proc
	for range 2 {
		addr := freeAddr(t)
		cfg := strings.Replace(serveConfig(addr, dbURL, dest.URL, "", ""), "max_attempts: 5", fmt.Sprintf("max_attempts: %d", maxAttempts), 1)
		procs = append(procs, launch(t, addr, nil, "serve", "--config", writeConfig(t, cfg)))
	}
	for _, p := range procs {
		p.WaitHealthy(t, 90*time.Second)
	}
	killer := connect(t, dbURL)
	ctx, stopKilling := context.WithCancel(context.Background())
	var terminated atomic.Int64
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		// Every killing second is followed by a quiet half second. Killing
		// without a pause, nothing may get in: a new backend's first
		// transaction (connect, prepare, commit) takes longer than period on
		// a loaded machine, and then no event is ever accepted.
		const killing, quiet = time.Second, 500 * time.Millisecond
		phase := time.Now()
		for ctx.Err() == nil {
			if time.Since(phase) >= killing {
				select {
				case <-ctx.Done():
				case <-time.After(quiet):
				}
				phase = time.Now()
				continue
			}
			var n int64
			// MATERIALIZED: the filter must run before pg_terminate_backend,
			// or other databases' sessions on a shared server die too.
			if err := killer.QueryRow(ctx, `WITH victims AS MATERIALIZED (
					SELECT pid FROM pg_stat_activity
					WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend')
				SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM victims`).Scan(&n); err == nil {
				terminated.Add(n)
			}
			select {
			case <-ctx.Done():
			case <-time.After(period):
			}
		}
	}()

	const senders, perSender = 6, 25
	// The senders give up at sendUntil: on a starved machine nearly every
	// answer is a 503 and 4,500 tries would take many minutes. What is
	// checked holds whatever number of events got their 2xx.
	sendUntil := time.Now().Add(2 * time.Minute)
	var mu sync.Mutex
	var got2xx []string
	var unavailable atomic.Int32
	var wg sync.WaitGroup
	for s := range senders {
		wg.Go(func() {
			for i := range perSender {
				id := fmt.Sprintf("evt_term_%d_%d", s, i)
				for try := range 30 { // a provider retries 503s
					if time.Now().After(sendUntil) {
						return
					}
					a := postEvent(testClient, procs[(s+try)%2].BaseURL(), "s", id, stripeSecret)
					if a.Status == http.StatusOK {
						mu.Lock()
						got2xx = append(got2xx, id)
						mu.Unlock()
						break
					}
					if a.Status != http.StatusServiceUnavailable {
						t.Errorf("%s: answer %d %s (%v)", id, a.Status, a.Body, a.Err)
						break
					}
					unavailable.Add(1)
					if a.Header.Get("Retry-After") == "" {
						t.Errorf("%s: 503 without Retry-After", id)
					}
					<-time.After(50 * time.Millisecond) // the provider's pause before its retry
				}
			}
		})
	}
	wg.Wait()
	stopKilling()
	<-killed
	t.Logf("terminated %d backends; %d answers were 503; %d of %d events answered 2xx", terminated.Load(), unavailable.Load(), len(got2xx), senders*perSender)
	require.Positive(t, terminated.Load())
	require.NotEmpty(t, got2xx, "no event was accepted: nothing of what follows would be checked")

	st, err := states(context.Background(), connect(t, dbURL))
	require.NoError(t, err)
	for _, id := range got2xx {
		require.Contains(t, st, id, "answered 2xx but not stored")
	}
	var ids []string
	for id := range st {
		ids = append(ids, id)
	}
	return dbURL, dest, ids
}

// TestPostgresRestart: Postgres is stopped and started again (same
// directory and port) under a running `hookline serve` with deliveries in
// flight: ingest recovers by itself, and every accepted event completes.
func TestPostgresRestart(t *testing.T) {
	t.Parallel()
	cluster, dbURL := pgtest.Cluster(t)
	dest := newSink(t, 300*time.Millisecond)
	addr := freeAddr(t)
	p := startServe(t, writeConfig(t, serveConfig(addr, dbURL, dest.URL, "", "")), addr)
	var ids []string
	for i := range 15 {
		id := fmt.Sprintf("evt_before_%d", i)
		a := postEvent(testClient, p.BaseURL(), "s", id, stripeSecret)
		require.Equal(t, http.StatusOK, a.Status, a.Body)
		ids = append(ids, id)
	}
	require.NoError(t, cluster.Stop()) // deliveries are in flight at the sink
	a := postEvent(testClient, p.BaseURL(), "s", "evt_down", stripeSecret)
	require.Equal(t, http.StatusServiceUnavailable, a.Status, a.Body)
	restarted, err := pgcluster.Start(context.Background(), pgcluster.Options{Dir: cluster.Dir, Port: cluster.Port, Fast: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = restarted.Stop() })

	require.Eventually(t, func() bool {
		return postEvent(testClient, p.BaseURL(), "s", "evt_after", stripeSecret).Status == http.StatusOK
	}, 30*time.Second, 100*time.Millisecond, "ingest recovers without a restart of hookline")
	code, _, body := get(p.BaseURL() + "/readyz")
	require.Equal(t, http.StatusOK, code, body)
	requireAllCompleted(t, connect(t, dbURL), dest, append(ids, "evt_after"), rescueBound)
	select {
	case <-p.Exited:
		t.Fatal("hookline exited")
	default:
	}
}

// TestPostgresOutage runs an App in this process and keeps Postgres down
// for HOOKLINE_TEST_OUTAGE (default 5 s): every ingest answer meanwhile is
// 503 with Retry-After in whole seconds within 5 s, /readyz answers 503
// while down and 200 after, workers resume (events accepted before the
// outage, some of them in flight, complete; no claim is left processing),
// and once the App has shut down no goroutine it started is left.
//
// Not parallel: it counts the process's goroutines.
func TestPostgresOutage(t *testing.T) {
	down := outageDuration(t)
	cluster, dbURL := pgtest.Cluster(t)
	dest := newSink(t, 400*time.Millisecond)
	pool := connect(t, dbURL)
	client := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{}}
	baseline := runtime.NumGoroutine()
	before := goroutines()

	ip := startApp(t, serveConfig("127.0.0.1:0", dbURL, dest.URL, "", ""), app.Options{})
	var ids []string
	for i := range 10 {
		id := fmt.Sprintf("evt_pre_%d", i)
		a := postEvent(client, ip.url(0), "s", id, stripeSecret)
		require.Equal(t, http.StatusOK, a.Status, a.Body)
		ids = append(ids, id)
	}
	require.NoError(t, cluster.Stop())
	downAt := time.Now()
	var n503 int
	for i := 0; time.Since(downAt) < down; i++ {
		a := postEvent(client, ip.url(0), "s", fmt.Sprintf("evt_down_%d", i), stripeSecret)
		require.NoError(t, a.Err)
		require.Equal(t, http.StatusServiceUnavailable, a.Status, a.Body)
		secs, err := strconv.Atoi(a.Header.Get("Retry-After"))
		require.NoError(t, err, "Retry-After in whole seconds")
		require.Positive(t, secs)
		require.Less(t, a.Took, outageAnswerBound)
		n503++

		start := time.Now()
		code, _, body := getWith(client, ip.url(0)+"/readyz")
		require.Equal(t, http.StatusServiceUnavailable, code, body)
		require.Less(t, time.Since(start), outageAnswerBound)
		<-time.After(250 * time.Millisecond) // pace the probes over the outage
	}
	restarted, err := pgcluster.Start(context.Background(), pgcluster.Options{Dir: cluster.Dir, Port: cluster.Port, Fast: true})
	require.NoError(t, err)
	t.Logf("Postgres was down %s; %d ingest answers, all 503", time.Since(downAt).Round(time.Millisecond), n503)

	require.Eventually(t, func() bool {
		code, _, _ := getWith(client, ip.url(0)+"/readyz")
		return code == http.StatusOK
	}, 30*time.Second, 100*time.Millisecond, "/readyz answers 200 again")
	require.Eventually(t, func() bool {
		return postEvent(client, ip.url(0), "s", "evt_post", stripeSecret).Status == http.StatusOK
	}, 30*time.Second, 100*time.Millisecond)
	requireAllCompleted(t, pool, dest, append(ids, "evt_post"), rescueBound)
	st, err := states(context.Background(), pool)
	require.NoError(t, err)
	for id := range st {
		require.False(t, strings.HasPrefix(id, "evt_down_"), "%s was answered 503 but stored", id)
	}

	// Shut everything down that the test started after the baseline, then
	// wait (bounded) for the goroutine count to come back.
	ip.stop(t)
	client.CloseIdleConnections()
	dest.CloseClientConnections()
	require.NoError(t, restarted.Stop()) // its waiter replaces the first cluster's, which has exited
	// Goroutines ending have no signal to wait on: poll, bounded.
	deadline := time.Now().Add(15 * time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for runtime.NumGoroutine() > baseline && time.Now().Before(deadline) {
		<-tick.C
	}
	if n := runtime.NumGoroutine(); n > baseline {
		t.Fatalf("goroutine leak: %d before, %d after shutdown; new ones:\n%s", baseline, n, newGoroutines(before, goroutines()))
	}
}

// getWith GETs u with client c (a dedicated transport, for goroutine counts).
func getWith(c *http.Client, u string) (int, http.Header, string) {
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, resp.Header, string(b)
}

// goroutines returns the stacks of all goroutines, keyed by their header-less
// text (so that the same goroutine compares equal across snapshots).
func goroutines() map[string]string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	out := map[string]string{}
	for _, g := range strings.Split(string(buf), "\n\n") {
		head, _, _ := strings.Cut(g, "\n")
		id := strings.Fields(head)
		if len(id) > 1 {
			out[id[1]] = g
		}
	}
	return out
}

func newGoroutines(before, after map[string]string) string {
	var b strings.Builder
	for id, g := range after {
		if _, ok := before[id]; !ok {
			b.WriteString(g)
			b.WriteString("\n\n")
		}
	}
	return b.String()
}

// postmasterPID reads the running server's pid from its data directory.
func postmasterPID(t *testing.T, c *pgcluster.Cluster) int {
	b, err := os.ReadFile(filepath.Join(c.Dir, "data", "postmaster.pid"))
	require.NoError(t, err)
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	require.NoError(t, err)
	return pid
}

// waitStopped waits until process pid is stopped (state T in /proc), or
// gone.
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true // exited
		}
		i := strings.LastIndexByte(string(b), ')')
		f := strings.Fields(string(b)[i+1:])
		return len(f) > 0 && (f[0] == "T" || f[0] == "t" || f[0] == "Z")
	}, 5*time.Second, time.Millisecond, "process %d did not stop", pid)
}

// childrenOf lists the pids whose parent is pid (from /proc).
func childrenOf(pid int) []int {
	var out []int
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, st := range stats {
		b, err := os.ReadFile(st)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces: cut at the last ')'.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b)[i+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			if c, err := strconv.Atoi(filepath.Base(filepath.Dir(st))); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// TestPostgresFrozen: Postgres hangs (every server process SIGSTOPped: a
// network partition or a stuck server rather than a refused connection)
// while concurrent deliveries arrive. Each is still answered 503 with
// Retry-After within 5 s, and the server works again once Postgres resumes.
func TestPostgresFrozen(t *testing.T) {
	t.Parallel()
	cluster, dbURL := pgtest.Cluster(t)
	addr := freeAddr(t)
	p := startServe(t, writeConfig(t, serveConfig(addr, dbURL, "http://127.0.0.1:9/x", "", "")), addr)
	require.Equal(t, http.StatusOK, postEvent(testClient, p.BaseURL(), "s", "evt_warm", stripeSecret).Status)

	// The postmaster first (no new backends), then every child: backends
	// call setsid(), so a process-group signal would miss them. SIGSTOP
	// takes effect when the process is next scheduled, not when kill
	// returns: wait until the postmaster is stopped before listing its
	// children (it could still fork one), and list them until no new one
	// appears.
	pid := postmasterPID(t, cluster)
	require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
	waitStopped(t, pid)
	frozen := []int{pid}
	seen := map[int]bool{}
	for {
		var fresh []int
		for _, c := range childrenOf(pid) {
			if !seen[c] {
				seen[c] = true
				fresh = append(fresh, c)
			}
		}
		if len(fresh) == 0 {
			break
		}
		for _, c := range fresh {
			_ = syscall.Kill(c, syscall.SIGSTOP)
		}
		for _, c := range fresh {
			waitStopped(t, c)
		}
		frozen = append(frozen, fresh...)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			for _, c := range frozen {
				_ = syscall.Kill(c, syscall.SIGCONT)
			}
		}
	}
	t.Cleanup(resume)

	type result struct {
		id string
		a  answer
	}
	results := make(chan result, 64)
	var wg sync.WaitGroup
	for wave := range 3 { // three waves of 8 concurrent deliveries
		for i := range 8 {
			id := fmt.Sprintf("evt_frozen_%d_%d", wave, i)
			wg.Go(func() { results <- result{id, postEvent(testClient, p.BaseURL(), "s", id, stripeSecret)} })
		}
		<-time.After(time.Second) // space the waves while Postgres stays frozen
	}
	wg.Wait()
	close(results)
	resume()
	var slow []string
	var slowest time.Duration
	for r := range results {
		slowest = max(slowest, r.a.Took)
		require.NoError(t, r.a.Err)
		require.Equal(t, http.StatusServiceUnavailable, r.a.Status, "%s: %s", r.id, r.a.Body)
		require.NotEmpty(t, r.a.Header.Get("Retry-After"))
		if r.a.Took >= outageAnswerBound {
			slow = append(slow, fmt.Sprintf("%s took %s", r.id, r.a.Took.Round(time.Millisecond)))
		}
	}
	require.Empty(t, slow, "each answer within 5s while Postgres hangs")
	thawed := time.Now()
	require.Eventually(t, func() bool {
		return postEvent(testClient, p.BaseURL(), "s", "evt_thawed", stripeSecret).Status == http.StatusOK
	}, 30*time.Second, 100*time.Millisecond)
	t.Logf("slowest answer while frozen: %s; accepting again %s after the thaw", slowest.Round(time.Millisecond), time.Since(thawed).Round(time.Millisecond))
}

// TestCrashOnFinalAttempt: a worker SIGKILLed during an event's LAST
// attempt. The contract (§1.5) wants the event to end completed or dead;
// River's rescuer, though, discards a stuck job whose attempts are used up,
// and nothing in hookline moves the event on: it stays "processing" for
// ever, in neither the dead set nor completed — as it did before this test.
// (Regression test: jobs/ now counts the budget itself, snoozes on database
// errors before the claim, and sweeps events left without a job.)
func TestCrashOnFinalAttempt(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewURL(t)
	first := make(chan struct{})
	var calls atomic.Int32
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if calls.Add(1) == 1 {
			close(first)
			<-r.Context().Done() // hang until the worker dies
		}
	}))
	t.Cleanup(dest.Close)
	cfg := strings.Replace(serveConfig("ADDR", dbURL, dest.URL, "admin_token: "+hostileToken, ""), "max_attempts: 5", "max_attempts: 1", 1)
	addr := freeAddr(t)
	p := startServe(t, writeConfig(t, strings.Replace(cfg, "ADDR", addr, 1)), addr)
	require.Equal(t, http.StatusOK, postEvent(testClient, p.BaseURL(), "s", "evt_last", stripeSecret).Status)
	select {
	case <-first:
	case <-time.After(30 * time.Second):
		t.Fatal("never delivered")
	}
	p.Kill()
	addr2 := freeAddr(t)
	p2 := startServe(t, writeConfig(t, strings.Replace(cfg, "ADDR", addr2, 1)), addr2)
	pool := connect(t, dbURL)
	deadline := time.Now().Add(rescueBound)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for ; ; <-tick.C {
		st, err := states(context.Background(), pool)
		if err == nil && (st["evt_last"] == "completed" || st["evt_last"] == "dead") {
			break
		}
		if time.Now().After(deadline) {
			var job string
			_ = pool.QueryRow(context.Background(), `SELECT state || ' after ' || attempt || ' of ' || max_attempts || ' attempts'
				FROM river_job WHERE args->>'event_id' = 'evt_last'`).Scan(&job)
			t.Fatalf("the event is still %q %s after its worker crashed on the last attempt; its River job is %s",
				st["evt_last"], rescueBound, job)
		}
		<-tick.C
	}
	// The killed attempt is in the attempts log, as lost, before the one
	// that took over.
	code, ev := adminGet(t, p2.BaseURL(), "/admin/events/s/evt_last")
	require.Equal(t, http.StatusOK, code)
	log := ev["attempts_log"].([]any)
	require.Len(t, log, 2, "%v", log)
	lost, next := log[0].(map[string]any), log[1].(map[string]any)
	require.EqualValues(t, 1, lost["n"])
	require.EqualValues(t, 0, lost["status"])
	require.True(t, strings.HasPrefix(lost["error"].(string), "lost: "), "%v", lost)
	require.EqualValues(t, 2, next["n"])
	require.EqualValues(t, 2, ev["attempts"])
}

// TestAttemptNotBurntBeforeClaim: a worker dies while its attempt's
// claim transaction is still open (here: blocked on a row lock the test
// holds), so the attempt never reaches the destination and hookline does not
// count it; River's rescuer does count it against max_attempts. With
// max_attempts: 2 and a destination that always fails, the event goes dead
// after ONE destination attempt, though the contract (§6) makes max_attempts
// the number of attempts before the dead set. (Regression test:
// jobs/ now decides finality by its own attempt count.)
func TestAttemptNotBurntBeforeClaim(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewURL(t)
	var calls atomic.Int32
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		calls.Add(1)
		http.Error(w, "always fails", http.StatusInternalServerError)
	}))
	t.Cleanup(dest.Close)
	cfg := strings.Replace(serveConfig("ADDR", dbURL, dest.URL, "", ""), "max_attempts: 5", "max_attempts: 2", 1)
	pool := connect(t, dbURL)
	ctx := context.Background()

	// Ingest only first, so the event exists before any worker runs.
	addr := freeAddr(t)
	in := startServe(t, writeConfig(t, strings.Replace(cfg, "ADDR", addr, 1)), addr, "--role", "ingest")
	require.Equal(t, http.StatusOK, postEvent(testClient, in.BaseURL(), "s", "evt_burnt", stripeSecret).Status)

	// Hold the event's row so the worker's claim transaction blocks.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `SELECT 1 FROM hookline_event_destinations WHERE event_id = 'evt_burnt' FOR UPDATE`)
	require.NoError(t, err)
	addr2 := freeAddr(t)
	w := startServe(t, writeConfig(t, strings.Replace(cfg, "ADDR", addr2, 1)), addr2, "--role", "worker")
	require.Eventually(t, func() bool {
		var n int
		// pg_stat_activity keeps a statement's first 1 KiB: the claim batch
		// (WITH q AS MATERIALIZED …) names the table further on.
		return pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND wait_event_type = 'Lock' AND (query LIKE '%hookline_event_destinations%' OR query LIKE 'WITH q AS MATERIALIZED%')`).Scan(&n) == nil && n > 0
	}, 30*time.Second, 50*time.Millisecond, "the worker's claim transaction blocks on the row lock")
	w.Kill()
	require.NoError(t, tx.Rollback(ctx))

	addr3 := freeAddr(t)
	startServe(t, writeConfig(t, strings.Replace(cfg, "ADDR", addr3, 1)), addr3, "--role", "worker")
	var state string
	var attempts int
	require.Eventually(t, func() bool {
		return pool.QueryRow(ctx, `SELECT state, attempts FROM hookline_event_states WHERE event_id = 'evt_burnt'`).Scan(&state, &attempts) == nil &&
			state == "dead"
	}, rescueBound+30*time.Second, 500*time.Millisecond)
	require.Equal(t, 2, attempts, "dead after %d destination attempts (the destination saw %d); max_attempts is 2", attempts, calls.Load())
}

// A SIGTERM whose drain outlasts shutdown_timeout: the app returns within
// the timeout (plus scheduling slack); the workers stop fetching at once,
// so an event accepted elsewhere after the signal is not started here; the
// attempt the stop cut short is recorded as interrupted and not counted, so
// even on its last attempt (max_attempts: 1) the event does not go dead; the
// next instance forwards it.
func TestShutdownPastItsDeadlineSpendsNoAttempt(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewURL(t)
	var mu sync.Mutex
	got := map[string]int{}
	started := make(chan string, 10)
	hang := make(chan struct{})
	var hanging atomic.Bool
	hanging.Store(true)
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		started <- key
		if hanging.Load() {
			select {
			case <-hang:
			case <-r.Context().Done():
				return
			}
		}
		mu.Lock()
		got[key]++
		mu.Unlock()
	}))
	t.Cleanup(dest.Close)
	t.Cleanup(func() { close(hang) })
	cfg := func(role string) string {
		return fmt.Sprintf(`listen: 127.0.0.1:0
database_url: %q
admin_token: %s
shutdown_timeout: 2s
sources:
  - name: s
    provider: stripe
    secrets: [%q]
    lease: 60s
    destination: {url: %q, timeout: 30s, max_attempts: 1, backoff: {min: 100ms, max: 200ms}}
`, dbURL, hostileToken, stripeSecret, dest.URL) + role
	}
	a := startApp(t, cfg(""), app.Options{})
	in := startApp(t, cfg(""), app.Options{Role: app.RoleIngest})
	require.Equal(t, http.StatusOK, postEvent(testClient, a.url(0), "s", "evt_cut", stripeSecret).Status)
	require.Equal(t, "s:evt_cut", <-started)

	begin := time.Now()
	a.cancel()
	// Accepted elsewhere after the signal: not started by the stopping worker.
	require.Equal(t, http.StatusOK, postEvent(testClient, in.url(0), "s", "evt_after", stripeSecret).Status)
	a.stop(t)
	took := time.Since(begin)
	t.Logf("stopped in %v (shutdown_timeout 2s)", took)
	require.Less(t, took, 2*time.Second+1500*time.Millisecond, "the drain is bounded by shutdown_timeout")
	select {
	case key := <-started:
		t.Fatalf("the stopping worker started %s after the signal", key)
	default:
	}

	pool := connect(t, dbURL)
	ctx := context.Background()
	var state string
	var jobAttempts, logged int
	require.NoError(t, pool.QueryRow(ctx, `SELECT state, job_attempts,
		(SELECT count(*) FROM hookline_attempts a WHERE a.source = r.source AND a.event_id = r.event_id AND a.error LIKE 'interrupted:%')
		FROM hookline_event_destinations r WHERE source = 's' AND event_id = 'evt_cut'`).Scan(&state, &jobAttempts, &logged))
	require.Equal(t, "queued", state, "not dead: the attempt was the worker's stop, not the destination")
	require.Zero(t, jobAttempts, "the interrupted attempt is given back to the budget")
	require.Equal(t, 1, logged, "the attempts log shows the interrupted attempt")

	hanging.Store(false)
	startApp(t, cfg(""), app.Options{Role: app.RoleWorker})
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return got["s:evt_cut"] == 1 && got["s:evt_after"] == 1
	}, 60*time.Second, 50*time.Millisecond, "the next instance forwards both")
}

// /readyz looks at the schema again (at most every 10 s): a database
// migrated down under a running instance turns it unready, instead of a
// load balancer sending it deliveries it answers 503. And a worker started
// with --no-migrate on a database behind the binary says what to do.
func TestReadyzNoticesAMigrationDown(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewURL(t)
	ip := startApp(t, serveConfig("127.0.0.1:0", dbURL, "http://127.0.0.1:9/x", "", ""), app.Options{})
	code, _, body := get(ip.url(0) + "/readyz")
	require.Equal(t, http.StatusOK, code, body)

	pool := connect(t, dbURL)
	require.NoError(t, migrations.Down(context.Background(), pool, false, nil)) // the last of hookline's migrations
	require.Eventually(t, func() bool {
		code, _, body = get(ip.url(0) + "/readyz")
		return code == http.StatusServiceUnavailable
	}, 30*time.Second, 200*time.Millisecond, "readyz still %d %s", code, body)

	cfg, err := config.Parse([]byte(serveConfig("127.0.0.1:0", dbURL, "http://127.0.0.1:9/x", "", "")), os.Getenv)
	require.NoError(t, err)
	_, err = app.New(context.Background(), cfg, app.Options{Role: app.RoleWorker, NoMigrate: true, Logger: slog.New(slog.DiscardHandler)})
	require.ErrorContains(t, err, "database not migrated: run `hookline migrate up` (or start without --no-migrate)")
}
