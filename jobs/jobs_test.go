package jobs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"
	stripewebhook "github.com/stripe/stripe-go/v82/webhook"

	"github.com/hookline/hookline/ingest"
	"github.com/hookline/hookline/internal/pgtest"
	"github.com/hookline/hookline/jobs"
	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/stripe"
)

const secret = "whsec_jobs_test"

type bundle struct {
	pool   *pgxpool.Pool
	client *river.Client[pgx.Tx]
	ingest string
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// start runs ingest and the workers for one source named "s".
func start(t *testing.T, src *jobs.Source, reject bool) *bundle {
	t.Helper()
	return startWith(t, src, reject, func(*jobs.ClientConfig) {})
}

// startWith is start with the client's configuration adjusted by tune.
func startWith(t *testing.T, src *jobs.Source, reject bool, tune func(*jobs.ClientConfig)) *bundle {
	t.Helper()
	return startOrdered(t, src, reject, tune, nil)
}

// startOrdered is startWith for a source whose events are ordered (nil:
// unordered).
func startOrdered(t *testing.T, src *jobs.Source, reject bool, tune func(*jobs.ClientConfig), ordering *ingest.Ordering) *bundle {
	t.Helper()
	pool := pgtest.NewPool(t)
	keepRemovedJobs(t, pool)
	src.Name = "s"
	cfg := jobs.ClientConfig{Pool: pool, Sources: []*jobs.Source{src}, Workers: 20, Logger: quiet()}
	tune(&cfg)
	client, err := jobs.NewClient(cfg)
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, client.Start(ctx))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.Stop(ctx)
	})
	prov, err := stripe.New(providers.Config{Secrets: []string{secret}})
	require.NoError(t, err)
	onDup := ingest.OnDuplicateSkip
	if reject {
		onDup = ingest.OnDuplicateReject
	}
	srv, err := ingest.New(ingest.Config{Pool: pool, River: client, IngestRoutes: true, Batch: true, Logger: quiet(),
		Sources: []*ingest.Source{{Name: "s", Provider: prov, OnDuplicate: onDup, MaxAttempts: src.MaxAttempts, Ordering: ordering}}})
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	return &bundle{pool: pool, client: client, ingest: hs.URL + "/webhooks/s"}
}

// keepRemovedJobs copies each River job row to removed_river_job as it is
// deleted (the worker removes an event's job when the event completes), so
// that a test can still read what River recorded on it: its state when
// removed, its attempt, errors and timestamps. everyJob reads both tables.
func keepRemovedJobs(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `CREATE TABLE removed_river_job (LIKE river_job);
		CREATE FUNCTION keep_removed_river_job() RETURNS trigger LANGUAGE plpgsql AS
			$$ BEGIN INSERT INTO removed_river_job SELECT OLD.*; RETURN OLD; END $$;
		CREATE TRIGGER keep_removed_river_job BEFORE DELETE ON river_job FOR EACH ROW EXECUTE FUNCTION keep_removed_river_job()`)
	require.NoError(t, err)
}

// everyJob is every River job row, those in River's table and those
// removed from it (keepRemovedJobs), as a FROM item.
const everyJob = `(SELECT * FROM river_job UNION ALL SELECT * FROM removed_river_job)`

// send delivers event id as Stripe would, and returns the answer's status
// (accepted or duplicate). Like Stripe it retries a 503 (ingest saturated or
// the database slow, which a loaded test machine can cause), a bounded
// number of times; any other answer must be 200.
func (b *bundle) send(t testing.TB, id string) string {
	t.Helper()
	return b.sendBody(t, []byte(`{"id":"`+id+`","type":"charge.succeeded","created":1764504000}`))
}

// sendBody is send for a Stripe event's whole body.
func (b *bundle) sendBody(t testing.TB, body []byte) string {
	t.Helper()
	for attempt := 1; ; attempt++ {
		sig := stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: time.Now()}).Header
		req, _ := http.NewRequest(http.MethodPost, b.ingest, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Stripe-Signature", sig)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		var out map[string]any
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		require.NoError(t, err)
		if resp.StatusCode == http.StatusServiceUnavailable && attempt < 30 {
			require.NotEmpty(t, resp.Header.Get("Retry-After"), "a 503 carries Retry-After")
			<-time.After(100 * time.Millisecond)
			continue
		}
		require.Equal(t, http.StatusOK, resp.StatusCode, out)
		return out["status"].(string)
	}
}

type eventRow struct {
	State    string
	Attempts int
	LastErr  *string
}

func (b *bundle) event(t testing.TB, id string) eventRow {
	var r eventRow
	err := b.pool.QueryRow(context.Background(), `SELECT state, attempts, last_error FROM hookline_event_destinations WHERE source='s' AND event_id=$1 AND destination='default'`, id).
		Scan(&r.State, &r.Attempts, &r.LastErr)
	require.NoError(t, err)
	return r
}

