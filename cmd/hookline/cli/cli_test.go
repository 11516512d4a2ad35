package cli_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	stripewebhook "github.com/stripe/stripe-go/v82/webhook"

	"github.com/hookline/hookline/internal/pgtest"
	"github.com/hookline/hookline/internal/proctest"
	"github.com/hookline/hookline/jobs"
)

// The subprocess helpers are internal/proctest's, shared with internal/app.
var (
	binary      = proctest.Binary
	freeAddr    = proctest.FreeAddr
	writeConfig = proctest.WriteConfig
	startServe  = proctest.Serve
)

func run(t *testing.T, args ...string) (int, string) {
	cmd := exec.Command(binary(t), args...)
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0") // the race runtime otherwise pauses 1s at exit
	out, _ := cmd.CombinedOutput()
	return cmd.ProcessState.ExitCode(), string(out)
}

func TestCheckExitCodes(t *testing.T) {
	t.Parallel()
	bad := writeConfig(t, "database_url: x\nsources:\n  - {name: a, provider: nope, secrets: [s]}\n")
	code, out := run(t, "check", "--config", bad)
	require.Equal(t, 2, code, out)
	require.Contains(t, out, "sources[0].provider")

	const src = "sources:\n  - {name: a, provider: stripe, secrets: [s], destination: {url: 'http://127.0.0.1:9/x'}}\n"
	good := writeConfig(t, "database_url: postgres://u:pw@127.0.0.1:5432/db\n"+src)
	code, out = run(t, "check", "--config", good)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "stripe")

	// What serve would refuse, check refuses too, naming the field.
	for want, cfg := range map[string]string{
		"database_url: required":                                                 src,
		"database_url: cannot parse":                                             "database_url: 'not a url'\n" + src,
		"listen: \"notaport\": want host:port":                                   "database_url: postgres://h/db\nlisten: notaport\n" + src,
		"listen: \"127.0.0.1:99999\": the port must be a number from 0 to 65535": "database_url: postgres://h/db\nlisten: '127.0.0.1:99999'\n" + src,
		"admin_listen: \"127.0.0.1:x\": the port":                                "database_url: postgres://h/db\nadmin_listen: '127.0.0.1:x'\n" + src,
		"sources[0].destination.url: required":                                   "database_url: postgres://h/db\nsources:\n  - {name: a, provider: stripe, secrets: [s]}\n",
		"workers: want a whole number, not text":                                 "database_url: postgres://h/db\nworkers: lots\n" + src,
	} {
		code, out = run(t, "check", "--config", writeConfig(t, cfg))
		require.Equal(t, 2, code, out)
		require.Contains(t, out, want)
	}
	// A number from the environment fills a numeric field.
	cmd := exec.Command(binary(t), "check", "--config", writeConfig(t, "database_url: postgres://h/db\nworkers: ${HL_TEST_WORKERS}\n"+src))
	cmd.Env = append(os.Environ(), "HL_TEST_WORKERS=7", "GORACE=atexit_sleep_ms=0")
	got, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", got)
	require.Contains(t, string(got), "workers 7")

	code, _ = run(t, "check", "--config", filepath.Join(t.TempDir(), "missing.yaml"))
	require.Equal(t, 2, code)

	// --db: a database that cannot be reached or is not migrated is a bad
	// database_url (check answers 0 or 2); a migrated one passes.
	for url, want := range map[string]string{
		"postgres://u:pw@127.0.0.1:1/db":             "database_url: postgres unreachable",
		pgtest.NewEmptyPool(t).Config().ConnString(): "database_url: database not migrated: run `hookline migrate up`",
		pgtest.NewURL(t):                             "database: reachable and migrated",
	} {
		code, out = run(t, "check", "--db", "--config", writeConfig(t, fmt.Sprintf("database_url: %q\n", url)+src))
		require.Contains(t, out, want, url)
		require.Equal(t, map[bool]int{true: 0, false: 2}[strings.HasPrefix(want, "database:")], code, out)
	}

	// migrate -h lists its directions and flags, with or without a config.
	code, out = run(t, "migrate", "-h")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "up|down|status")
	require.Contains(t, out, "-all")
	code, out = run(t, "migrate", "sideways")
	require.Equal(t, 2, code, out)
	require.Contains(t, out, `unknown direction "sideways"`)

	code, out = run(t, "providers")
	require.Equal(t, 0, code, out)
	for _, p := range []string{"stripe", "paypal", "adyen", "hmac", "svix"} {
		require.Contains(t, out, p)
	}
	require.Regexp(t, `(?m)^hmac +per source: hmac\.header +\(configure event_id\)`, out, "hmac's header is the source's own")
}

const secret = "whsec_cmd_test"

func stripeDelivery(t *testing.T, addr, id string) (int, string) {
	body := []byte(`{"id":"` + id + `","type":"charge.succeeded","created":1764504000}`)
	sig := stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: time.Now()}).Header
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/webhooks/s", bytes.NewReader(body))
	req.Header.Set("Stripe-Signature", sig)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func config(dbURL, addr, dest string, extra string) string {
	return fmt.Sprintf(`listen: %q
database_url: %q
workers: 4
shutdown_timeout: 10s
sources:
  - name: s
    provider: stripe
    secrets: [%q]
    lease: 3s
    destination:
      url: %q
      timeout: 2s
      max_attempts: 5
      backoff: {min: 100ms, max: 1s}
%s`, addr, dbURL, secret, dest, extra)
}

// eventState is the event's state as the admin event lookup reports it
// (queued, processing — a live claim —, completed, dead).
func eventState(t *testing.T, dbURL, id string) (state string, attempts int) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	defer pool.Close()
	st, err := jobs.NewEvents(pool).Lookup(ctx, "s", id)
	if errors.Is(err, jobs.ErrEventNotFound) {
		return "", 0
	}
	require.NoError(t, err)
	return st.State, st.Attempts
}