// waitIdle waits until no event job is left to run, for up to within.
func (b *bundle) waitIdle(t testing.TB, within time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool {
		busy, err := jobs.AnyUnfinishedJob(context.Background(), b.pool)
		require.NoError(t, err)
		return !busy
	}, within, 20*time.Millisecond, "event jobs still unfinished")
}

func (b *bundle) waitState(t testing.TB, id, state string) eventRow {
	t.Helper()
	var r eventRow
	require.Eventually(t, func() bool { r = b.event(t, id); return r.State == state }, 30*time.Second, 20*time.Millisecond,
		"event %s never reached %s", id, state)
	return r
}

type seen struct {
	mu       sync.Mutex
	keys     []string
	attempts []string
	ids      []string
	bodies   [][]byte
}

func (s *seen) record(r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = append(s.keys, r.Header.Get("Idempotency-Key"))
	s.attempts = append(s.attempts, r.Header.Get("Hookline-Attempt"))
	s.ids = append(s.ids, r.Header.Get("Webhook-Id"))
	s.bodies = append(s.bodies, body)
}

func TestDestinationRetriesThenCompletes(t *testing.T) {
	t.Parallel()
	var s seen
	var calls int
	var mu sync.Mutex
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.record(r)
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n <= 3 {
			http.Error(w, "try again", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(dest.Close)
	b := start(t, &jobs.Source{MaxAttempts: 10, BackoffMin: 10 * time.Millisecond, BackoffMax: 40 * time.Millisecond,
		Destination: &jobs.Destination{URL: dest.URL, Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}, false)

	require.Equal(t, "accepted", b.send(t, "evt_retry"))
	r := b.waitState(t, "evt_retry", "completed")
	require.Equal(t, 4, r.Attempts)
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Equal(t, []string{"s:evt_retry", "s:evt_retry", "s:evt_retry", "s:evt_retry"}, s.keys)
	require.Equal(t, []string{"1", "2", "3", "4"}, s.attempts)
	require.Equal(t, "s:evt_retry", s.ids[0], "webhook-id is the Idempotency-Key")
	require.JSONEq(t, `{"id":"evt_retry","type":"charge.succeeded","created":1764504000}`, string(s.bodies[0]))
}

func TestDestinationAlwaysFailsGoesDead(t *testing.T) {
	t.Parallel()
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "broken "+r.Header.Get("Hookline-Attempt"), http.StatusBadGateway)
	}))
	t.Cleanup(dest.Close)
	b := start(t, &jobs.Source{MaxAttempts: 3, BackoffMin: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond,
		Destination: &jobs.Destination{URL: dest.URL}}, false)
	require.Equal(t, "accepted", b.send(t, "evt_dead"))
	r := b.waitState(t, "evt_dead", "dead")
	require.Equal(t, 3, r.Attempts)
	var reason, lastErr string
	var attempts int
	var payload []byte
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT reason, attempts, last_error, payload FROM hookline_dead WHERE event_id='evt_dead'`).
		Scan(&reason, &attempts, &lastErr, &payload))
	require.Equal(t, "failed", reason)
	require.Equal(t, 3, attempts)
	require.Contains(t, lastErr, "502")
	require.Contains(t, lastErr, "broken 3")
	require.JSONEq(t, `{"id":"evt_dead","type":"charge.succeeded","created":1764504000}`, string(payload))

	// A provider re-delivery of a dead event is accepted and, once it
	// succeeds, the event leaves the dead set.
	dest.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "4", r.Header.Get("Hookline-Attempt"), "attempts keep counting")
	})
	require.Equal(t, "accepted", b.send(t, "evt_dead"))
	b.waitState(t, "evt_dead", "completed")
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM hookline_dead WHERE event_id='evt_dead'`).Scan(&n))
	require.Zero(t, n)
}

func TestCompletedEventIsDuplicate(t *testing.T) {
	t.Parallel()
	for _, reject := range []bool{false, true} {
		t.Run("reject="+strconv.FormatBool(reject), func(t *testing.T) {
			t.Parallel()
			var calls sync.Map
			dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				v, _ := calls.LoadOrStore(r.Header.Get("Hookline-Event-Id"), new(int))
				*(v.(*int))++
			}))
			t.Cleanup(dest.Close)
			b := start(t, &jobs.Source{Destination: &jobs.Destination{URL: dest.URL}, Reject: reject}, reject)
			require.Equal(t, "accepted", b.send(t, "evt_once"))
			b.waitState(t, "evt_once", "completed")
			require.Equal(t, "duplicate", b.send(t, "evt_once"))

			// A second job for a completed event (as after a rescue race)
			// does not call the destination. The first was removed with
			// its event's completion; River completes the second.
			_, err := b.client.Insert(context.Background(), jobs.EventArgs{Source: "s", EventID: "evt_once"}, nil)
			require.NoError(t, err)
			require.Eventually(t, func() bool {
				var n int
				_ = b.pool.QueryRow(context.Background(), `SELECT count(*) FROM river_job WHERE state='completed' AND kind='hookline.event'`).Scan(&n)
				return n == 1
			}, 30*time.Second, 20*time.Millisecond)
			var removed []string
			require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT array_agg(state::text) FROM removed_river_job`).Scan(&removed))
			require.Equal(t, []string{"running"}, removed, "the first job, removed while running by its completion")
			v, _ := calls.Load("evt_once")
			require.Equal(t, 1, *(v.(*int)))
			var dead int
			require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM hookline_dead WHERE event_id='evt_once' AND reason='duplicate'`).Scan(&dead))
			if reject {
				require.Equal(t, 2, dead, "the duplicate delivery and the duplicate job")
			} else {
				require.Zero(t, dead)
			}
		})
	}
}

// Backoff doubles from min per attempt, with up to half of the interval
// added at random: min is a floor (never a retry sooner than backoff.min)
// and max a ceiling.
func TestBackoff(t *testing.T) {
	t.Parallel()
	for attempt := 1; attempt <= 30; attempt++ {
		d := jobs.Backoff(time.Second, time.Hour, attempt)
		want := time.Second << min(attempt-1, 12)
		want = min(want, time.Hour)
		require.GreaterOrEqual(t, d, want, "attempt %d", attempt)
		require.LessOrEqual(t, d, min(want+want/2, time.Hour), "attempt %d", attempt)
	}
	for range 1000 {
		require.GreaterOrEqual(t, jobs.Backoff(time.Second, 2*time.Second, 1), time.Second, "min is a floor")
		require.LessOrEqual(t, jobs.Backoff(time.Second, 2*time.Second, 1), 1500*time.Millisecond)
		require.Equal(t, 2*time.Second, jobs.Backoff(time.Second, 2*time.Second, 2), "max is a ceiling")
	}
}

func TestRescueAfterIsTheShortestLease(t *testing.T) {
	t.Parallel()
	require.Equal(t, 2*time.Second, jobs.RescueAfter([]*jobs.Source{{Lease: time.Minute}, {Lease: 2 * time.Second}}))
	require.Equal(t, 5*time.Minute, jobs.RescueAfter(nil))
}

// TestClaimWithoutEvent: a job whose event does not exist is cancelled, and
// the claim its single claim-and-start statement took is given back.
func TestClaimWithoutEvent(t *testing.T) {
	t.Parallel()
	b := start(t, &jobs.Source{Destination: &jobs.Destination{URL: "http://127.0.0.1:1/unused"}}, false)
	ctx := context.Background()
	res, err := b.client.Insert(ctx, jobs.EventArgs{Source: "s", EventID: "evt_ghost"}, nil)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		var state string
		_ = b.pool.QueryRow(ctx, `SELECT state FROM river_job WHERE id = $1`, res.Job.ID).Scan(&state)
		return state == "cancelled"
	}, 30*time.Second, 20*time.Millisecond)
	var claims int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM hookline_claims WHERE key = 'hookline:s:default:evt_ghost'`).Scan(&claims))
	require.Zero(t, claims)
}

// TestProcessingComesFromTheClaim: while a worker holds an event, its row
// stays queued (counting the attempt touches no indexed column, so it can be
// a HOT update) with the attempt counted, and the event lookup reports it
// processing from the live claim.
func TestProcessingComesFromTheClaim(t *testing.T) {
	t.Parallel()
	running := make(chan *jobs.Event, 1)
	finish := make(chan struct{})
	handler := jobs.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev *jobs.Event) error {
		running <- ev
		select {
		case <-finish:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	b := start(t, &jobs.Source{Handler: handler}, false)
	require.Equal(t, "accepted", b.send(t, "evt_held"))
	var ev *jobs.Event
	select {
	case ev = <-running:
	case <-time.After(30 * time.Second):
		t.Fatal("the handler never ran")
	}
	require.Equal(t, 1, ev.Attempt)
	require.Equal(t, "charge.succeeded", ev.Type)
	require.Equal(t, "application/json", ev.ContentType)
	require.Equal(t, "application/json", ev.Headers.Get("Content-Type"), "handlers get the stored headers")
	require.JSONEq(t, `{"id":"evt_held","type":"charge.succeeded","created":1764504000}`, string(ev.Body))
	require.Positive(t, ev.DeliveryID)
	require.False(t, ev.ReceivedAt.IsZero())

	r := b.event(t, "evt_held")
	require.Equal(t, "queued", r.State)
	require.Equal(t, 1, r.Attempts)
	ds := jobs.NewEvents(b.pool)
	st, err := ds.Lookup(context.Background(), "s", "evt_held")
	require.NoError(t, err)
	require.Equal(t, jobs.EventProcessing, st.State)

	close(finish)
	b.waitState(t, "evt_held", "completed")
	st, err = ds.Lookup(context.Background(), "s", "evt_held")
	require.NoError(t, err)
	require.Equal(t, jobs.EventCompleted, st.State)
}