// TestSIGTERMDrains: SIGTERM stops accepting, finishes in-flight work and exits 0.
func TestSIGTERMDrains(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewURL(t)
	release := make(chan struct{})
	var got atomic.Int32
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
			got.Add(1)
		case <-r.Context().Done(): // the test failed early: let dest.Close return
		}
	}))
	t.Cleanup(dest.Close)
	addr := freeAddr(t)
	p := startServe(t, writeConfig(t, config(dbURL, addr, dest.URL, "")), addr)
	code, body := stripeDelivery(t, addr, "evt_term")
	require.Equal(t, http.StatusOK, code, body)
	require.Eventually(t, func() bool { s, _ := eventState(t, dbURL, "evt_term"); return s == "processing" }, 20*time.Second, 20*time.Millisecond)

	require.NoError(t, p.Cmd.Process.Signal(syscall.SIGTERM))
	close(release) // the in-flight job finishes during the drain
	select {
	case <-p.Exited:
	case <-time.After(20 * time.Second):
		t.Fatal("hookline did not exit within shutdown_timeout")
	}
	require.Equal(t, 0, p.Cmd.ProcessState.ExitCode(), p.Out())
	require.EqualValues(t, 1, got.Load())
	s, _ := eventState(t, dbURL, "evt_term")
	require.Equal(t, "completed", s)
}

// TestWorkerKilledMidDelivery: a worker process SIGKILLed during a
// destination call leaves its claim processing; after a restart, once the
// lease runs out, the event is delivered again with the same Idempotency-Key,
// never twice at the same time, and ends completed.
func TestWorkerKilledMidDelivery(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewURL(t)
	var mu sync.Mutex
	var keys []string
	var inFlight, maxInFlight, calls atomic.Int32
	firstCall := make(chan struct{})
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			m := maxInFlight.Load()
			if n <= m || maxInFlight.CompareAndSwap(m, n) {
				break
			}
		}
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key")+" attempt="+r.Header.Get("Hookline-Attempt"))
		mu.Unlock()
		_, _ = io.Copy(io.Discard, r.Body) // lets net/http notice the caller's death
		if calls.Add(1) == 1 {
			close(firstCall)
			select { // hang until the caller dies
			case <-r.Context().Done():
			case <-time.After(2 * time.Minute):
			}
			return
		}
	}))
	t.Cleanup(dest.Close)
	addr := freeAddr(t)
	cfg := writeConfig(t, config(dbURL, addr, dest.URL, ""))
	p := startServe(t, cfg, addr)
	code, body := stripeDelivery(t, addr, "evt_crash")
	require.Equal(t, http.StatusOK, code, body)
	select {
	case <-firstCall:
	case <-time.After(30 * time.Second):
		t.Fatal("the destination was never called")
	}
	require.NoError(t, p.Cmd.Process.Signal(syscall.SIGKILL))
	<-p.Exited
	s, _ := eventState(t, dbURL, "evt_crash")
	require.Equal(t, "processing", s, "the killed worker's claim stays processing until its lease runs out")

	addr2 := freeAddr(t)
	startServe(t, writeConfig(t, config(dbURL, addr2, dest.URL, "")), addr2)
	// lease (3s) + River's rescuer interval (30s) + slack.
	require.Eventually(t, func() bool { s, _ := eventState(t, dbURL, "evt_crash"); return s == "completed" }, 90*time.Second, 100*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	require.GreaterOrEqual(t, len(keys), 2)
	for _, k := range keys {
		require.True(t, strings.HasPrefix(k, "s:evt_crash "), k)
	}
	require.EqualValues(t, 1, maxInFlight.Load(), "never two concurrent deliveries for one key")
}

// TestRoleWorkerServesNoIngest: --role worker answers health, readiness and
// metrics, but not the ingest route.
func TestRoleWorkerServesNoIngest(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewURL(t)
	addr := freeAddr(t)
	startServe(t, writeConfig(t, config(dbURL, addr, "http://127.0.0.1:9/x", "")), addr, "--role", "worker")
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		resp, err := http.Get("http://" + addr + path)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		resp, err = http.Head("http://" + addr + path) // uptime monitors probe with HEAD
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, "HEAD "+path)
	}
	code, _ := stripeDelivery(t, addr, "evt_worker")
	require.Equal(t, http.StatusNotFound, code)
}

// TestSIGTERMWhileMigrating: a SIGTERM while serve waits for the migration
// lock (another instance migrating) is a clean stop: exit 0, saying so.
func TestSIGTERMWhileMigrating(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewURL(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(ctx) })
	_, err = conn.Exec(ctx, `SELECT pg_advisory_lock(x'686f6f6b6c696e65'::bigint)`) // the migrators' lock
	require.NoError(t, err)

	addr := freeAddr(t)
	p := proctest.Start(t, addr, nil, "serve", "--config", writeConfig(t, config(dbURL, addr, "http://127.0.0.1:9/x", "")))
	require.Eventually(t, func() bool {
		var waiting int
		return conn.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`).Scan(&waiting) == nil && waiting > 0
	}, 60*time.Second, 50*time.Millisecond, "serve waits for the migration lock")
	require.NoError(t, p.Cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-p.Exited:
	case <-time.After(20 * time.Second):
		t.Fatal("hookline did not exit after SIGTERM")
	}
	require.Equal(t, 0, p.Cmd.ProcessState.ExitCode(), p.Out())
	require.Contains(t, p.Out(), "stopped while starting")
}
